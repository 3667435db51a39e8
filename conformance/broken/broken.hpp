// Broken backends for the self-test (SPEC 6): each is the host backend with
// one real bug planted, so the suite must fail it on the
// requirement that bug breaks. `XMC_BROKEN_BACKEND(name)` defines the entry
// symbol; the file defines `void plant(xmc_backend &t)`, which overrides the
// entries that carry the bug.
#pragma once
#include "host.hpp"

namespace xmc::broken {
void plant(xmc_backend &t);
// The correct host table, for the entries a bug wraps.
inline const xmc_backend *host() {
    static const xmc_backend t = [] { xmc_backend h{}; xmc::host::fill_table(h); return h; }();
    return &t;
}
// A transport with every call: a wrapper of one that lacks a call would call
// NULL; such a group goes to the host executor untouched, which refuses it.
inline bool whole_transport(const xmc_transport &t) { return t.send && t.recv && t.all_gather; }
} // namespace xmc::broken

#define XMC_BROKEN_BACKEND(NAME)                                                                \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t v) {                   \
        if (v != XMC_ABI_VERSION) return nullptr;                                               \
        static const xmc_backend table = [] {                                                   \
            xmc_backend t{};                                                                    \
            xmc::host::fill_table(t);                                                           \
            t.name = NAME;                                                                      \
            xmc::broken::plant(t);                                                              \
            xmc::be::guard_table(t);  /* as the real backends: dead instances refused */        \
            return t;                                                                           \
        }();                                                                                    \
        return &table;                                                                          \
    }
