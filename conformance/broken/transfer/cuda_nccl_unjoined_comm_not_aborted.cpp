// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: multirank 2
// xmc-selftest: filter AFF-NO-HANG
// xmc-selftest: env XMC_TRANSFER_PATH=nccl
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path NCCL, on CUDA, on an error path): when some rank of the group could not join a new
// communicator (its ncclCommInitRank failed, or did not finish in time), the ranks that did join
// forget theirs without aborting it: it keeps its connections and its worker until the process
// exits, one more after every failed join. Transfers that succeed are untouched; only a failed
// join shows it (the fault sweep between processes: NCCL's live communicators once the run's
// instance is closed). Here ncclCommAbort does nothing for a communicator that never carried a
// send or a receive. (Leaving out every abort instead hangs the next failed round: its work stays
// queued on the stream, which AFF-NO-HANG's NCCL test already catches as a hang.)
#include "cuda_broken.hpp"
#include "nccl.hpp"


namespace xmc::broken_cuda {
namespace {
decltype(&::ncclSend) real_send = nullptr;
decltype(&::ncclRecv) real_recv = nullptr;
decltype(&::ncclCommAbort) real_abort = nullptr;
std::mutex mu;
std::set<ncclComm_t> used;  // communicators that carried a send or a receive

ncclResult_t send(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    {
        std::lock_guard<std::mutex> lock(mu);
        used.insert(c);
    }
    return real_send(buf, n, t, peer, c, s);
}
ncclResult_t recv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    {
        std::lock_guard<std::mutex> lock(mu);
        used.insert(c);
    }
    return real_recv(buf, n, t, peer, c, s);
}
ncclResult_t abort_comm(ncclComm_t c) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (!used.erase(c)) return ncclSuccess;  // the bug: a communicator only joined is forgotten
    }
    return real_abort(c);
}

void swap() {
    xmc::cuda::Nccl &n = xmc::cuda::Nccl::get();
    if (!n.usable) return;
    real_send = n.ncclSend, n.ncclSend = send;
    real_recv = n.ncclRecv, n.ncclRecv = recv;
    real_abort = n.ncclCommAbort, n.ncclCommAbort = abort_comm;
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_after_swap<swap>; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_unjoined_comm_not_aborted")
