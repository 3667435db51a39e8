// xmc-selftest: fails REG-ARGS
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug: an unaligned range is reported as out of memory. Large registrations
// (64 pages and more) are locked as their rounded-out range first, and a
// range the backend then finds unaligned is answered with the status of a
// failed lock, out of memory, instead of the invalid argument it is.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    const uintptr_t page = 4096, a = reinterpret_cast<uintptr_t>(addr);
    const bool unaligned = a % page != 0 || bytes % page != 0;
    if (out && addr && unaligned && bytes >= 64 * page && bytes <= UINTPTR_MAX - page && a <= UINTPTR_MAX - page - bytes)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 12, "reg_register",
                        "reg_register: cannot lock [%p, +%zu): out of memory", addr, bytes);  // the bug
    return host()->reg_register(inst, addr, bytes, device, flags, out);
}
void plant(xmc_backend &t) { t.reg_register = reg_register; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_unaligned_out_of_memory")
