// xmc-selftest: fails AFF-EXEC-EXACT,AFF-MAP-FLAT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (seed 003): a 0-D segment is taken for an empty one ("if not segment.shape"), so the valid
// plan of a scalar parameter is refused instead of executed. AFF-MAP-FLAT fails too: a scalar
// parameter in a ZeRO-3 flat buffer (a 0-D tensor in a 1-D shard) is refused the same way.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    for (size_t i = 0; a && a->plan.segments && i < a->plan.segment_count; ++i)
        if (a->plan.segments[i].ndim == 0)
            return be::fail(inst, XMC_ERR_REFUSED, 0, "transfer_execute",
                            "transfer_execute: segment %zu: dimensionality does not match its logical shape", i);
    return host()->transfer_execute(inst, a, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_scalar_rejected")
