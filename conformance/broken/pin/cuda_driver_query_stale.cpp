// xmc-selftest: fails PIN-QUERY,PIN-AFTER-FREE,PIN-SHARED,PIN-REFS,PIN-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: a driver-pinned backend (no pool) answers pin_query, for an address
// no live block holds, from a table of the ranges the driver pinned, filled
// at allocation and never cleared: once the free has the driver release a
// block (cuMemHostUnregister), its addresses still report pinned. Every
// query of a freed block shows it: PIN-AFTER-FREE's, PIN-QUERY's stateful
// queries, PIN-SHARED's and PIN-REFS' after the last release, PIN-CLOSE's
// after the last close. (PIN-FAIL-CLEAN's sequences query nothing freed.)
#include "cuda_broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::CudaDriver, &broken_pool::Bugs::query_trusts_stale_table, false);
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_driver_query_stale")
