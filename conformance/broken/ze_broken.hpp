// Broken Level Zero backends for the self-test (SPEC 6): each is the
// reference Level Zero backend with one registration bug planted, run over the
// fake driver, so the suite must fail it on exactly the requirements that bug
// breaks. `XMC_BROKEN_ZE_BACKEND(name)` defines the entry symbol; the file
// defines `void plant(xmc_backend &t)`, which overrides the entries that carry
// the bug.
#pragma once
#include "ze.hpp"

namespace xmc::broken_ze {

void plant(xmc_backend &t);

// The correct table, for the entries a bug wraps.
inline const xmc_backend *reference() {
    static const xmc_backend t = [] { xmc_backend r{}; xmc::ze::fill_table(r); return r; }();
    return &t;
}

// reg_register of the reference, step by step, except that the context the
// range is registered in is the one `pick` gives for the device asked for:
// the place where two of the seed's bugs sit.
template <class Pick>
xmc_status register_in(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                       xmc_reg_info *out, Pick pick) {
    using namespace xmc::ze;
    if (xmc_status st = check_register(inst, addr, bytes, device, flags, out); st != XMC_OK) return st;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.overlaps(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register", "reg_register: overlaps a registered range");
    ze_context_handle_t ctx = nullptr;
    if (xmc_status st = pick(inst, device, &ctx); st != XMC_OK) return st;
    ze_result_t native = ZE_RESULT_SUCCESS;
    if (xmc_status st = driver_register(inst, "reg_register", ctx, device, addr, bytes, &native); st != XMC_OK)
        return st;
    r.ranges[a] = Registration{bytes, device, ctx, false};
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

} // namespace xmc::broken_ze

#define XMC_BROKEN_ZE_BACKEND(NAME)                                                             \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t v) {                   \
        if (v != XMC_ABI_VERSION) return nullptr;                                               \
        static const xmc_backend table = [] {                                                   \
            xmc_backend t{};                                                                    \
            xmc::ze::fill_table(t);                                                             \
            t.name = NAME;                                                                      \
            xmc::broken_ze::plant(t);                                                           \
            xmc::be::guard_table(t);  /* as the real backends: dead instances refused */        \
            return t;                                                                           \
        }();                                                                                    \
        return &table;                                                                          \
    }
