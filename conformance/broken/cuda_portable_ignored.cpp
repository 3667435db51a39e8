// xmc-selftest: fails REG-PORTABLE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): XMC_REG_PORTABLE is accepted and ignored: the range is
// registered without CU_MEMHOSTREGISTER_PORTABLE, for the one device's
// context only, and reported as portable.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    return reference()->reg_register(inst, addr, bytes, device, flags & ~XMC_REG_PORTABLE, out);  // the bug
}
void plant(xmc_backend &t) { t.reg_register = reg_register; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_portable_ignored")
