// xmc-selftest: fails CORE-INSTANCE
// xmc-selftest: base cuda
// xmc-selftest: filter CORE-INSTANCE
// xmc-selftest: timeout 60
// Bug (on CUDA): with no driver (or one that lists no device), stream_create answers what it
// guesses the driver would have said, CUDA_ERROR_NO_DEVICE as a driver failure, instead of
// unsupported with the reason: an invented native code where no driver answered. The bug is the
// readiness step of the CUDA StreamOps, for stream_create.
#include "cuda_broken.hpp"
#include "stream_steps.hpp"

#include <cstring>

namespace xmc::broken_cuda {
static xmc_status ready(xmc_instance *inst, int32_t device, const char *call) {
    if (std::strcmp(call, "stream_create") == 0 && xmc::cuda::Driver::get().devices.empty())  // the bug
        return be::fail(inst, XMC_ERR_DRIVER, CUDA_ERROR_NO_DEVICE, "stream_create",
                        "stream_create: cuStreamCreate failed with CUDA_ERROR_NO_DEVICE (100)");
    return broken_steps::real<be::StreamOps>().ready(inst, device, call);
}
void plant(xmc_backend &) { broken_steps::steps(xmc::cuda::stream_ops()).ready = ready; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_stream_no_driver_as_driver_error")
