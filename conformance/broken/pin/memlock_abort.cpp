// xmc-selftest: fails PIN-MEMLOCK,PIN-FAIL-CLEAN
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// xmc-selftest: needs-mlock
// Bug: the allocator aborts the process when mlock hits RLIMIT_MEMLOCK (a
// memlock refusal is also one of PIN-FAIL-CLEAN's).
#include "broken.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

namespace xmc::broken {
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t align, int32_t dev, xmc_pin_result *out) {
    xmc_status st = host()->pin_alloc(inst, n, align, dev, out);
    if (st == XMC_ERR_MEMLOCK) std::abort();
    return st;
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_memlock_abort")
