// xmc-selftest: fails AFF-PREPARED-STALE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: a prepared transfer tells its buffers apart by address, size and kind, not by allocation:
// a buffer freed and allocated again at the same address passes for the prepared one, and the run
// reads the new allocation (a cached IPC mapping or registration kept because the address
// matched). Here the stale step compares the book's base, size and kind, never its serial.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
std::string stale_by_address(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side) {
    if (then.serial == 0) return "";
    if (now.base != then.base || now.size != then.size || now.kind != then.kind)
        return std::string("its ") + side + " buffer is gone";
    return now.released ? std::string("its ") + side + " buffer's slot is released" : "";
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().stale = stale_by_address; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_stale_by_address")
