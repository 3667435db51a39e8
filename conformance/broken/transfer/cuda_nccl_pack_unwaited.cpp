// xmc-selftest: fails AFF-STAGING-REUSE
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-STAGING-REUSE
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// xmc-selftest: env XMC_TRANSFER_PATH=nccl
// Bug (AFF-STAGING-REUSE, on the NCCL path, the sending side): to overlap packing with the
// rounds, the next chunk is packed on a second stream, and a round is taken as done once
// ncclGroupEnd returned: NCCL had only queued it on the stream. From the second round on, the pack
// overwrites the outgoing staging while the previous round's send, still waiting on its stream,
// has not read it: the peer gets the later chunk twice. (The first round is right: nothing was
// packed over it.)
#include "nccl_unwaited.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    unwaited::plant_bug({.pack = true});
    t.transfer_execute = unwaited::transfer_execute;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_pack_unwaited")
