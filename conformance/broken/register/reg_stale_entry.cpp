// xmc-selftest: fails REG-REUSE
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// xmc-selftest: needs-mlock
// xmc-selftest: quick
// Bug: a tracking entry left behind. Unregister releases the range, but its
// (base, size) stays in a cache of "ranges known to the driver"; a later
// registration of the same range, after the caller freed the memory and got
// it back at the same address, finds the stale entry and reports success
// without asking the driver: reg_query reports a registration the driver does
// not map (the host's pages are not locked).
#include "broken.hpp"
#include "reg_steps.hpp"

#include <mutex>
#include <set>

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<std::pair<void *, size_t>> known;  // ranges released, still "known to the driver"
xmc_status make(xmc_instance *inst, const char *call, void *ctx, void *addr, size_t bytes, int32_t device,
                uint32_t flags, int64_t *native) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (known.count({addr, bytes})) return XMC_OK;  // the bug: taken as made, the driver not asked
    }
    return broken_reg::real().make(inst, call, ctx, addr, bytes, device, flags, native);
}
int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    const int64_t res = broken_reg::real().release(call, ctx, base, chunk, bytes);
    if (res == 0 && broken_reg::is(call, "reg_unregister")) {
        std::lock_guard<std::mutex> lock(mu);
        known.insert({chunk, bytes});
    }
    return res;
}
} // namespace
void plant(xmc_backend &) {
    be::RegOps &ops = broken_reg::steps(xmc::host::registrations());
    ops.make = make;
    ops.release = release;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_stale_entry")
