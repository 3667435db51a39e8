// xmc-selftest: fails REG-LARGE,REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): unregister of a registration split into chunks releases
// only the first chunk (the one at the base it was given) and drops the
// entry: the driver keeps mapping the rest of the range. Nor does the last close release them
// (REG-CLOSE: it no longer knows of them).
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
constexpr char kFirstChunkOnly[] = "reg_unregister";  // the bug: reg_unregister releases chunk 1 alone
void plant(xmc_backend &) {
    broken_reg::steps(xmc::cuda::registrations()).release = broken_reg::release_first_chunk_only<kFirstChunkOnly>;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_unreg_first_chunk_only")
