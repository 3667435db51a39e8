// xmc-selftest: fails REG-THREADS
// xmc-selftest: filter REG-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): unregister finds the range under the index's lock, then lets it go and releases the
// pages under the lock of the "driver" (a second mutex, the one the release call needs), and takes
// the index's lock back to erase the entry. Two unregisters of one range both find it, both
// release, both succeed; a registration made in between at the same base is erased by the second.
#include "broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken {
static std::mutex g_driver_mu;  // what the release "needs"; not the index's lock
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (!broken_reg::is(call, "reg_unregister")) return broken_reg::real().release(call, ctx, base, chunk, bytes);
    std::mutex &index = xmc::host::registrations().mu;
    index.unlock();  // the bug: the index let go while the driver releases
    int64_t res = 0;
    {
        std::lock_guard<std::mutex> lock(g_driver_mu);
        res = broken_reg::real().release(call, ctx, base, chunk, bytes);
    }
    index.lock();
    return res;
}
void plant(xmc_backend &) { broken_reg::steps(xmc::host::registrations()).release = release; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_reg_unregister_two_locks")
