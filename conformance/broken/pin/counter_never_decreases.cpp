// xmc-selftest: fails PIN-ACCOUNT,PIN-REFS,PIN-THREADS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug: the pinned-bytes counter is incremented on allocation and never
// decremented on free. It breaks PIN-ACCOUNT (bytes now is not the sum of the
// live blocks), PIN-REFS (a block released with its last reference stays
// counted: its release is never reported) and PIN-THREADS (the totals drift
// after every round). Each of their tests brackets the accounting of its own
// frees, so each catches it whatever ran before: a check against a snapshot
// from before the test's blocks existed passed whenever an earlier test had
// already raised the peak.
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
