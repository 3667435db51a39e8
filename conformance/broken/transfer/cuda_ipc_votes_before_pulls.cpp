// xmc-selftest: fails AFF-RESULT,AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC, on CUDA): a reader waits for its pulls only after the completion vote, when it
// closes the peers' sources, believing an open handle keeps a peer's memory alive. The vote then
// lets each source's owner return, and free its source, while a reader still pulls from it: the
// reader copies freed memory (zeros on the fake) into its target, and reports success. Caught
// where a sender frees its source as soon as it returns while the copies run late (AFF-RESULT's
// one-way test). A close put off past the vote that the driver then refuses is lost, neither
// reported nor tried again: the fault sweep between processes (AFF-NO-HANG) finds the handle still
// open once the instance is closed. Here, while a peer's source is open, the wait for the call's stream (where the
// pulls go) returns at once, and the closes are put off until that stream is done, after the vote.
#include "cuda_broken.hpp"

#include <atomic>
#include <mutex>
#include <vector>

namespace xmc::broken_cuda {
namespace {
using D = xmc::cuda::Driver;
decltype(D::cuIpcOpenMemHandle) real_open = nullptr;
decltype(D::cuIpcCloseMemHandle) real_close = nullptr;
decltype(D::cuStreamSynchronize) real_sync = nullptr;
std::atomic<int> open_now{0};  // peers' sources open in the current call (one call at a time here)
std::atomic<CUstream> pulls_on{nullptr};  // the call's stream
std::mutex mu;
std::vector<CUdeviceptr> later;  // closes put off until the call's stream is done

CUresult CUDAAPI open_counted(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) {
    const CUresult r = real_open(p, h, flags);
    if (r == CUDA_SUCCESS) ++open_now;
    return r;
}
CUresult CUDAAPI close_later(CUdeviceptr p) {
    std::lock_guard<std::mutex> lock(mu);
    later.push_back(p);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI sync_unless_open(CUstream s) {
    return open_now > 0 && s == pulls_on ? CUDA_SUCCESS : real_sync(s);  // the bug
}

void close_put_off() {
    std::lock_guard<std::mutex> lock(mu);
    for (CUdeviceptr p : later) real_close(p);
    later.clear();
    open_now = 0;
}

xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    static std::once_flag once;
    std::call_once(once, [] {
        D &d = D::get();
        real_open = d.cuIpcOpenMemHandle, real_close = d.cuIpcCloseMemHandle, real_sync = d.cuStreamSynchronize;
        d.cuIpcOpenMemHandle = open_counted, d.cuIpcCloseMemHandle = close_later, d.cuStreamSynchronize = sync_unless_open;
    });
    xmc::cuda::Stream on;
    const bool known = a && a->stream && xmc::cuda::find_stream(inst, a->stream, &on);
    pulls_on = known ? on.stream : nullptr;
    const xmc_status s = reference()->transfer_execute(inst, a, st);
    // After the vote: the pulls waited for, then the sources closed.
    if (known) {
        xmc::cuda::CtxScope scope(D::get(), on.ctx);
        real_sync(on.stream);
    }
    pulls_on = nullptr;
    close_put_off();
    return s;
}

// A prepared transfer closes what its runs kept open at release (the reference's disconnect):
// those closes are put off too, and done here, so that the bug stays the order within a call.
xmc_status transfer_release(xmc_instance *inst, xmc_prepared *p) {
    const xmc_status s = reference()->transfer_release(inst, p);
    if (real_close) close_put_off();
    return s;
}
} // namespace

void plant(xmc_backend &t) {
    t.transfer_execute = transfer_execute;
    t.transfer_release = transfer_release;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_votes_before_pulls")
