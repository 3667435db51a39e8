// xmc-selftest: fails REG-UNREG-FAIL,REG-REUSE,REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): unregister ignores a failed
// cuMemHostUnregister, drops the registration and reports success, so the
// caller frees pages the driver still maps, and the last close does not release what the driver
// kept (REG-CLOSE: the entry is gone).
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    const int64_t res = broken_reg::real().release(call, ctx, base, chunk, bytes);
    return broken_reg::is(call, "reg_unregister") ? 0 : res;  // the bug: the driver's answer dropped
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).release = release; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_unreg_success_over_failure")
