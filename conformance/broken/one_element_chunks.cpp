// xmc-selftest: fails AFF-STAGING
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: chunking degenerates to one element per round, so a large 1-D segment
// takes as many rounds as it has elements. Here every staged chunk leaves as one message per element.
#include "broken.hpp"

namespace xmc::broken {
namespace {
struct PerElement {
    const xmc_transport *inner;
    size_t elem;
};
// One message per element: element k of a chunk goes under its own tag.
template <class Op>
int per_element(const PerElement &p, size_t bytes, uint64_t tag, Op op) {
    for (size_t at = 0, k = 0; at < bytes; at += p.elem, ++k)
        if (int rc = op(at, std::min(p.elem, bytes - at), tag * 0x9e3779b97f4a7c15ull + k)) return rc;
    return 0;
}
int send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &p = *static_cast<PerElement *>(ctx);
    return per_element(p, bytes, tag, [&](size_t at, size_t n, uint64_t t) {
        return p.inner->send(p.inner->ctx, peer, static_cast<const char *>(buf) + at, n, t);
    });
}
int recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &p = *static_cast<PerElement *>(ctx);
    return per_element(p, bytes, tag, [&](size_t at, size_t n, uint64_t t) {
        return p.inner->recv(p.inner->ctx, peer, static_cast<char *>(buf) + at, n, t);
    });
}
int all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &p = *static_cast<PerElement *>(ctx);
    return p.inner->all_gather(p.inner->ctx, in, out, bytes, timeout_ms);
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !whole_transport(*a->group->transport) || a->elem_size == 0) return host()->transfer_execute(inst, a, st);
    PerElement p{a->group->transport, a->elem_size};
    xmc_transport tp{&p, send, recv, all_gather, p.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_one_element_chunks")
