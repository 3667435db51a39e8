// xmc-selftest: fails REG-LARGE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): a registration split into chunks is not all or nothing.
// When the driver refuses chunk k, the call fails with chunk k's code, but
// chunks 1..k-1 stay registered in the driver, tracked by nobody.
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (broken_reg::is(call, "reg_register")) return 0;  // the bug: the undo "succeeds" untried
    return broken_reg::real().release(call, ctx, base, chunk, bytes);
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).release = release; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_chunk_failure_keeps_earlier")
