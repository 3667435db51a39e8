// Broken CUDA executors whose NCCL round is taken as done before its stream has passed it, while
// staging is then touched off that stream (AFF-STAGING-REUSE). NCCL's ncclGroupEnd only queues the
// round on the stream; the bytes move when the stream gets there. An executor that overlaps its
// staging copies with the rounds on a second stream must make that stream wait for the NCCL one
// (an event recorded after ncclGroupEnd); these do not, each in its own way (Bug below).
//
// The reference executor stays as it is; the bug is planted around it, in the driver and NCCL
// tables it calls: the stream query that ends a round answers "done" (or asks an event that does
// not cover the round), and a staging copy of the affected side runs on a second stream of the
// call's context, waited for alone. Per rank thread (ranks may be threads of one process).
#pragma once
#include "cuda_broken.hpp"
#include "nccl.hpp"

#include <mutex>

namespace xmc::broken_cuda::unwaited {

struct Bug {
    bool pack = false;    // the next round's pack (into the outgoing staging) goes on the second stream
    bool unpack = false;  // the unpack (out of the incoming staging) goes on the second stream
    // The round's wait is an event recorded at the round's first ncclSend/ncclRecv, before
    // ncclGroupEnd queued it, and the second stream waits for that event: the right pattern, the
    // wrong event. Otherwise the round is not waited for at all.
    bool early_event = false;
};
inline Bug g_bug;

struct Round {  // this rank thread's NCCL round, as the bug sees it
    CUstream stream = nullptr;  // the stream NCCL's rounds go on
    uintptr_t send = 0, recv = 0;
    size_t send_bytes = 0, recv_bytes = 0;
    bool in_group = false, unwaited = false;
    CUstream side = nullptr;  // the second stream, made on first use in the call's context
    CUevent event = nullptr;
};
inline thread_local Round t_round;

struct Real {
    cuda::Nccl nccl;
    decltype(cuda::Driver::cuStreamQuery) query = nullptr;
    decltype(cuda::Driver::cuMemcpyAsync) copy = nullptr;
    decltype(cuda::Driver::cuMemcpy2DAsync) copy2d = nullptr;
};
inline Real g_real;

inline bool within(uintptr_t a, uintptr_t base, size_t bytes) { return bytes && a >= base && a < base + bytes; }

// A staging copy queued on the NCCL stream that the bug moves to the second stream.
inline bool moved(CUstream s, uintptr_t dst, uintptr_t src) {
    const Round &r = t_round;
    if (!r.stream || s != r.stream) return false;
    return (g_bug.pack && within(dst, r.send, r.send_bytes)) || (g_bug.unpack && within(src, r.recv, r.recv_bytes));
}

// Queues the copy on the second stream (after the early event, where the bug waits for one) and
// waits for that stream only.
template <class F>
CUresult on_side(F &&copy) {
    cuda::Driver &d = cuda::Driver::get();
    Round &r = t_round;
    if (!r.side)
        if (CUresult e = d.cuStreamCreate(&r.side, CU_STREAM_NON_BLOCKING); e != CUDA_SUCCESS) return e;
    if (g_bug.early_event && r.event)
        if (CUresult e = d.cuStreamWaitEvent(r.side, r.event, 0); e != CUDA_SUCCESS) return e;
    if (CUresult e = copy(r.side); e != CUDA_SUCCESS) return e;
    return d.cuStreamSynchronize(r.side);
}

inline void posted(const void *buf, size_t bytes, cudaStream_t stream, bool send) {
    Round &r = t_round;
    r.stream = reinterpret_cast<CUstream>(stream);
    (send ? r.send : r.recv) = reinterpret_cast<uintptr_t>(buf);
    (send ? r.send_bytes : r.recv_bytes) = bytes;
    if (g_bug.early_event && !r.in_group) {  // the round's first post: the event it will wait for
        cuda::Driver &d = cuda::Driver::get();
        if (!r.event) d.cuEventCreate(&r.event, CU_EVENT_DISABLE_TIMING);
        if (r.event) d.cuEventRecord(r.event, r.stream);
    }
    r.in_group = true;
}

inline void plant_bug(const Bug &bug) {
    static std::once_flag once;
    std::call_once(once, [&] {
        cuda::Nccl &n = cuda::Nccl::get();
        cuda::Driver &d = cuda::Driver::get();
        if (!n.usable || !d.cuStreamQuery || !d.cuMemcpyAsync || !d.cuMemcpy2DAsync) return;
        g_bug = bug;
        g_real.nccl = n;
        g_real.query = d.cuStreamQuery;
        g_real.copy = d.cuMemcpyAsync;
        g_real.copy2d = d.cuMemcpy2DAsync;
        n.ncclSend = [](const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
            posted(buf, count, s, true);  // the executor sends bytes (ncclUint8)
            return g_real.nccl.ncclSend(buf, count, t, peer, c, s);
        };
        n.ncclRecv = [](void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
            posted(buf, count, s, false);
            return g_real.nccl.ncclRecv(buf, count, t, peer, c, s);
        };
        n.ncclGroupEnd = [] {
            const ncclResult_t r = g_real.nccl.ncclGroupEnd();
            t_round.unwaited = t_round.in_group;
            t_round.in_group = false;
            return r;
        };
        d.cuStreamQuery = [](CUstream s) {
            Round &r = t_round;
            if (!r.unwaited || s != r.stream) return g_real.query(s);
            // The round's end as this executor sees it.
            const CUresult q = g_bug.early_event && r.event ? cuda::Driver::get().cuEventQuery(r.event) : CUDA_SUCCESS;
            if (q != CUDA_ERROR_NOT_READY) r.unwaited = false;
            return q;
        };
        d.cuMemcpyAsync = [](CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
            if (!moved(s, uintptr_t(dst), uintptr_t(src))) return g_real.copy(dst, src, bytes, s);
            return on_side([&](CUstream side) { return g_real.copy(dst, src, bytes, side); });
        };
        d.cuMemcpy2DAsync = [](const CUDA_MEMCPY2D *c, CUstream s) {
            const uintptr_t dst = c->dstDevice ? uintptr_t(c->dstDevice) : reinterpret_cast<uintptr_t>(c->dstHost);
            const uintptr_t src = c->srcDevice ? uintptr_t(c->srcDevice) : reinterpret_cast<uintptr_t>(c->srcHost);
            if (!moved(s, dst, src)) return g_real.copy2d(c, s);
            return on_side([&](CUstream side) { return g_real.copy2d(c, side); });
        };
    });
}

// The reference's transfer, then this call's second stream and event go (the call's streams
// are drained by then).
inline xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    const xmc_status s = reference()->transfer_execute(inst, a, st);
    Round &r = t_round;
    cuda::Driver &d = cuda::Driver::get();
    if (r.side) d.cuStreamSynchronize(r.side), d.cuStreamDestroy(r.side);
    if (r.event) d.cuEventDestroy(r.event);
    r = Round{};
    return s;
}

} // namespace xmc::broken_cuda::unwaited
