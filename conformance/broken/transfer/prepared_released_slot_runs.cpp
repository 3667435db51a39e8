// xmc-selftest: fails AFF-PREPARED-FOLLOW
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: a prepared transfer over a slot keeps running while the slot is released (the slot is the
// same slot, so the check passes), reading memory with no backing. Here the stale step ignores
// the book's `released`.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
std::string ignores_release(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side) {
    be::MemoryStamp mapped = now;
    mapped.released = false;
    return broken_transfer::real().stale(then, mapped, side);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().stale = ignores_release; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_released_slot_runs")
