// Affine transfer on CUDA devices (SPEC 5, AFF-EXEC-EXACT .. AFF-NO-HANG; capability `transfer`).
// The protocol (checks on every rank, the agreement vote before any write, the staged pairwise
// exchange, the completion vote) is reference/common/transfer_protocol.hpp, the one the host
// executor uses; this file supplies CUDA memory.
//
// Data paths, all on the caller's stream (or, when it passes none, a stream made for the call on
// this rank's device):
//  - Local segments: strided device copies. A box is simplified (axes of extent 1 dropped, axes
//    merged wherever both sides keep element order); a dense box is one cuMemcpyAsync, a strided
//    one one cuMemcpy2DAsync (rows) or cuMemcpy3DAsync (rows and slices, when both slice strides
//    are whole multiples of the pitches), in a loop over the axes beyond three; rows wider than
//    16 KiB go as 8 KiB sub-rows (faster on the H200). Between devices, the peer forms
//    (cuMemcpyPeerAsync, cuMemcpy3DPeerAsync) name both contexts. When the rank also pulls from
//    peers, its local copies run on a second stream of the same device, beside the pulls.
//  - Path direct (AFF-PATH; peers in this process: the threads transport, or one process driving
//    several GPUs): after the agreement every rank gives every other, by all_gather, its process
//    token and its source buffer; each target rank then pulls its segments straight from the
//    peer's source with peer copies (peer access enabled where the devices allow it). No staging,
//    nothing crosses the transport but the descriptors.
//  - Path ipc (peers in other processes of this node, AUTO's choice there when both ends offer
//    it): transfer_ipc.cpp. Each rank shares its source with its readers; each target rank opens
//    its peers' sources here and pulls its segments from them with the same device copies.
//  - Path staged (peers in other processes, or any peer when the caller forces it): through
//    pinned host memory (pin_alloc), at most min(budget, bytes) per peer direction, over the
//    transport's send and recv, in the shared schedule (transfer::exchange). Correct, and as fast
//    as the transport.
//  - Path NCCL (where NCCL loads: nccl.hpp; AUTO takes it between nodes): the same schedule
//    through device staging (cuMemAlloc, min(budget, bytes) per peer direction), each round a
//    grouped ncclSend/ncclRecv on the call's stream (transfer_nccl.cpp), after the staged peers.
// Before the agreement each rank waits for its stream, so every source is ready when the first
// pull starts. Each rank waits for its stream again before the completion vote, and the vote is a
// barrier: no rank returns while another still reads its source. A rank whose copies failed still
// waits for what it had queued before it votes.
//
// Statistics: segments this rank reads or writes; bytes_sent and bytes_received, the bytes of
// peer segments this rank's source gave and its target took (pulled or staged);
// bytes_copied_locally, local segments; chunks, the pieces moved (a local or pulled segment is one
// piece, on the rank that copies it; staged pieces as on the host); rounds and staging_peak,
// staged and NCCL messages only (direct pulls stage nothing).
#include "cuda.hpp"
#include "transfer_ipc.hpp"
#include "transfer_protocol.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace xmc::cuda {
namespace {

constexpr const char *kCall = "transfer_execute";
using std::to_string;
using transfer::View;

// What a rank tells its peers once they agreed (all_gather).
struct PeerInfo {
    uint64_t magic;    // kPeerMagic
    uint64_t process;  // process_token()
    xmc_shard_buffer source;
    int32_t has_source;
    int32_t index;
    int64_t failed;  // this rank failed before the exchange (its context): the driver's code, else 0
};
constexpr uint64_t kPeerMagic = 0x786d632d70656572ull;  // "xmc-peer"

// One buffer's memory, for the driver.
struct Mem {
    char *ptr = nullptr;
    bool device = false;  // XMC_MEM_DEVICE: CU_MEMORYTYPE_DEVICE; else host memory
    int32_t ordinal = 0;
    CUcontext ctx = nullptr;  // device memory: its device's primary context
};

struct Axis {
    size_t ext;
    int64_t src, dst;  // strides in bytes
};

class CudaExecutor final : public transfer::Executor, public transfer::Stager {
public:
    explicit CudaExecutor(xmc_instance *inst) : inst_(inst), d_(Driver::get()) {}
    // What move() could not release (its failure reported there) gets a second try here.
    ~CudaExecutor() override {
        disconnect();  // a prepared transfer's opened sources, at its release
        if (side_) d_.cuStreamDestroy(side_);
        if (dev_arena_) {
            CtxScope scope(d_, stream_.ctx);
            d_.cuMemFree(reinterpret_cast<CUdeviceptr>(dev_arena_));
        }
        if (arena_) pin_free(inst_, arena_);
        if (own_stream_) stream_destroy(inst_, own_stream_);
    }

    std::string check_memory(const xmc_shard_buffer &b, const std::string &side) override {
        if (!d_.usable) return d_.why;
        if (b.kind == XMC_MEM_DEVICE && (b.device < 0 || size_t(b.device) >= d_.devices.size()))
            return side + " buffer is on device " + to_string(b.device) + "; the driver has " +
                   to_string(d_.devices.size());
        if (b.kind < XMC_MEM_HOST || b.kind > XMC_MEM_DEVICE)
            return side + " buffer has memory kind " + to_string(int(b.kind));
        return "";
    }

    // AFF-PATH: direct pulls (peers in this address space), IPC pulls (where this rank's memory
    // can be shared), staging over the transport, and NCCL where it loads.
    uint32_t paths(const xmc_transfer_args &a, std::string why_not[XMC_PATH_COUNT_], int64_t *native) override {
        uint32_t can = transfer::path_bit(XMC_PATH_DIRECT) | transfer::path_bit(XMC_PATH_STAGED);
        CtxScope scope(d_, stream_.ctx);  // pointer queries in the call's context
        why_not[XMC_PATH_IPC] = ipc_.why_not(a, native);
        if (why_not[XMC_PATH_IPC].empty()) can |= transfer::path_bit(XMC_PATH_IPC);
        if (std::string why = nccl_unavailable(); why.empty()) can |= transfer::path_bit(XMC_PATH_NCCL);
        else why_not[XMC_PATH_NCCL] = why;
        return can;
    }

    std::string prepare(const xmc_transfer_args &a, transfer::Work &w) override {
        if (!d_.usable) return d_.why;
        if (!d_.missing_copy.empty()) return "the driver " + d_.library + " does not export " + d_.missing_copy;
        if (!d_.missing_transfer.empty())
            return "the driver " + d_.library + " does not export " + d_.missing_transfer;
        for (const auto *b : {&a.source, &a.target})
            if (b->ptr && !mem_of(*b, b == &a.source ? &src_ : &tgt_, &w.native))
                return "cannot retain the context of device " + to_string(b->device);
        xmc_stream *h = a.stream ? a.stream : own_stream_;  // a prepared transfer's runs reuse its own
        if (!h) {
            // The target's device does the copies (it pulls), else the source's.
            const int32_t dev = tgt_.device ? tgt_.ordinal : src_.device ? src_.ordinal : 0;
            if (stream_create(inst_, dev, &own_stream_) != XMC_OK) {
                xmc_error_info e{};
                be::last_error(inst_, &e);
                w.native = e.native_code;
                return "cannot create a stream on device " + to_string(dev) + ": " + e.message;
            }
            h = own_stream_;
        }
        const Stream before = stream_;
        if (!find_stream(inst_, h, &stream_)) return "the stream is not a live stream of this instance";
        // A prepared transfer's run on another device's stream: what the last run opened is that
        // context's; it is closed here, and this rank votes that it is not connected.
        if (before.ctx && before.ctx != stream_.ctx) {
            close_connections(before.ctx);
            drop_kept(before.ctx);  // the side stream and staging belong to the last run's context
        }
        // A communicator another call on the group aborted is no longer this transfer's.
        if (link_.comm && !nccl_held(inst_, link_)) link_ = NcclLink{};
        // Work queued on the caller's stream before this call must finish before we read or write.
        // A driver failure here carries its code (w.native): it was a refusal without one.
        CtxScope scope(d_, stream_.ctx);
        if (scope.result() != CUDA_SUCCESS) {
            w.native = scope.result();
            return std::string("cuCtxPushCurrent failed with ") + d_.result_name(scope.result());
        }
        if (CUresult r = d_.cuStreamSynchronize(stream_.stream); r != CUDA_SUCCESS) {
            w.native = r;
            return std::string("stream synchronization (cuStreamSynchronize) failed with ") + d_.result_name(r);
        }
        return "";
    }

    xmc_status move(const xmc_transfer_args &a, transfer::Work &w, uint64_t call_tag,
                    xmc_transfer_stats &st) override {
        CtxScope scope(d_, stream_.ctx);
        // AFF-NO-HANG: a rank whose context cannot be made current still takes part in the
        // exchange of buffers, as failed, so that its peers' gathers meet its own and every rank
        // stops there. It returned at once, and its completion vote met a peer's gather of buffer
        // descriptors: gloo aborts a process whose gathers differ in size (the fault sweep between
        // processes, failing a rank's cuCtxPushCurrent).
        if (scope.result() != CUDA_SUCCESS) {
            const xmc_status failed = fail(scope.result(), "cuCtxPushCurrent");
            if (!(keep_ && ipc_.is_open())) exchange_buffers(a, int64_t(scope.result()));  // (a later run: none)
            return failed;
        }
        xmc_status s = move_all(a, w, call_tag, st);
        // AFF-NO-HANG: both streams drained before the vote, even after a failure.
        // Whatever happened, nothing this rank queued may still run once it votes.
        const CUresult r0 = side_ ? drain(side_) : CUDA_SUCCESS;
        const CUresult r = drain(stream_.stream);
        if (s == XMC_OK && r0 != CUDA_SUCCESS) s = fail(r0, "cuStreamSynchronize");
        if (s == XMC_OK && r != CUDA_SUCCESS) s = fail(r, "cuStreamSynchronize");
        // Path IPC: the peers' sources closed once nothing queued reads them, before the vote;
        // a prepared transfer keeps them open after a good run for its next one (keep()), and
        // with them its NCCL communicator, side stream and staging (no allocation, page-locking
        // or communicator vote per run; released with the transfer).
        if (keep_ && s == XMC_OK) return s;
        if (const xmc_status c = ipc_.close(s == XMC_OK); s == XMC_OK) s = c;
        peers_.clear();
        link_ = NcclLink{};
        // The side stream and the staging arena go before the vote, so that a failure to release
        // them is this rank's error (the destructor dropped it: a stream the fault sweep found
        // leaked); what fails stays for the destructor's second try.
        if (side_) {
            if (CUresult rs = d_.cuStreamDestroy(side_); rs == CUDA_SUCCESS) side_ = nullptr;
            else if (s == XMC_OK) s = fail(rs, "cuStreamDestroy");
        }
        if (arena_) {
            if (xmc_status ps = pin_free(inst_, arena_); ps == XMC_OK) arena_ = nullptr;
            else if (s == XMC_OK) s = ps;  // pin_free's own detail and code
        }
        if (dev_arena_) {  // NCCL's staging, the same way
            if (CUresult rd = d_.cuMemFree(reinterpret_cast<CUdeviceptr>(dev_arena_)); rd == CUDA_SUCCESS)
                dev_arena_ = nullptr;
            else if (s == XMC_OK)
                s = fail(rd, "cuMemFree");
        }
        return s;
    }

    // AFF-PREPARED-STALE for device memory the backend never allocated: the driver's buffer ID,
    // new for every allocation also at a reused address (recorded on the H200, driver 580.159.04;
    // about 0.15 us a query); on freed memory every attribute query answers
    // CUDA_ERROR_INVALID_VALUE. A driver that does not know the attribute gives no identity at
    // prepare, so its answer is never taken for a freed buffer.
    uint64_t buffer_identity(const xmc_shard_buffer &b) override {
        if (!b.ptr || b.kind != XMC_MEM_DEVICE || !d_.usable) return 0;
        unsigned long long id = 0;
        const CUresult r = d_.cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(b.ptr));
        if (r == CUDA_ERROR_INVALID_VALUE) return kNoBuffer;
        return r == CUDA_SUCCESS && id != 0 ? id : 0;
    }

    // Prepared transfers: path IPC's opened sources stay open between runs (transfer_protocol.hpp).
    void keep(bool on) override { keep_ = on; }
    bool connected() const override { return ipc_.is_open() && !peers_.empty() && (!uses_nccl_ || link_.comm); }
    void disconnect() override {
        close_connections(stream_.ctx);
        link_ = NcclLink{};  // (the instance keeps the communicator: the next join compares)
    }
    // What a prepared transfer kept in `ctx` for its next run, when its runs move to another context.
    void drop_kept(CUcontext ctx) {
        CtxScope scope(d_, ctx);
        if (side_ && d_.cuStreamDestroy(side_) == CUDA_SUCCESS) side_ = nullptr;
        if (dev_arena_ && d_.cuMemFree(reinterpret_cast<CUdeviceptr>(dev_arena_)) == CUDA_SUCCESS) dev_arena_ = nullptr;
        if (arena_ && pin_free(inst_, arena_) == XMC_OK) arena_ = nullptr;
        link_ = NcclLink{};
    }
    // `ctx`: the context that opened them.
    void close_connections(CUcontext ctx) {
        peers_.clear();
        if (!ipc_.is_open()) return;
        CtxScope scope(d_, ctx);
        ipc_.close(false);
    }

    // ---- staging (peers in other processes; device staging for NCCL peers) ----
    char *arena(bool incoming) override {
        return nccl_ ? dev_arena_ + (incoming ? dev_chunk_ : 0) : arena_ + (incoming ? chunk_ : 0);
    }
    xmc_status pack(char *to, int64_t first, size_t bytes) override {
        return copy_1d(staging(to), src_, src_.ptr + first, to, bytes);
    }
    xmc_status packed() override { return sync(); }
    xmc_status unpack(int64_t first, const char *from, size_t bytes) override {
        return copy_1d(tgt_, staging(const_cast<char *>(from)), const_cast<char *>(from), tgt_.ptr + first, bytes);
    }
    xmc_status unpacked() override { return sync(); }

private:
    xmc_status fail(CUresult r, const char *what) {
        return driver_fail(inst_, r, kCall, what);
    }
    // AFF-NO-HANG: a failed synchronize does not say the stream's copies have ended; it is tried
    // once more, so that this rank votes (and its peers free their sources) only after them (a
    // failed last synchronize let a rank's pulls read a peer's freed source: the fault sweep's
    // illegal address). The first failure is the one reported.
    CUresult drain(CUstream s) {
        const CUresult r = d_.cuStreamSynchronize(s);
        if (r != CUDA_SUCCESS) d_.cuStreamSynchronize(s);
        return r;
    }
    // The staging arenas' memory: pinned host memory, or the stream's device memory for NCCL.
    Mem staging(char *p) const {
        return nccl_ ? Mem{p, true, stream_.device, stream_.ctx} : Mem{p, false, 0, nullptr};
    }
    xmc_status sync() {
        const CUresult r = d_.cuStreamSynchronize(stream_.stream);
        return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuStreamSynchronize");
    }

    bool mem_of(const xmc_shard_buffer &b, Mem *m, int64_t *native = nullptr) {
        *m = Mem{static_cast<char *>(b.ptr), b.kind == XMC_MEM_DEVICE, b.device, nullptr};
        if (!m->device) return true;
        const CUresult r = d_.context_for(d_.devices[size_t(b.device)].uuid, &m->ctx, nullptr);
        if (r != CUDA_SUCCESS && native) *native = r;
        return r == CUDA_SUCCESS;
    }

    // Peer forms when both sides are device memory of different contexts.
    bool peer(const Mem &dst, const Mem &src) const { return dst.device && src.device && dst.ctx != src.ctx; }

    xmc_status copy_1d(const Mem &dst_mem, const Mem &src_mem, const char *src, char *dst, size_t bytes) {
        if (bytes == 0) return XMC_OK;
        const auto s = reinterpret_cast<CUdeviceptr>(src), t = reinterpret_cast<CUdeviceptr>(dst);
        if (peer(dst_mem, src_mem)) {
            const CUresult r = d_.cuMemcpyPeerAsync(t, dst_mem.ctx, s, src_mem.ctx, bytes, cur());
            return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuMemcpyPeerAsync");
        }
        if (dst_mem.device && src_mem.device) {
            const CUresult r = d_.cuMemcpyAsync(t, s, bytes, cur());
            return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuMemcpyAsync");
        }
        // Host memory on a side (pageable memory has no unified address): a one-row copy that says so.
        return copy_3d(dst_mem, src_mem, src, dst, bytes, 1, bytes, bytes, 1, 0, 0);
    }

    // Rows (and slices, when `depth` > 1) of `width` bytes; pitches in bytes, positive and at least
    // the width; slice strides whole multiples of the pitches.
    xmc_status copy_3d(const Mem &dm, const Mem &sm, const char *src, char *dst, size_t width, size_t height,
                       size_t spitch, size_t dpitch, size_t depth, size_t sslice, size_t dslice) {
        const CUmemorytype st = sm.device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        const CUmemorytype dt = dm.device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        const auto sd = reinterpret_cast<CUdeviceptr>(src), dd = reinterpret_cast<CUdeviceptr>(dst);
        if (peer(dm, sm)) {
            CUDA_MEMCPY3D_PEER c;
            std::memset(&c, 0, sizeof c);
            c.srcMemoryType = st, c.srcDevice = sd, c.srcContext = sm.ctx, c.srcPitch = spitch;
            c.srcHeight = depth > 1 ? sslice / spitch : height;
            c.dstMemoryType = dt, c.dstDevice = dd, c.dstContext = dm.ctx, c.dstPitch = dpitch;
            c.dstHeight = depth > 1 ? dslice / dpitch : height;
            c.WidthInBytes = width, c.Height = height, c.Depth = depth;
            const CUresult r = d_.cuMemcpy3DPeerAsync(&c, cur());
            return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuMemcpy3DPeerAsync");
        }
        if (depth == 1) {
            CUDA_MEMCPY2D c;
            std::memset(&c, 0, sizeof c);
            c.srcMemoryType = st, c.srcPitch = spitch;
            if (sm.device) c.srcDevice = sd; else c.srcHost = src;
            c.dstMemoryType = dt, c.dstPitch = dpitch;
            if (dm.device) c.dstDevice = dd; else c.dstHost = dst;
            c.WidthInBytes = width, c.Height = height;
            const CUresult r = d_.cuMemcpy2DAsync(&c, cur());
            return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuMemcpy2DAsync");
        }
        CUDA_MEMCPY3D c;
        std::memset(&c, 0, sizeof c);
        c.srcMemoryType = st, c.srcPitch = spitch, c.srcHeight = sslice / spitch;
        if (sm.device) c.srcDevice = sd; else c.srcHost = src;
        c.dstMemoryType = dt, c.dstPitch = dpitch, c.dstHeight = dslice / dpitch;
        if (dm.device) c.dstDevice = dd; else c.dstHost = dst;
        c.WidthInBytes = width, c.Height = height, c.Depth = depth;
        const CUresult r = d_.cuMemcpy3DAsync(&c, cur());
        return r == CUDA_SUCCESS ? XMC_OK : fail(r, "cuMemcpy3DAsync");
    }

    // Rows wider than this, whole multiples of it at pitches that are too, are copied as sub-rows.
    static constexpr size_t kSubRow = 8192;
    static bool wide_rows(size_t width, const Axis &row) {
        return width > 2 * kSubRow && width % kSubRow == 0 && row.src % int64_t(kSubRow) == 0 &&
               row.dst % int64_t(kSubRow) == 0;
    }

    // AFF-EXEC-EXACT: each box copied in place on both buffers' own strides (no temporary).
    // One box: s on sm (from its pointer), t on dm; as few driver calls as the strides allow.
    xmc_status copy_box(const Mem &dm, const Mem &sm, View s, View t, size_t elem) {
        transfer::simplify(s, &t);
        const int n = s.ndim;
        const bool dense = n == 0 || (s.stride[n - 1] == 1 && t.stride[n - 1] == 1);
        const size_t width = (dense && n ? size_t(s.ext[n - 1]) : 1) * elem;
        std::vector<Axis> axes;  // outer to inner, the rows last
        for (int k = 0; k < (dense ? n - 1 : n); ++k)
            axes.push_back(Axis{size_t(s.ext[k]), s.stride[k] * int64_t(elem), t.stride[k] * int64_t(elem)});
        const char *src = sm.ptr + s.base * int64_t(elem);
        char *dst = dm.ptr + t.base * int64_t(elem);
        const auto fits = [&](const Axis &x) {  // usable as the rows of a 2-D copy
            return x.src >= int64_t(width) && x.dst >= int64_t(width);
        };
        size_t inner = 0;  // axes done by one driver call: 0 (1-D), 1 (rows) or 2 (rows, slices)
        if (!axes.empty() && fits(axes.back())) {
            inner = 1;
            if (axes.size() >= 2) {
                const Axis &row = axes.back(), &sl = axes[axes.size() - 2];
                if (sl.src > 0 && sl.dst > 0 && sl.src % row.src == 0 && sl.dst % row.dst == 0 &&
                    size_t(sl.src / row.src) >= row.ext && size_t(sl.dst / row.dst) >= row.ext)
                    inner = 2;
            }
        }
        const size_t outer = axes.size() - inner;
        std::vector<size_t> idx(outer, 0);
        while (true) {
            int64_t so = 0, dof = 0;
            for (size_t k = 0; k < outer; ++k) so += int64_t(idx[k]) * axes[k].src, dof += int64_t(idx[k]) * axes[k].dst;
            xmc_status r = XMC_OK;
            if (inner == 0) {
                r = copy_1d(dm, sm, src + so, dst + dof, width);
            } else if (inner == 1 && wide_rows(width, axes.back())) {
                // Each wide row as sub-rows of kSubRow bytes, the rows as slices: on the H200 a 2-D
                // copy of 64 KiB rows ran at 0.40 of a 1-D copy, one of 8 KiB rows at 0.72.
                const Axis &row = axes.back();
                r = copy_3d(dm, sm, src + so, dst + dof, kSubRow, width / kSubRow, kSubRow, kSubRow, row.ext,
                            size_t(row.src), size_t(row.dst));
            } else {
                const Axis &row = axes.back();
                const Axis *sl = inner == 2 ? &axes[axes.size() - 2] : nullptr;
                r = copy_3d(dm, sm, src + so, dst + dof, width, row.ext, size_t(row.src), size_t(row.dst),
                            sl ? sl->ext : 1, sl ? size_t(sl->src) : 0, sl ? size_t(sl->dst) : 0);
            }
            if (r != XMC_OK) return r;
            size_t k = outer;
            while (k > 0 && ++idx[k - 1] == axes[k - 1].ext) idx[--k] = 0;
            if (k == 0) break;
        }
        return XMC_OK;
    }

    // Lets this context read the peer context's memory directly; where the devices cannot, the
    // driver still copies (through the host).
    xmc_status enable_peer(const Mem &peer_mem) {
        if (!peer_mem.device || peer_mem.ctx == stream_.ctx) return XMC_OK;
        int can = 0;
        const CUdevice me = d_.devices[size_t(stream_.device)].dev, other = d_.devices[size_t(peer_mem.ordinal)].dev;
        if (CUresult r = d_.cuDeviceCanAccessPeer(&can, me, other); r != CUDA_SUCCESS)
            return fail(r, "cuDeviceCanAccessPeer");
        if (!can) return XMC_OK;
        const CUresult r = d_.cuCtxEnablePeerAccess(peer_mem.ctx, 0);
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED || r == CUDA_ERROR_TOO_MANY_PEERS)
            return XMC_OK;
        return fail(r, "cuCtxEnablePeerAccess");
    }

    // Who shares this address space, and their sources (`failed`: this rank's own failure before
    // it, which its peers learn here). Every rank that agreed takes part, whatever happens to it.
    xmc_status exchange_buffers(const xmc_transfer_args &a, int64_t failed, std::vector<PeerInfo> *out = nullptr) {
        const xmc_group &g = *a.group;
        PeerInfo mine{};
        mine.magic = kPeerMagic;
        mine.process = transfer::process_token();
        mine.has_source = a.source.ptr ? 1 : 0;
        if (a.source.ptr) mine.source = a.source;
        mine.index = g.my_index;
        mine.failed = failed;
        std::vector<PeerInfo> info(size_t(g.size), mine);
        const xmc_transport &tp = *g.transport;
        if (xmc_status s = g.size == 1 ? XMC_OK
                           : transfer::transport_status(tp.all_gather(tp.ctx, &mine, info.data(), sizeof mine, g.timeout_ms));
            s != XMC_OK)
            return failed ? s : be::fail(inst_, s, 0, kCall, "%s: exchanging buffers over transport '%s' failed: %s", kCall,
                                         tp.name ? tp.name : "?", xmc_status_string(s));
        if (out) *out = std::move(info);
        return XMC_OK;
    }

    xmc_status move_all(const xmc_transfer_args &a, transfer::Work &w, uint64_t call_tag, xmc_transfer_stats &st) {
        const size_t elem = a.elem_size;
        const xmc_group &g = *a.group;
        // First, so that every rank that agreed takes part in this exchange whatever happens to
        // its copies. A prepared transfer's later runs (connected on every rank: the run vote)
        // reuse the first run's exchange: its buffers are the prepared ones.
        std::vector<PeerInfo> info = keep_ && ipc_.is_open() ? peers_ : std::vector<PeerInfo>{};
        if (info.empty())
            if (xmc_status s = exchange_buffers(a, 0, &info); s != XMC_OK) return s;
        const uint64_t my_process = transfer::process_token();
        std::vector<char> direct(size_t(g.size), 0);
        for (int p = 0; p < g.size; ++p) {
            const PeerInfo &pi = info[size_t(p)];
            if (pi.magic != kPeerMagic || pi.index != p)
                return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall,
                                "%s: rank %d's buffer descriptor is not this executor's", kCall, g.ranks[p]);
            if (pi.failed != 0)
                return be::fail(inst_, XMC_ERR_PEER_FAILED, pi.failed, kCall,
                                "%s: rank %d failed before the exchange of buffers (its context could not be made "
                                "current: native code %lld)", kCall, g.ranks[p], static_cast<long long>(pi.failed));
            // AFF-PATH: the agreed path; direct needs the peer's buffer in this address space.
            direct[size_t(p)] = p != w.me && w.path[size_t(p)] == XMC_PATH_DIRECT;
            if (direct[size_t(p)] && pi.process != my_process)
                return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall,
                                "%s: the agreed path to rank %d is direct, but it is in another process", kCall,
                                g.ranks[p]);
        }
        // Path IPC: sources shared and opened first too (every rank takes part in its exchange).
        if (!ipc_.is_open())
            if (xmc_status s = ipc_.open(a, w, call_tag, d_.devices[size_t(stream_.device)].dev); s != XMC_OK) return s;
        if (keep_) peers_ = info;

        // AFF-REFUSE-BEFORE-WRITE: the group's NCCL communicator before any write, so that a rank
        // that cannot join it makes every rank refuse with nothing written.
        // A prepared transfer's later runs (connected on every rank: the run vote) keep the
        // communicator their first run joined, with no vote of their own.
        uses_nccl_ = nccl_anywhere(w);
        if (uses_nccl_ && !(keep_ && link_.comm))
            if (xmc_status s = nccl_join(inst_, a, stream_.device, &link_); s != XMC_OK) return s;

        // Local segments. When this rank also pulls from peers, they go on a second stream, so
        // that the device's own copies overlap the pulls (HBM and NVLink are separate paths);
        // move() waits for both streams.
        bool pulls = false;
        for (int p = 0; p < g.size; ++p)
            pulls = pulls || ((direct[size_t(p)] || w.path[size_t(p)] == XMC_PATH_IPC) && !w.in[size_t(p)].empty());
        if (pulls && !w.local.empty()) {
            if (!side_)
                if (CUresult r = d_.cuStreamCreate(&side_, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
                    return fail(r, "cuStreamCreate");
            on_ = side_;
        }
        for (const auto &[s, t] : w.local) {
            if (xmc_status r = copy_box(tgt_, src_, s, t, elem); r != XMC_OK) return r;
            int64_t volume = 0;
            transfer::shard_numel(s.ndim, s.ext, &volume);
            st.bytes_copied_locally += uint64_t(volume) * elem;
            st.chunks += 1;
        }
        on_ = nullptr;

        // Peers in this process: pull their segments into this rank's target.
        for (int p = 0; p < g.size; ++p) {
            if (!direct[size_t(p)]) continue;
            // AFF-ACCOUNT: a pulled segment is sent by its source rank, received by its target.
            st.bytes_sent += w.out_bytes[size_t(p)];  // the peer pulls them
            if (w.in[size_t(p)].empty()) continue;
            const PeerInfo &pi = info[size_t(p)];
            Mem from;
            if (!pi.has_source || !mem_of(pi.source, &from))
                return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d has no usable source buffer",
                                kCall, g.ranks[p]);
            if (xmc_status r = enable_peer(from); r != XMC_OK) return r;
            for (size_t k = 0; k < w.in[size_t(p)].size(); ++k) {
                const xmc_segment &seg = a.plan.segments[w.in_segments[size_t(p)][k]];
                View sv;
                if (std::string why = transfer::place(seg, seg.src_offset, seg.src_strides, pi.source, &sv); !why.empty())
                    return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d's source: segment %s", kCall,
                                    g.ranks[p], why.c_str());
                if (xmc_status r = copy_box(tgt_, from, sv, w.in[size_t(p)][k], elem); r != XMC_OK) return r;
                st.chunks += 1;
            }
            st.bytes_received += w.in_bytes[size_t(p)];
        }
        // Path IPC: the peers' sources opened here, pulled in this context.
        if (xmc_status s = ipc_.pull(a, w, st, [&](char *from, const View &sv, const View &tv) {
                return copy_box(tgt_, Mem{from, true, stream_.device, stream_.ctx}, sv, tv, elem);
            });
            s != XMC_OK)
            return s;

        // Peers in other processes: staged through pinned host memory, over the transport.
        uint64_t chunk = 0;
        for (int p = 0; p < g.size; ++p)
            if (p != w.me && w.path[size_t(p)] == XMC_PATH_STAGED)
                chunk = std::max({chunk, std::min(a.staging_budget, w.out_bytes[size_t(p)]),
                                  std::min(a.staging_budget, w.in_bytes[size_t(p)])});
        // AFF-STAGING: pinned staging of min(budget, bytes) per direction, other processes only.
        if (arena_ && chunk_ != chunk) {  // a kept arena of another size (never, for one plan)
            if (xmc_status s = pin_free(inst_, arena_); s != XMC_OK) return s;
            arena_ = nullptr;
        }
        if (chunk > 0 && !arena_) {  // two arenas: one chunk to send, one received
            xmc_pin_result pr{};
            const int32_t dev = stream_.device;
            if (xmc_status s = pin_alloc(inst_, size_t(2 * chunk), 4096, dev, &pr); s != XMC_OK) return s;
            arena_ = static_cast<char *>(pr.base);
            chunk_ = size_t(chunk);
        }
        xmc_status s = transfer::exchange(a, w, call_tag, st, *this,
                                          [&](int p) { return w.path[size_t(p)] == XMC_PATH_STAGED; });
        if (s != XMC_OK || !nccl_anywhere(w)) return s;
        // NCCL peers: device staging of min(budget, bytes) per direction (AFF-STAGING); every rank
        // joins the group's communicator, also one with no NCCL peer of its own.
        uint64_t nchunk = 0;
        for (int p = 0; p < g.size; ++p)
            if (p != w.me && w.path[size_t(p)] == XMC_PATH_NCCL)
                nchunk = std::max({nchunk, std::min(a.staging_budget, w.out_bytes[size_t(p)]),
                                   std::min(a.staging_budget, w.in_bytes[size_t(p)])});
        if (dev_arena_ && dev_chunk_ != nchunk) {
            if (CUresult r = d_.cuMemFree(reinterpret_cast<CUdeviceptr>(dev_arena_)); r != CUDA_SUCCESS)
                return fail(r, "cuMemFree");
            dev_arena_ = nullptr;
        }
        if (nchunk > 0 && !dev_arena_) {
            CUdeviceptr dev = 0;
            if (CUresult r = d_.cuMemAlloc(&dev, size_t(2 * nchunk)); r != CUDA_SUCCESS) return fail(r, "cuMemAlloc");
            dev_arena_ = reinterpret_cast<char *>(dev);
            dev_chunk_ = size_t(nchunk);
        }
        nccl_ = true;
        s = nccl_move(inst_, a, w, st, *this, link_, stream_.stream);
        nccl_ = false;
        return s;
    }

    // The stream the copies go on now: the call's, or the second one for local copies.
    CUstream cur() const { return on_ ? on_ : stream_.stream; }

    xmc_instance *inst_;
    Driver &d_;
    IpcPath ipc_{inst_, d_};   // path IPC (transfer_ipc.cpp); closed before the streams go
    CUstream side_ = nullptr;  // made on first need, in the call's stream's context
    CUstream on_ = nullptr;
    Mem src_, tgt_;
    Stream stream_;
    xmc_stream *own_stream_ = nullptr;
    char *arena_ = nullptr;  // the sending arena, then the receiving one, chunk_ bytes each
    size_t chunk_ = 0;
    char *dev_arena_ = nullptr;  // the same for NCCL peers, in the stream's device memory
    size_t dev_chunk_ = 0;
    bool nccl_ = false;  // the exchange in progress is NCCL's: arena() and staging() are the device's
    bool keep_ = false;  // a prepared transfer's: path IPC stays open after a good move()
    bool uses_nccl_ = false;  // the last move's path table takes NCCL somewhere
    NcclLink link_;           // its communicator: for one move, or kept like path IPC
    std::vector<PeerInfo> peers_;  // ... and the buffer exchange is kept with it
};

std::unique_ptr<transfer::Executor> make_executor(xmc_instance *inst) { return std::make_unique<CudaExecutor>(inst); }

} // namespace

// AFF-REFUSE-BEFORE-WRITE, AFF-AGREE, AFF-GROUP, AFF-NO-HANG, AFF-PREPARED-*: the shared protocol
// (transfer_protocol.cpp, transfer_prepared.cpp) around CUDA memory.
XMC_TRANSFER_ENTRIES(make_executor)

} // namespace xmc::cuda
