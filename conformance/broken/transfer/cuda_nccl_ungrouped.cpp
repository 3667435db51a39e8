// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-NO-HANG
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-NO-HANG, on the NCCL path): the sends and receives of a round are not grouped, so each
// ncclSend runs alone; NCCL's point-to-point waits for the peer's matching receive, and both ends
// of a pair send first: they deadlock, and only the executor's bound ends the call (a timeout,
// never the data). Here ncclGroupStart and ncclGroupEnd do nothing.
#include "cuda_broken.hpp"
#include "nccl.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &) {
    cuda::Nccl &n = cuda::Nccl::get();
    if (!n.usable) return;
    n.ncclGroupStart = [] { return ncclSuccess; };
    n.ncclGroupEnd = [] { return ncclSuccess; };
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_ungrouped")
