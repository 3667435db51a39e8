// xmc-selftest: fails PIN-REFS,PIN-CLOSE
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Robustness of the runner: a backend that crashes in one entry
// point. Qualification must report that requirement failed with the signal
// and run every other requirement. The entry is pin_ref, which PIN-CLOSE's
// last close of a still-referenced block calls as well.
#include "broken.hpp"

#include <csignal>

namespace xmc::broken {
static xmc_status pin_ref(xmc_instance *, const void *) {
    std::raise(SIGSEGV);
    return XMC_OK;
}
void plant(xmc_backend &t) { t.pin_ref = pin_ref; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_crash_in_ref")
