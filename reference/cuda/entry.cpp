// The one exported symbol of libxmc_backend_cuda.so.
#include "cuda.hpp"

XMC_BACKEND_ENTRY(xmc::cuda::fill_table)
