// xmc-selftest: fails PIN-ALLOC,PIN-FREE,PIN-AFTER-FREE,PIN-REFS,PIN-KINDS,PIN-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: a backend declares driver pinning (pin_driver) but pins with mlock
// alone, as a pinned allocator does when it falls back from
// cudaHostRegister without saying so: the pages are locked in the kernel's
// eyes, yet the driver does not hold them page-locked, so a copy from them is
// staged like one from pageable memory. PIN-KINDS's rule (the driver's report
// is the lock state under pin_driver) makes every body that checks the lock
// state see it: PIN-ALLOC, PIN-FREE, PIN-AFTER-FREE (before the free),
// PIN-REFS, PIN-KINDS and PIN-CLOSE (the block the other instance keeps).
#include "cuda_broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    broken_pool::use_pool(t, broken_pool::Method::Mlock, false);
    t.capabilities |= XMC_CAP_PIN_DRIVER;  // the bug: declared, not done
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_driver_pin_is_mlock")
