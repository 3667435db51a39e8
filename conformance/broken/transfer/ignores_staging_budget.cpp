// xmc-selftest: fails AFF-STAGING
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the staging budget is agreed on but not applied: each peer direction is staged whole, in
// one message, however large. (The votes still carry the digest of the request as given.)
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->ranks || a->elem_size == 0 || a->staging_budget < a->elem_size)
        return host()->transfer_execute(inst, a, st);
    const broken_transfer::AsCaller caller(a);  // its votes: the digest of the request the caller made
    xmc_transfer_args args = *a;
    args.staging_budget = UINT64_MAX;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) {
    t.transfer_execute = transfer_execute;
    broken_transfer::steps().digest = broken_transfer::caller_digest;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_ignores_staging_budget")
