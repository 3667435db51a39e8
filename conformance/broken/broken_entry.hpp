// What the three templates of broken backends share (broken.hpp: host;
// cuda_broken.hpp; ze_broken.hpp): the correct table a bug wraps entries of,
// and the entry symbol, one definition for all three so that a change to how
// a broken backend is built (the guard, say) reaches every base at once.
#pragma once
#include "backend_table.hpp"
#include "errors.hpp"

namespace xmc::broken_entry {
// The correct table `Fill` fills (a reference's fill_table), built once.
template <void (*Fill)(xmc_backend &)> inline const xmc_backend *correct() {
    static const xmc_backend t = [] { xmc_backend r{}; Fill(r); return r; }();
    return &t;
}
} // namespace xmc::broken_entry

// The entry symbol: the table FILL fills, named NAME, with PLANT's bug planted.
#define XMC_BROKEN_ENTRY(NAME, FILL, PLANT)                                                     \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t v) {                   \
        if (v != XMC_ABI_VERSION) return nullptr;                                               \
        static const xmc_backend table = [] {                                                   \
            xmc_backend t{};                                                                    \
            FILL(t);                                                                            \
            t.name = NAME;                                                                      \
            PLANT(t);                                                                           \
            xmc::be::guard_table(t);  /* as the real backends: dead instances refused */        \
            return t;                                                                           \
        }();                                                                                    \
        return &table;                                                                          \
    }
