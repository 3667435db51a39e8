// Broken backends for the self-test (SPEC 6): each is the host backend with
// one real bug planted, so the suite must fail it on the
// requirement that bug breaks. `XMC_BROKEN_BACKEND(name)` defines the entry
// symbol; the file defines `void plant(xmc_backend &t)`, which overrides the
// entries that carry the bug.
#pragma once
#include "host.hpp"
#include "broken_entry.hpp"

namespace xmc::broken {
void plant(xmc_backend &t);
// The correct host table, for the entries a bug wraps.
inline const xmc_backend *host() { return broken_entry::correct<xmc::host::fill_table>(); }
// A transport with every call: a wrapper of one that lacks a call would call
// NULL; such a group goes to the host executor untouched, which refuses it.
inline bool whole_transport(const xmc_transport &t) { return t.send && t.recv && t.all_gather; }
} // namespace xmc::broken

#define XMC_BROKEN_BACKEND(NAME) XMC_BROKEN_ENTRY(NAME, xmc::host::fill_table, xmc::broken::plant)
