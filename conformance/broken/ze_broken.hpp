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
