// xmc-selftest: fails AFF-NO-HANG,AFF-PREPARED-RELEASE
// xmc-selftest: base cuda
// xmc-selftest: multirank 2,4
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC, on CUDA): a reader never closes the peers' sources it opened, as if the
// exporter's own free released every mapping of its memory. The transfers still succeed, and each
// one leaves a mapping per peer in the driver: the fake's ledger shows them, and the IPC failure
// test of AFF-NO-HANG checks that a failed call leaves nothing behind on any rank. Here
// cuIpcCloseMemHandle answers success and does nothing.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
CUresult CUDAAPI never_close(CUdeviceptr) { return CUDA_SUCCESS; }

void swap() { xmc::cuda::Driver::get().cuIpcCloseMemHandle = never_close; }
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_after_swap<swap>; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_handle_never_closed")
