// xmc-selftest: fails PIN-FAIL-CLEAN
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: the driver-pinned pool allocates a block's memory, then has the
// driver pin it; when the driver refuses (a per-call limit, exhausted
// registrations) the refusal is reported but the memory is never freed, as
// in a pinned allocator that mallocs before cudaHostRegister and loses the
// buffer when the registration throws.
#include "cuda_broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::CudaDriver, &broken_pool::Bugs::leak_on_refused_pinning);
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_pool_leaks_refused")
