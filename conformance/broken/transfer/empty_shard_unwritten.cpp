// xmc-selftest: fails AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: a rank that declares a target shard but whose target map has no pieces is
// silently never written. Here the executor skips the target of a rank the plan writes nothing to,
// as if that rank held no target, so the call succeeds with the shard left as it was.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->ranks || a->group->my_index < 0 || a->group->my_index >= a->group->size ||
        (a->plan.segment_count > 0 && !a->plan.segments))
        return host()->transfer_execute(inst, a, st);
    const int32_t me = a->group->ranks[a->group->my_index];
    for (size_t i = 0; i < a->plan.segment_count; ++i)
        if (a->plan.segments[i].tgt_rank == me) return host()->transfer_execute(inst, a, st);
    xmc_transfer_args args = *a;
    args.target.ptr = nullptr;  // "no pieces here: nothing to write"
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_empty_shard_unwritten")
