// xmc-selftest: fails AFF-STAGING-REUSE
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-STAGING-REUSE
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// xmc-selftest: env XMC_TRANSFER_PATH=nccl
// Bug (AFF-STAGING-REUSE, on the NCCL path, both sides): the staging copies go on a second stream
// that waits for an event of the NCCL stream, the right pattern, but the event is recorded when
// the round's sends and receives are posted, inside the group, not after ncclGroupEnd: NCCL queues
// the group's work on the stream only at ncclGroupEnd, so the event is behind nothing of it. The
// round's end is that event too. The next pack overwrites the outgoing staging before the send
// read it, and the unpack reads the incoming staging before the receive wrote it.
#include "nccl_unwaited.hpp"

namespace xmc::broken_cuda {
void plant(xmc_backend &t) {
    unwaited::plant_bug({.pack = true, .unpack = true, .early_event = true});
    t.transfer_execute = unwaited::transfer_execute;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_event_before_group")
