// xmc-selftest: fails PIN-ACCOUNT,PIN-THREADS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug: the pinned-bytes counter is incremented on allocation and never
// decremented on free.
#include "broken.hpp"

#include <atomic>

namespace xmc::broken {
static xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) {
    xmc_status st = host()->pin_stats(inst, out);
    if (st == XMC_OK) out->bytes_now = out->bytes_peak;  // what an add-only counter reports
    return st;
}
void plant(xmc_backend &t) { t.pin_stats = pin_stats; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_counter_never_decreases")
