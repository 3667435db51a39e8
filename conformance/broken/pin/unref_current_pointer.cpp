// xmc-selftest: fails PIN-REFS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug (seed 001): unpin looks the block up by the pointer the reference was
// taken through; once the caller's pointer was redirected and the release
// comes through the recorded base, nothing is found and the block is never
// released (and the call still says OK).
#include "broken.hpp"

#include <mutex>
#include <set>

namespace xmc::broken {
static std::mutex mu;
static std::multiset<const void *> taken_through;
static xmc_status pin_ref(xmc_instance *inst, const void *p) {
    xmc_status st = host()->pin_ref(inst, p);
    if (st == XMC_OK) { std::lock_guard<std::mutex> l(mu); taken_through.insert(p); }
    return st;
}
static xmc_status pin_unref(xmc_instance *inst, const void *p) {
    std::lock_guard<std::mutex> l(mu);
    auto it = taken_through.find(p);
    if (it == taken_through.end()) return XMC_OK;  // the bug: silently not released
    taken_through.erase(it);
    return host()->pin_unref(inst, p);
}
void plant(xmc_backend &t) { t.pin_ref = pin_ref; t.pin_unref = pin_unref; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_unref_current_pointer")
