// The one exported symbol of libxmc_backend_level_zero.so.
#include "ze.hpp"

XMC_BACKEND_ENTRY(xmc::ze::fill_table)
