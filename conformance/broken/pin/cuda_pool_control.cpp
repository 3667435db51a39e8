// xmc-selftest: fails none
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// The pinned pool of pool_broken.hpp over the fake CUDA driver (pinned with
// cuMemHostRegister: capabilities pin_driver and pin_cache), with no bug
// planted: the base of the driver-pinned pool bugs, which the suite must pass.
#include "cuda_broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) { broken_pool::use_pool(t, broken_pool::Method::CudaDriver, true); }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_pool_control")
