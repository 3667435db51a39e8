// Broken Level Zero backends for the self-test (SPEC 6): each is the
// reference Level Zero backend with one registration bug planted, run over the
// fake driver, so the suite must fail it on exactly the requirements that bug
// breaks. `XMC_BROKEN_ZE_BACKEND(name)` defines the entry symbol; the file
// defines `void plant(xmc_backend &t)`, which overrides the entries that carry
// the bug.
#pragma once
#include "ze.hpp"
#include "broken_entry.hpp"

namespace xmc::broken_ze {

void plant(xmc_backend &t);

// The correct table, for the entries a bug wraps.
inline const xmc_backend *reference() { return broken_entry::correct<xmc::ze::fill_table>(); }

} // namespace xmc::broken_ze

#define XMC_BROKEN_ZE_BACKEND(NAME) XMC_BROKEN_ENTRY(NAME, xmc::ze::fill_table, xmc::broken_ze::plant)
