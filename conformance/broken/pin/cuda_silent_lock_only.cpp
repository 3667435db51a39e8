// xmc-selftest: fails PIN-DEVICE,REG-DOUBLE,REG-FAIL,REG-UNAVAILABLE,REG-LARGE
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): when cuMemHostRegister rejects a
// range, the registration silently degrades: reg_register answers success
// with nothing registered, and a pinned block asked to be registered comes
// back lock-only with no reason and no driver code. On CUDA the driver also
// answers "already registered" (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, for
// a range inside a pinned block registered with a device), and that refusal
// is pretended away too, so REG-DOUBLE catches it as well.
#include "cuda_broken.hpp"
#include "silent_lock_only.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) { broken_silent::plant<reference>(t); }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_silent_lock_only")
