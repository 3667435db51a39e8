// xmc-selftest: fails PIN-AFTER-FREE,PIN-POOL,PIN-REFS
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: the driver-pinned pool's release frees each pooled block's memory but
// never calls cuMemHostUnregister: the driver keeps the pages page-locked
// (and registered, behind memory the process may hand out again). The
// driver's report after the release shows it to PIN-AFTER-FREE's lock check
// as well as PIN-POOL's. (The last close empties the
// pool by another, correct walk.)
#include "cuda_broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::CudaDriver, &broken_pool::Bugs::release_skips_unregister);
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_pool_release_keeps_registration")
