// xmc-selftest: fails PIN-REFS,PIN-CLOSE
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Robustness of the runner: a backend that never returns from one
// entry point. Qualification must time that requirement out and go on. The
// entry is pin_ref, which PIN-CLOSE's last close of a still-referenced block
// calls as well.
#include "broken.hpp"

#include <unistd.h>

namespace xmc::broken {
static xmc_status pin_ref(xmc_instance *, const void *) {
    for (;;) pause();
}
void plant(xmc_backend &t) { t.pin_ref = pin_ref; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_hang_in_ref")
