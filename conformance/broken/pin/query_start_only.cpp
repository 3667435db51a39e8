// xmc-selftest: fails PIN-QUERY
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug: the pinned-range check looks only at the start address of a range.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status pin_query(xmc_instance *inst, const void *p, size_t, xmc_pin_info *out) {
    return host()->pin_query(inst, p, 1, out);
}
void plant(xmc_backend &t) { t.pin_query = pin_query; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_query_start_only")
