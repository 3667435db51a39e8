// xmc-selftest: fails AFF-PREPARED-STALE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: a run checks that its source is still the prepared allocation but never its target, so a
// target freed (and allocated again) after prepare is written through the stale address.
#include "broken.hpp"
#include "transfer_steps.hpp"

#include <cstring>

namespace xmc::broken {
namespace {
std::string source_only(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side) {
    if (std::strcmp(side, "target") == 0) return "";
    return broken_transfer::real().stale(then, now, side);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().stale = source_only; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_target_unchecked")
