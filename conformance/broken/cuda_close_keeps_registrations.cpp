// xmc-selftest: fails REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 30
// xmc-selftest: ctest-timeout 300
// Bug (CUDA): registrations are tracked in a registry of their own that the
// close does not walk: closing the last instance releases the pinned blocks
// and the contexts it knows of, and leaves every registration the user still
// held registered in the driver, for good.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    own_registrations(t);
    t.close_report = reference()->close_report;  // the reference's: it knows only its own registry
    t.close = reference()->close;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_close_keeps_registrations")
