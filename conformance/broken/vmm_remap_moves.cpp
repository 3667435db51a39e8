// Bug (issue 6): a remap maps the slot's fresh memory wherever the allocator
// puts it instead of at the slot's own address, so the address a captured
// graph holds points at a released range after the first release and remap.
#include "broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &) { xmc::host::vmm_seams().remap_moves_slot = true; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_remap_moves")
