// xmc-selftest: fails REG-THREADS
// xmc-selftest: filter REG-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): register takes no lock ("mlock is slow"): its overlap check and its insert are not
// one step with anything else. Two overlapping registrations made at once both pass the check and
// both succeed, and the insert races every other thread's use of the index.
#include "broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken {
static void lock(std::mutex &mu, const char *call) {
    if (!broken_reg::is(call, "reg_register")) mu.lock();  // the bug: register runs unlocked
}
static void unlock(std::mutex &mu, const char *call) {
    if (!broken_reg::is(call, "reg_register")) mu.unlock();
}
void plant(xmc_backend &) {
    be::RegOps &ops = broken_reg::steps(xmc::host::registrations());
    ops.lock = lock;
    ops.unlock = unlock;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_reg_register_unlocked")
