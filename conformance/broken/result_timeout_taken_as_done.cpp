// xmc-selftest: fails AFF-RESULT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (seeds/README.md: transfers that report success having moved nothing): a receive that times
// out is taken to mean the peer had nothing more to send, the chunk is counted as arrived, and the
// call reports success with the bytes of the plan, though the target lacks them. A peer whose
// sends never arrive (while it believes they went) then leaves every rank reporting success.
#include "broken.hpp"

namespace xmc::broken {
namespace {
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<const xmc_transport *>(c);
    return x.send(x.ctx, peer, buf, bytes, tag);
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<const xmc_transport *>(c);
    const int rc = x.recv(x.ctx, peer, buf, bytes, tag);
    return rc == XMC_ERR_TIMEOUT ? 0 : rc;  // the bug
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<const xmc_transport *>(c);
    return x.all_gather(x.ctx, in, out, bytes, timeout_ms);
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !whole_transport(*a->group->transport))
        return host()->transfer_execute(inst, a, st);
    const xmc_transport tp{const_cast<xmc_transport *>(a->group->transport), send, recv, all_gather,
                           a->group->transport->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_result_timeout_taken_as_done")
