// xmc-selftest: fails AFF-STAGING-REUSE
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-STAGING-REUSE
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// xmc-selftest: env XMC_TRANSFER_PATH=nccl
// Bug (AFF-STAGING-REUSE, on the NCCL path, the receiving side): the received chunk is unpacked
// from the incoming staging right after ncclGroupEnd returned, on a second stream (to overlap it
// with the next round), with neither a synchronize of the NCCL stream nor an event from it: the
// receive is still queued there, so the unpack reads what the staging held before (the previous
// chunk, or nothing). Chunks received in place (a dense target) are right; staged ones are not.
#include "nccl_unwaited.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    unwaited::plant_bug({.unpack = true});
    t.transfer_execute = unwaited::transfer_execute;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_unpack_unwaited")
