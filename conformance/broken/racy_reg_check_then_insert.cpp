// xmc-selftest: fails REG-THREADS
// xmc-selftest: filter REG-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): register checks under the lock that the range overlaps no recorded
// one, lets the lock go while it locks the pages, and records the range without
// it: the check and the insert are not one step. Two overlapping registrations
// made at once both pass the check and both succeed, and the insert races every
// other thread's use of the index.
#include "reg_index.hpp"

namespace xmc::broken {
static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    if (xmc_status st = check_register(inst, addr, bytes, device, flags, out); st != XMC_OK) return st;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    RegIndex &x = RegIndex::get();
    {
        std::lock_guard<std::mutex> lock(x.mu);
        if (x.overlaps(a, bytes)) return already(inst, addr);
    }
    // mlock is slow: "no need to hold the index meanwhile".
    if (xmc_status st = lock_pages(inst, addr, bytes); st != XMC_OK) return st;
    x.ranges[a] = bytes;  // the bug: recorded outside the lock that made the check
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}
void plant(xmc_backend &t) {
    use_reg_index(t);
    t.reg_register = reg_register;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_reg_check_then_insert")
