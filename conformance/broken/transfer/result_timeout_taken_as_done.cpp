// xmc-selftest: fails AFF-RESULT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (a transfer that reports success having moved nothing): a receive that times
// out is taken to mean the peer had nothing more to send, the chunk is counted as arrived, and the
// call reports success with the bytes of the plan, though the target lacks them. A peer whose
// sends never arrive (while it believes they went) then leaves every rank reporting success.
#include "transport_wrap.hpp"

namespace xmc::broken {
namespace {
struct TimeoutIsDone : WrappedTransport {
    int recv(int32_t peer, void *buf, size_t bytes, uint64_t tag) override {
        const int rc = WrappedTransport::recv(peer, buf, bytes, tag);
        return rc == XMC_ERR_TIMEOUT ? 0 : rc;  // the bug
    }
};
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a) return host()->transfer_execute(inst, a, st);
    TimeoutIsDone w;
    return execute_over(inst, *a, st, w);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_result_timeout_taken_as_done")
