// The in-tree backends' side of the one list of entry points (<xmc/backend.h>):
// each backend names the groups it implements, once, and gets from the list
// the declarations of its functions and the filling of its table.
//
//   // in the backend's header, inside its namespace:
//   #define XMC_HOST_GROUPS(G) G(INSTANCE) G(PIN) ... G(TRANSFER)
//   XMC_HOST_GROUPS(XMC_DECLARE_GROUP)
//   // in its fill_table:
//   XMC_HOST_GROUPS(XMC_FILL_GROUP)  XMC_FILL_ERRORS(t)
//
// The ERRORS group (last_error, status_name) is the same for every in-tree
// backend (errors.hpp), so it is filled from xmc::be, never declared again.
#pragma once
#include "errors.hpp"

#define XMC_DECLARE_ENTRY_(kind, ret, name, params) ret name params;
#define XMC_DECLARE_GROUP(group) XMC_ENTRIES_##group(XMC_DECLARE_ENTRY_)

// Inside a function with `xmc_backend &t` in scope, the backend's namespace open.
#define XMC_FILL_ENTRY_(kind, ret, name, params) t.name = name;
#define XMC_FILL_GROUP(group) XMC_ENTRIES_##group(XMC_FILL_ENTRY_)
#define XMC_FILL_ERRORS_ENTRY_(kind, ret, name, params) t.name = ::xmc::be::name;
#define XMC_FILL_ERRORS(t) XMC_ENTRIES_ERRORS(XMC_FILL_ERRORS_ENTRY_)

// The one exported symbol of a backend library: its table, filled once by `fill` (the backend's
// fill_table) and guarded (CORE-INSTANCE: every entry point refuses a NULL, closed or foreign
// instance with invalid_handle).
#define XMC_BACKEND_ENTRY(fill)                                                                     \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t runner_abi_version) {      \
        if (runner_abi_version != XMC_ABI_VERSION) return nullptr;                                  \
        static const xmc_backend table = [] {                                                       \
            xmc_backend t{};                                                                        \
            fill(t);                                                                                \
            ::xmc::be::guard_table(t);                                                              \
            return t;                                                                               \
        }();                                                                                        \
        return &table;                                                                              \
    }
