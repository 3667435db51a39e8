// xmc-selftest: fails PIN-CLOSE,REG-CLOSE
// xmc-selftest: filter [PR][IE][NG]-CLOSE
// xmc-selftest: timeout 30
// Bug: the library opens an instance of its own on first use (for a worker
// it keeps) and never closes it, so the user's last close is never the
// library's last: the process-wide registries are never emptied, and pinned
// blocks and registrations the user left outlive every instance, while the
// close reports that the last instance went.
#include "broken.hpp"

#include <mutex>

namespace xmc::broken {
namespace {
std::mutex mu;
size_t user_instances = 0;
xmc_instance *own = nullptr;  // the library's, never closed
} // namespace
static xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    std::lock_guard<std::mutex> lock(mu);
    if (!own && host()->open(nullptr, &own) != XMC_OK) own = nullptr;
    const xmc_status st = host()->open(params, out);
    if (st == XMC_OK) ++user_instances;
    return st;
}
static xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    std::lock_guard<std::mutex> lock(mu);
    xmc_close_report r{};
    const xmc_status st = host()->close_report(inst, &r);
    if (st != XMC_OK) return st;
    r.last_instance = --user_instances == 0 ? 1 : 0;  // what the user sees: the last one went
    if (out) *out = r;
    return XMC_OK;
}
static xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }
void plant(xmc_backend &t) {
    t.open = open;
    t.close_report = close_report;
    t.close = close;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_close_keeps_blocks")
