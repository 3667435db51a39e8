// xmc-selftest: fails REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 30
// xmc-selftest: ctest-timeout 300
// Bug (CUDA): registrations are tracked in a registry of their own that the
// close does not walk: closing the last instance releases the pinned blocks
// and the contexts it knows of, and leaves every registration the user still
// held registered in the driver, for good.
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (broken_reg::is(call, "close")) return 0;  // the bug: the close forgets what it should release
    return broken_reg::real().release(call, ctx, base, chunk, bytes);
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).release = release; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_close_keeps_registrations")
