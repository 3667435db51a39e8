// xmc-selftest: fails AFF-PREPARED-EXACT
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: multirank 2
// xmc-selftest: filter AFF-PREPARED-EXACT
// xmc-selftest: env XMC_TRANSFER_PATH=nccl
// Bug (prepared transfers over path NCCL, on CUDA, on an error path): a prepared transfer keeps
// the communicator its first run joined, and goes on sending through it after another call on the
// same group failed its NCCL round and aborted it. Runs that follow only good calls are untouched;
// only a failed call between two runs shows it (NCCL answers invalid usage of an aborted
// communicator; a real NCCL may read freed memory). Here, once a communicator was aborted, the
// sends and receives of the next one made go to the aborted one: what a run that kept it does.
#include "cuda_broken.hpp"
#include "nccl.hpp"

#include <map>

namespace xmc::broken_cuda {
namespace {
decltype(&::ncclSend) real_send = nullptr;
decltype(&::ncclRecv) real_recv = nullptr;
decltype(&::ncclCommAbort) real_abort = nullptr;
decltype(&::ncclCommInitRank) real_init = nullptr;
decltype(&::ncclCommInitRankConfig) real_init_config = nullptr;
std::mutex mu;
ncclComm_t aborted = nullptr;          // the last communicator aborted, until a new one is made
std::map<ncclComm_t, ncclComm_t> kept;  // a new communicator -> the aborted one its traffic goes to

ncclComm_t via(ncclComm_t c) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = kept.find(c);
    return it == kept.end() ? c : it->second;
}
void made(ncclComm_t *c, ncclResult_t r) {
    std::lock_guard<std::mutex> lock(mu);
    if ((r == ncclSuccess || r == ncclInProgress) && *c && aborted) kept[*c] = aborted, aborted = nullptr;
}
ncclResult_t send(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return real_send(buf, n, t, peer, via(c), s);
}
ncclResult_t recv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return real_recv(buf, n, t, peer, via(c), s);
}
ncclResult_t abort_comm(ncclComm_t c) {
    {
        std::lock_guard<std::mutex> lock(mu);
        aborted = c;
    }
    return real_abort(c);
}
ncclResult_t init(ncclComm_t *c, int n, ncclUniqueId id, int rank) {
    const ncclResult_t r = real_init(c, n, id, rank);
    made(c, r);
    return r;
}
ncclResult_t init_config(ncclComm_t *c, int n, ncclUniqueId id, int rank, ncclConfig_t *config) {
    const ncclResult_t r = real_init_config(c, n, id, rank, config);
    made(c, r);
    return r;
}

void swap() {
    xmc::cuda::Nccl &n = xmc::cuda::Nccl::get();
    if (!n.usable) return;
    real_send = n.ncclSend, n.ncclSend = send;
    real_recv = n.ncclRecv, n.ncclRecv = recv;
    real_abort = n.ncclCommAbort, n.ncclCommAbort = abort_comm;
    if (n.ncclCommInitRank) real_init = n.ncclCommInitRank, n.ncclCommInitRank = init;
    if (n.ncclCommInitRankConfig) real_init_config = n.ncclCommInitRankConfig, n.ncclCommInitRankConfig = init_config;
}
} // namespace

void plant(xmc_backend &t) {
    t.transfer_execute = transfer_after_swap<swap>;
    t.transfer_prepare = prepare_after_swap<swap>;
}
} // namespace xmc::broken_cuda
