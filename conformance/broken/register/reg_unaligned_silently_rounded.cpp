// xmc-selftest: fails REG-ARGS
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug: under the refuse policy an unaligned range is silently registered as
// its rounded-out range. Large registrations (64 pages and more) take a path
// that rounds to pages, as the driver would, and reports success: the caller
// asked for one range and another is registered.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    const uintptr_t page = 4096, a = reinterpret_cast<uintptr_t>(addr);
    const bool unaligned = a % page != 0 || bytes % page != 0;
    if (out && addr && unaligned && bytes >= 64 * page && bytes <= UINTPTR_MAX - page && a <= UINTPTR_MAX - page - bytes) {
        const uintptr_t lo = a / page * page, hi = (a + bytes + page - 1) / page * page;
        return host()->reg_register(inst, reinterpret_cast<void *>(lo), hi - lo, device, flags, out);  // the bug
    }
    return host()->reg_register(inst, addr, bytes, device, flags, out);
}
void plant(xmc_backend &t) { t.reg_register = reg_register; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_unaligned_silently_rounded")
