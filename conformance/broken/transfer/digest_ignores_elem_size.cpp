// xmc-selftest: fails AFF-AGREE,AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the agreement digest ignores the element type, so ranks whose element sizes
// differ agree and go on to move mismatched bytes. Here each vote carries a digest taken with
// element size 1.
#include "transport_wrap.hpp"

#include <vector>

namespace xmc::broken {
static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !a->group->ranks) return host()->transfer_execute(inst, a, st);
    xmc_transfer_args typeless = *a;
    typeless.elem_size = 1;
    // The plan's layouts carry the element size too (0.2): left out of the digest alike.
    std::vector<xmc_plan_layout> layouts;
    if (a->struct_size >= sizeof(xmc_transfer_args) && a->layouts) {
        layouts.assign(a->layouts, a->layouts + a->layout_count);
        for (xmc_plan_layout &l : layouts) l.elem_size = 1;
        typeless.layouts = layouts.data();
    }
    DigestSwap w;
    w.digest = host::transfer_digest(typeless);  // the request's digest, element size left out
    return execute_over(inst, *a, st, w);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_digest_ignores_elem_size")
