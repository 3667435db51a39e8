// xmc-selftest: fails REG-LARGE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): a registration split into chunks is not all or nothing.
// When the driver refuses chunk k, the call fails with chunk k's code, but
// chunks 1..k-1 stay registered in the driver, tracked by nobody.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    own_registrations(t);
    chunk_bugs().keep_earlier_chunks = true;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_chunk_failure_keeps_earlier")
