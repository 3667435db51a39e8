// xmc-selftest: fails REG-PORTABLE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): XMC_REG_PORTABLE is accepted and ignored: the range is
// registered without CU_MEMHOSTREGISTER_PORTABLE, for the one device's
// context only, and reported as portable.
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static xmc_status make(xmc_instance *inst, const char *call, void *ctx, void *addr, size_t bytes, int32_t device,
                       uint32_t flags, int64_t *native) {
    return broken_reg::real().make(inst, call, ctx, addr, bytes, device, flags & ~XMC_REG_PORTABLE, native);  // the bug
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).make = make; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_portable_ignored")
