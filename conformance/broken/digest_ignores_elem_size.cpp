// xmc-selftest: fails AFF-AGREE,AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the agreement digest ignores the element type, so ranks whose element sizes
// differ agree and go on to move mismatched bytes. Here each vote carries a digest taken with
// element size 1.
#include "broken.hpp"

#include <cstring>
#include <vector>

namespace xmc::broken {
namespace {
struct Ctx {
    const xmc_transport *inner;
    uint64_t digest;  // the request's digest, element size left out
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
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !a->group->ranks) return host()->transfer_execute(inst, a, st);
    xmc_transfer_args typeless = *a;
    typeless.elem_size = 1;
    // The plan's layouts carry the element size too (0.2): left out of the digest alike.
    std::vector<xmc_plan_layout> layouts;
    if (a->struct_size >= sizeof(xmc_transfer_args) && a->layouts) {
        layouts.assign(a->layouts, a->layouts + a->layout_count);
        for (xmc_plan_layout &l : layouts) l.elem_size = 1;
        typeless.layouts = layouts.data();
    }
    Ctx x{a->group->transport, host::transfer_digest(typeless)};
    xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_digest_ignores_elem_size")
