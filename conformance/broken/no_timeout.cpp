// xmc-selftest: fails AFF-NO-HANG,AFF-RESULT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the executor waits for its peers without a bound. The agreement's all_gather gets no
// timeout, and a send or receive that times out is retried forever. A rank that never joins, or
// that fails, then hangs all the others (AFF-NO-HANG), and a peer whose messages never arrive
// leaves its receivers waiting instead of failing within the bound (AFF-RESULT).
#include "broken.hpp"

#include <cstdint>

namespace xmc::broken {
namespace {
struct Ctx {
    const xmc_transport *inner;
};
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    int rc;
    while ((rc = x.inner->send(x.inner->ctx, peer, buf, bytes, tag)) == XMC_ERR_TIMEOUT) {}
    return rc;
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    int rc;
    while ((rc = x.inner->recv(x.inner->ctx, peer, buf, bytes, tag)) == XMC_ERR_TIMEOUT) {}
    return rc;
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t) {
    auto &x = *static_cast<Ctx *>(c);
    return x.inner->all_gather(x.inner->ctx, in, out, bytes, UINT32_MAX);  // "wait as long as it takes"
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !whole_transport(*a->group->transport)) return host()->transfer_execute(inst, a, st);
    Ctx x{a->group->transport};
    xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_no_timeout")
