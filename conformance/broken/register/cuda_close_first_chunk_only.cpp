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
constexpr char kFirstChunkOnly[] = "close";  // the bug: the last close releases chunk 1 alone
void plant(xmc_backend &) {
    broken_reg::steps(xmc::cuda::registrations()).release = broken_reg::release_first_chunk_only<kFirstChunkOnly>;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_close_first_chunk_only")
