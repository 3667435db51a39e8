// xmc-selftest: fails AFF-MAP-FLAT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the executor still demands that the plan write every element of a target shard (the rule
// before flat shards had padding), so a ZeRO-3 flat target with padding, which no plan writes, is
// refused. Here a rank whose plan writes some but not all of its target shard drops the target
// binding, and the host refuses the request, on every rank and before any write.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->ranks || a->group->my_index < 0 || a->group->my_index >= a->group->size ||
        (a->plan.segment_count > 0 && !a->plan.segments) || a->target.ndim < 0 || a->target.ndim > XMC_MAX_DIMS)
        return host()->transfer_execute(inst, a, st);
    const int32_t me = a->group->ranks[a->group->my_index];
    int64_t written = 0, shard = 1;
    for (size_t i = 0; i < a->plan.segment_count; ++i) {
        const xmc_segment &s = a->plan.segments[i];
        if (s.tgt_rank != me || s.ndim < 0 || s.ndim > XMC_MAX_DIMS) continue;
        int64_t volume = 1;
        for (int d = 0; d < s.ndim; ++d) volume *= s.extents[d];
        written += volume;
    }
    for (int d = 0; d < a->target.ndim; ++d) shard *= a->target.shape[d];
    if (!a->target.ptr || written == 0 || written >= shard) return host()->transfer_execute(inst, a, st);
    xmc_transfer_args args = *a;
    args.target.ptr = nullptr;  // "the plan does not write this shard whole: not a target I can take"
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_whole_target_demanded")
