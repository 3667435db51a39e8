// The one exported symbol of libxmc_backend_host.so.
#include "host.hpp"

XMC_BACKEND_ENTRY(xmc::host::fill_table)
