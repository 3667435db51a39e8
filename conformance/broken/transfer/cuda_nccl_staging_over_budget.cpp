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
#include "transfer_steps.hpp"

namespace xmc::broken_cuda {
namespace {
xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->struct_size < sizeof(xmc_transfer_args) || a->path != XMC_PATH_NCCL || !a->group ||
        !a->group->ranks || !a->group->transport || !a->group->transport->send || !a->group->transport->recv ||
        !a->group->transport->all_gather || a->elem_size == 0 || a->staging_budget < a->elem_size)
        return reference()->transfer_execute(inst, a, st);
    const broken_transfer::AsCaller caller(a);  // its votes: the digest of the request as given
    xmc_transfer_args args = *a;
    args.staging_budget = UINT64_MAX;  // the bug
    return reference()->transfer_execute(inst, &args, st);
}
} // namespace
void plant(xmc_backend &t) {
    t.transfer_execute = transfer_execute;
    broken_transfer::steps().digest = broken_transfer::caller_digest;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_staging_over_budget")
