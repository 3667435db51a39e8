// xmc-selftest: fails AFF-REFUSE-BEFORE-WRITE,AFF-MAP-FLAT,AFF-LAYOUT,AFF-PATH
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: local segments are copied before the ranks agree, so a request that another rank refuses
// has already written this rank's target. Here the local part of the plan runs first, alone.
// AFF-MAP-FLAT fails too: a flat shard on a buffer the executors refuse (elements not evenly
// spaced) has had its local part written before the refusal. AFF-LAYOUT and AFF-PATH the same
// way: a buffer whose layout differs from the plan's, or ranks that disagree on a data path, are
// refused by every rank, but only after this rank's local part was written.
#include "broken.hpp"

#include <cstring>
#include <vector>

namespace xmc::broken {
namespace {
// A group of one: the all_gather of one member is a copy.
int no_send(void *, int32_t, const void *, size_t, uint64_t) { return XMC_ERR_PEER_FAILED; }
int no_recv(void *, int32_t, void *, size_t, uint64_t) { return XMC_ERR_PEER_FAILED; }
int gather_self(void *, const void *in, void *out, size_t bytes, uint32_t) {
    std::memcpy(out, in, bytes);
    return 0;
}
const xmc_transport kAlone{nullptr, no_send, no_recv, gather_self, "alone"};
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    const xmc_group *g = a ? a->group : nullptr;
    if (g && g->ranks && g->my_index >= 0 && g->my_index < g->size && a->plan.segments) {
        const int32_t me = g->ranks[g->my_index];
        std::vector<xmc_segment> local;
        for (size_t i = 0; i < a->plan.segment_count; ++i)
            if (a->plan.segments[i].src_rank == me && a->plan.segments[i].tgt_rank == me)
                local.push_back(a->plan.segments[i]);
        xmc_group alone{0, 1, &me, &kAlone, g->timeout_ms};
        xmc_transfer_args early = *a;
        early.plan = xmc_plan_view{local.data(), local.size(), a->plan.digest};
        early.group = &alone;
        xmc_transfer_stats ignored{};
        host()->transfer_execute(inst, &early, &ignored);  // writes now, whatever the others say
    }
    return host()->transfer_execute(inst, a, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_writes_before_agreement")
