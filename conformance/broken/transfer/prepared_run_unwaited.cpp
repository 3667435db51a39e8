// xmc-selftest: fails AFF-PREPARED-EXACT
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: a run does not wait for the work queued on the caller's stream before it reads the
// sources (the stream was waited for at prepare only), so it moves what the sources held before
// the caller's last copy into them landed.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
xmc_stream *no_stream(xmc_stream *) { return nullptr; }
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().run_stream = no_stream; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_run_unwaited")
