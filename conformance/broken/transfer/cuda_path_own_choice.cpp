// xmc-selftest: fails AFF-PATH
// xmc-selftest: base cuda
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-PATH, on CUDA): each rank takes the data path its own caller asked for to every peer,
// as if every peer's caller had asked for the same, and the agreement does not compare the ranks'
// path tables. A rank told to stage then sends chunks to peers that pull from its buffer directly
// (or the reverse): targets are written, and the ranks fail late or hang, instead of all refusing
// before any write. Here the offers a rank gathers are read with its own forced path in every
// entry, and every vote it gathers is read with its own path digest.
#include "cuda_broken.hpp"
#include "transfer_protocol.hpp"

#include <cstring>

namespace xmc::broken_cuda {
namespace {
using transfer::PathOffer;
using transfer::TransferVote;

struct Ctx {
    const xmc_transport *inner;
    int size;  // the group's: entries in a gather
};
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c)->inner;
    return x.send(x.ctx, peer, buf, bytes, tag);
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c)->inner;
    return x.recv(x.ctx, peer, buf, bytes, tag);
}
template <class T, class Edit>
void rewrite(const void *in, void *out, int n, Edit &&edit) {
    T me, e;
    std::memcpy(&me, in, sizeof me);
    for (int k = 0; k < n; ++k) {
        char *at = static_cast<char *>(out) + size_t(k) * sizeof(T);
        std::memcpy(&e, at, sizeof e);
        edit(me, e);
        std::memcpy(at, &e, sizeof e);
    }
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<Ctx *>(c);
    const int rc = x.inner->all_gather(x.inner->ctx, in, out, bytes, timeout_ms);
    if (rc != 0) return rc;
    if (bytes == sizeof(PathOffer))  // the bug: my caller's path for every pair
        rewrite<PathOffer>(in, out, x.size, [](const PathOffer &me, PathOffer &e) { e.forced = me.forced; });
    else if (bytes == sizeof(TransferVote))  // the bug: the paths are not part of the agreement
        rewrite<TransferVote>(in, out, x.size, [](const TransferVote &me, TransferVote &e) { e.paths = me.paths; });
    return rc;
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->struct_size < sizeof(xmc_transfer_args) || !a->group || !a->group->transport ||
        !a->group->transport->send || !a->group->transport->recv || !a->group->transport->all_gather)
        return reference()->transfer_execute(inst, a, st);
    Ctx x{a->group->transport, a->group->size};
    const xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return reference()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_path_own_choice")
