// xmc-selftest: fails REG-LARGE,REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// Bug (on CUDA): unregister of a registration split into chunks releases
// only the first chunk (the one at the base it was given) and drops the
// entry: the driver keeps mapping the rest of the range. Nor does the last close release them
// (REG-CLOSE: it no longer knows of them).
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    own_registrations(t);
    chunk_bugs().release_first_chunk_only = true;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_unreg_first_chunk_only")
