// xmc-selftest: fails VMM-UNMAPPED-FAULTS,VMM-ERROR-CLEAR
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-ERROR-CLEAR): a copy refused because it names a slot with no memory mapped leaves an
// error flag on its stream, and the next copy on that stream is refused with it, valid or not.
#include "broken.hpp"

#include <map>
#include <mutex>

namespace xmc::broken {
namespace {
std::mutex mu;
std::map<xmc_stream *, bool> flagged;

xmc_status copy(xmc_instance *inst, const xmc_copy_desc *d, xmc_stream *s) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (flagged[s]) {
            flagged[s] = false;
            return be::fail(inst, XMC_ERR_BUSY, 0, "copy", "copy: the stream's last copy was refused");
        }
    }
    const xmc_status st = host()->copy(inst, d, s);
    std::lock_guard<std::mutex> lock(mu);
    if (st == XMC_ERR_BUSY) flagged[s] = true;
    return st;
}
} // namespace

void plant(xmc_backend &t) { t.copy = copy; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_sticky_copy_error")
