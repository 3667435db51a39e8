// xmc-selftest: fails PIN-MEMLOCK,PIN-FAIL-CLEAN
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// xmc-selftest: needs-mlock
// Bug: when mlock hits RLIMIT_MEMLOCK the allocator reports the error but
// leaks the block it had allocated (a memlock refusal is also one of
// PIN-FAIL-CLEAN's, which finds the leak too).
#include "broken.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace xmc::broken {
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t align, int32_t dev, xmc_pin_result *out) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = nullptr;
    if (n && posix_memalign(&p, page, (n + page - 1) / page * page) == 0 && mlock(p, n) != 0)
        return be::fail(inst, XMC_ERR_MEMLOCK, errno, "pin_alloc", "pin_alloc: mlock failed: RLIMIT_MEMLOCK");
    if (p) { munlock(p, n); std::free(p); }
    return host()->pin_alloc(inst, n, align, dev, out);
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_memlock_leak")
