// xmc-selftest: fails AFF-STAGING
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-STAGING, on the NCCL path): device staging is sized for a peer direction's whole bytes,
// in one round, whatever the budget (NCCL moves large messages well, so why chunk): the device
// memory a transfer takes grows with the tensor, past what the caller budgeted. Here a transfer
// forced onto NCCL runs with an unlimited budget, while its votes carry the digest of the request
// as given (so the ranks still agree on it).
#include "cuda_broken.hpp"
#include "transfer_protocol.hpp"

#include <cstring>

namespace xmc::broken_cuda {
namespace {
struct Ctx {
    const xmc_transport *inner;
    uint64_t digest;  // of the request as the caller made it
};
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c)->inner;
    return x.send(x.ctx, peer, buf, bytes, tag);
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c)->inner;
    return x.recv(x.ctx, peer, buf, bytes, tag);
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<Ctx *>(c);
    if (bytes != sizeof(transfer::TransferVote)) return x.inner->all_gather(x.inner->ctx, in, out, bytes, timeout_ms);
    transfer::TransferVote v;
    std::memcpy(&v, in, sizeof v);
    v.digest = x.digest;
    return x.inner->all_gather(x.inner->ctx, &v, out, bytes, timeout_ms);
}

xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->struct_size < sizeof(xmc_transfer_args) || a->path != XMC_PATH_NCCL || !a->group ||
        !a->group->ranks || !a->group->transport || !a->group->transport->send || !a->group->transport->recv ||
        !a->group->transport->all_gather || a->elem_size == 0 || a->staging_budget < a->elem_size)
        return reference()->transfer_execute(inst, a, st);
    Ctx x{a->group->transport, transfer::transfer_digest(*a)};
    const xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    args.staging_budget = UINT64_MAX;  // the bug
    return reference()->transfer_execute(inst, &args, st);
}
} // namespace
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_staging_over_budget")
