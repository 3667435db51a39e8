// xmc-selftest: fails AFF-AGREE,AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the agreement digest ignores the element type, so ranks whose element sizes
// differ agree and go on to move mismatched bytes. Here each vote carries a digest taken with
// element size 1.
#include "broken.hpp"
#include "transfer_steps.hpp"

#include <vector>

namespace xmc::broken {
namespace {
// The digest step: the request's digest, element size left out.
uint64_t typeless_digest(const xmc_transfer_args &a) {
    xmc_transfer_args typeless = a;
    typeless.elem_size = 1;
    // The plan's layouts carry the element size too (0.2): left out of the digest alike.
    std::vector<xmc_plan_layout> layouts;
    if (a.struct_size >= sizeof(xmc_transfer_args) && a.layouts) {
        layouts.assign(a.layouts, a.layouts + a.layout_count);
        for (xmc_plan_layout &l : layouts) l.elem_size = 1;
        typeless.layouts = layouts.data();
    }
    return broken_transfer::real().digest(typeless);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().digest = typeless_digest; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_digest_ignores_elem_size")
