// xmc-selftest: fails PIN-ALLOC,PIN-KINDS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug: the requested alignment is ignored; blocks are only page-aligned
// (PIN-ALLOC asks up to 1 MiB, PIN-KINDS up to 1 GiB: both see it).
#include "broken.hpp"

namespace xmc::broken {
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t align, int32_t dev, xmc_pin_result *out) {
    // Power-of-two check kept (so only the alignment guarantee is broken);
    // alignments above 64 KiB are silently lowered to one page.
    return host()->pin_alloc(inst, n, align > 65536 ? 4096 : align, dev, out);
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_ignores_alignment")
