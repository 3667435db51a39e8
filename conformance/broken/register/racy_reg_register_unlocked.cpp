// xmc-selftest: fails REG-THREADS
// xmc-selftest: filter REG-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): register takes no lock ("mlock is slow"): its overlap check and its insert are not
// one step with anything else. Two overlapping registrations made at once both pass the check and
// both succeed, and the insert races every other thread's use of the index.
#include "broken.hpp"
#include "reg_steps.hpp"
#include "skip_lock.hpp"

namespace xmc::broken {
constexpr char kUnlocked[] = "reg_register";  // the bug: register runs unlocked
using Steps = broken_lock::SkipLock<kUnlocked>;
void plant(xmc_backend &) {
    be::RegOps &ops = broken_reg::steps(xmc::host::registrations());
    ops.lock = Steps::lock;
    ops.unlock = Steps::unlock;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_reg_register_unlocked")
