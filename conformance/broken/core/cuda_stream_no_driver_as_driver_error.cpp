// xmc-selftest: fails CORE-INSTANCE
// xmc-selftest: base cuda
// xmc-selftest: filter CORE-INSTANCE
// xmc-selftest: timeout 60
// Bug (on CUDA): with no driver (or one that lists no device), stream_create answers what it
// guesses the driver would have said, CUDA_ERROR_NO_DEVICE as a driver failure, instead of
// unsupported with the reason: an invented native code where no driver answered.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
static xmc_status stream_create(xmc_instance *inst, int32_t device, xmc_stream **out) {
    int32_t n = 0;
    reference()->device_count(inst, &n);
    if (n == 0 && out)  // the bug
        return be::fail(inst, XMC_ERR_DRIVER, CUDA_ERROR_NO_DEVICE, "stream_create",
                        "stream_create: cuStreamCreate failed with CUDA_ERROR_NO_DEVICE (100)");
    return reference()->stream_create(inst, device, out);
}
void plant(xmc_backend &t) { t.stream_create = stream_create; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_stream_no_driver_as_driver_error")
