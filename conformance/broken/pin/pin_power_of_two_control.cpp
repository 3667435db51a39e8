// xmc-selftest: fails none
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// No bug: the host's pinned blocks with their sizes rounded up to a power of
// two, as PyTorch's pinned allocator rounds them (and reports bytes_now as
// the sum of those sizes). The suite must pass it: PIN-THREADS once failed a
// correct PyTorch backend on the H200 because it bounded a running alloc's
// block by the size of a 1-byte block, and a pool like this rounds 4097
// bytes to 8192.
#include "broken.hpp"

#include <bit>

namespace xmc::broken {
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t align, int32_t dev, xmc_pin_result *out) {
    // Sizes whose power of two does not fit go on as they are, refused or not by the host.
    const size_t rounded = n > 0 && n <= (size_t(1) << 62) ? std::bit_ceil(n) : n;
    return host()->pin_alloc(inst, rounded, align, dev, out);
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pin_power_of_two_control")
