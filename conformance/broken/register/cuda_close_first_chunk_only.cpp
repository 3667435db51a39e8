// xmc-selftest: fails REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA, the reference's own until 0.3): the last close releases a registration split into
// chunks (REG-LARGE) by its base alone, as if it were one driver registration: the other chunks stay
// registered in the driver, the registration count stays above zero, and the device's primary
// context stays retained after the last instance is gone.
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (broken_reg::is(call, "close") && chunk != base) return 0;  // the bug: chunk 1 stands for all
    return broken_reg::real().release(call, ctx, base, chunk, bytes);
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).release = release; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_close_first_chunk_only")
