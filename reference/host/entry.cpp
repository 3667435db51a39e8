// The one exported symbol of libxmc_backend_host.so.
#include "host.hpp"

extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t runner_abi_version) {
    if (runner_abi_version != XMC_ABI_VERSION) return nullptr;
    static const xmc_backend table = [] {
        xmc_backend t{};
        xmc::host::fill_table(t);
        // CORE-INSTANCE: every entry point refuses a dead instance.
        xmc::be::guard_table(t);  // a NULL, closed or foreign instance: invalid_handle
        return t;
    }();
    return &table;
}
