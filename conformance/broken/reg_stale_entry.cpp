// xmc-selftest: fails REG-REUSE
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// xmc-selftest: needs-mlock
// xmc-selftest: quick
// Bug: a tracking entry left behind. Unregister releases the range, but its
// (base, size) stays in a cache of "ranges known to the driver"; a later
// registration of the same range, after the caller freed the memory and got
// it back at the same address, finds the stale entry and reports success
// without asking the driver: reg_query reports a registration the driver does
// not map (the host's pages are not locked).
#include "broken.hpp"

#include <map>
#include <mutex>
#include <set>

namespace xmc::broken {
namespace {
struct Cache {
    std::mutex mu;
    std::set<std::pair<uintptr_t, size_t>> stale;  // released, still "known"
    std::map<uintptr_t, xmc_reg_info> ghosts;      // reported, never made
    bool overlaps_ghost(uintptr_t a, size_t n) const {
        for (const auto &[b, g] : ghosts)
            if (b < a + n && a < b + g.size) return true;
        return false;
    }
};
Cache &cache() {
    static Cache c;
    return c;
}

bool host_holds_any(xmc_instance *inst, uintptr_t a, size_t n) {
    for (size_t off = 0; off < n; off += 4096) {
        xmc_reg_info q{};
        host()->reg_query(inst, reinterpret_cast<void *>(a + off), &q);
        if (q.registered) return true;
    }
    return false;
}
} // namespace

static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    const auto a = reinterpret_cast<uintptr_t>(addr);
    // What the host refuses before looking at other ranges goes to it as is.
    const bool valid = out && addr && bytes && a % 4096 == 0 && bytes % 4096 == 0 && a <= UINTPTR_MAX - bytes &&
                       device == 0 && (flags & ~XMC_REG_PORTABLE) == 0;
    if (!valid) return host()->reg_register(inst, addr, bytes, device, flags, out);
    if (c.overlaps_ghost(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                        "reg_register: [%p, +%zu) overlaps a registered range", addr, bytes);
    // The bug: a range the cache still knows is taken as registered already.
    if (c.stale.count({a, bytes}) && !host_holds_any(inst, a, bytes)) {
        *out = xmc_reg_info{1, addr, bytes, device};
        c.ghosts[a] = *out;
        return XMC_OK;
    }
    return host()->reg_register(inst, addr, bytes, device, flags, out);
}

static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    const auto a = reinterpret_cast<uintptr_t>(base);
    if (c.ghosts.erase(a)) return XMC_OK;
    if (c.overlaps_ghost(a, 1))
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister",
                        "reg_unregister: %p is interior to a registered range", base);
    xmc_reg_info q{};
    host()->reg_query(inst, base, &q);
    const xmc_status st = host()->reg_unregister(inst, base);
    if (st == XMC_OK) c.stale.insert({a, q.size});
    return st;
}

static xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return host()->reg_query(inst, addr, out);
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    const auto a = reinterpret_cast<uintptr_t>(addr);
    for (const auto &[b, g] : c.ghosts)
        if (a >= b && a < b + g.size) {
            *out = g;
            return XMC_OK;
        }
    return host()->reg_query(inst, addr, out);
}

void plant(xmc_backend &t) {
    t.reg_register = reg_register;
    t.reg_unregister = reg_unregister;
    t.reg_query = reg_query;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_stale_entry")
