// xmc-selftest: fails PIN-SHARED,PIN-CLOSE
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug (seed 001): each instance keeps its own registry, so two managers in one
// process disagree about what is pinned, and closing one of them releases
// blocks the process still holds (PIN-CLOSE).
#include "broken.hpp"

namespace xmc::broken {
struct Instance : xmc_instance {
    be::PinRegistry registry;  // the bug: not process-wide
};
static xmc_status open(const xmc_open_params *, xmc_instance **out) { *out = new Instance(); return XMC_OK; }
// Not the bug: each instance's registry is emptied with it (PIN-CLOSE's count
// of what it released), as the process-wide one is by the last close.
static xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    auto *in = static_cast<Instance *>(inst);
    xmc_close_report r{};
    r.last_instance = 1;  // every instance is the last of its own registry
    in->registry.release_all(nullptr, "close", &r.pinned_blocks, &r.pinned_bytes);
    delete in;
    if (out) *out = r;
    return XMC_OK;
}
static xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }
static be::PinRegistry &reg(xmc_instance *inst) { return static_cast<Instance *>(inst)->registry; }
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t align, int32_t device, xmc_pin_result *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    if (device != XMC_NO_DEVICE)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc", "pin_alloc: no registration with a device");
    be::PinBlock b;
    xmc_status st = reg(inst).alloc(inst, n, align, &b);
    if (st == XMC_OK) *out = xmc_pin_result{reinterpret_cast<void *>(b.base), b.size, 0, XMC_OK, 0};
    return st;
}
static xmc_status pin_free(xmc_instance *i, void *p) { return reg(i).free(i, p); }
static xmc_status pin_query(xmc_instance *i, const void *p, size_t n, xmc_pin_info *o) { return reg(i).query(i, p, n, o); }
static xmc_status pin_stats(xmc_instance *i, xmc_pin_stats *o) { return reg(i).stats(i, o); }
static xmc_status pin_ref(xmc_instance *i, const void *p) { return reg(i).ref(i, p); }
static xmc_status pin_unref(xmc_instance *i, const void *p) { return reg(i).unref(i, p); }
void plant(xmc_backend &t) {
    // Its instances are not the host's: only pinning is declared, so no
    // host entry point (slots, streams) is ever handed one.
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS;
    t.open = open; t.close = close; t.close_report = close_report; t.pin_alloc = pin_alloc; t.pin_free = pin_free; t.pin_query = pin_query;
    t.pin_stats = pin_stats; t.pin_ref = pin_ref; t.pin_unref = pin_unref;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_registry_per_instance")
