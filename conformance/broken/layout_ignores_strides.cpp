// xmc-selftest: fails AFF-LAYOUT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the check of a buffer against the layout the plan was made for compares shapes, offsets, kinds and element sizes but not strides (a
// layout check written for dense buffers of one memory kind), so a buffer laid out otherwise than
// the plan assumed is taken, and a rank that pulls by the plan's layout reads the wrong elements.
// Here this rank's entry of the plan's layouts takes the strides from its buffers before the check,
// while its votes still carry the digest of the layouts as given.
#include "broken.hpp"

#include <cstring>
#include <vector>

namespace xmc::broken {
namespace {
struct Ctx {
    const xmc_transport *inner;
    uint64_t digest;  // the digest of the request as the caller made it
};
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    return x.inner->send(x.inner->ctx, peer, buf, bytes, tag);
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    return x.inner->recv(x.inner->ctx, peer, buf, bytes, tag);
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<Ctx *>(c);
    if (bytes != sizeof(host::TransferVote)) return x.inner->all_gather(x.inner->ctx, in, out, bytes, timeout_ms);
    host::TransferVote v;
    std::memcpy(&v, in, sizeof v);
    v.digest = x.digest;
    return x.inner->all_gather(x.inner->ctx, &v, out, bytes, timeout_ms);
}
void ignore(xmc_shard_layout &l, const xmc_shard_buffer &b) {
    if (!l.present || !b.ptr) return;
    for (int d = 0; d < XMC_MAX_DIMS; ++d) l.strides[d] = b.strides[d];  // the bug
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->struct_size < sizeof(xmc_transfer_args) || !a->layouts || !a->group || !a->group->ranks ||
        a->group->my_index < 0 || a->group->my_index >= a->group->size || !a->group->transport ||
        !whole_transport(*a->group->transport))
        return host()->transfer_execute(inst, a, st);
    const int32_t me = a->group->ranks[a->group->my_index];
    std::vector<xmc_plan_layout> layouts(a->layouts, a->layouts + a->layout_count);
    for (xmc_plan_layout &l : layouts)
        if (l.rank == me) ignore(l.source, a->source), ignore(l.target, a->target);
    Ctx x{a->group->transport, host::transfer_digest(*a)};
    const xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    args.layouts = layouts.data();
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_layout_ignores_strides")
