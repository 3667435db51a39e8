// xmc-selftest: fails AFF-GROUP,AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (seed 003): ranks are read from the default world, not from the group. The executor takes a
// member's position as its rank, as if the group were the world with ranks 0..n-1. That is right
// in the default world only. In a group labelled {3, 9}, or in part of the world, ranks take the
// wrong role: in the seed, both ends thought they were rank 0. It also fails
// AFF-REFUSE-BEFORE-WRITE: ignoring the group's labels, it takes a group with
// negative or repeated labels.
#include "broken.hpp"

#include <numeric>
#include <vector>

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || a->group->size < 1) return host()->transfer_execute(inst, a, st);
    std::vector<int32_t> world_ranks(size_t(a->group->size));
    std::iota(world_ranks.begin(), world_ranks.end(), 0);
    xmc_group g = *a->group;
    g.ranks = world_ranks.data();
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_rank_from_default_world")
