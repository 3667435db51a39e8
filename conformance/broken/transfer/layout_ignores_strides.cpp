// xmc-selftest: fails AFF-LAYOUT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// xmc-selftest: quick
// Bug: the check of a buffer against the layout the plan was made for compares shapes, offsets, kinds and element sizes but not strides (a
// layout check written for dense buffers of one memory kind), so a buffer laid out otherwise than
// the plan assumed is taken, and a rank that pulls by the plan's layout reads the wrong elements.
// Here this rank's entry of the plan's layouts takes the strides from its buffers before the check,
// while its votes still carry the digest of the layouts as given.
#include "broken.hpp"
#include "transfer_steps.hpp"

#include <vector>

namespace xmc::broken {
namespace {
void ignore(xmc_shard_layout &l, const xmc_shard_buffer &b) {
    if (!l.present || !b.ptr) return;
    for (int d = 0; d < XMC_MAX_DIMS; ++d) l.strides[d] = b.strides[d];  // the bug
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->struct_size < sizeof(xmc_transfer_args) || !a->layouts || !a->group || !a->group->ranks ||
        a->group->my_index < 0 || a->group->my_index >= a->group->size)
        return host()->transfer_execute(inst, a, st);
    const int32_t me = a->group->ranks[a->group->my_index];
    std::vector<xmc_plan_layout> layouts(a->layouts, a->layouts + a->layout_count);
    for (xmc_plan_layout &l : layouts)
        if (l.rank == me) ignore(l.source, a->source), ignore(l.target, a->target);
    const broken_transfer::AsCaller caller(a);  // its votes still carry the digest of the layouts as given
    xmc_transfer_args args = *a;
    args.layouts = layouts.data();
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) {
    t.transfer_execute = transfer_execute;
    broken_transfer::steps().digest = broken_transfer::caller_digest;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_layout_ignores_strides")
