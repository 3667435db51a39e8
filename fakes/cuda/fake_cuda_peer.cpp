// Peer copies that name both contexts with a 3-D description: cuMemcpy3DPeerAsync (the affine
// transfer executor's strided copies between the GPUs of one process). cuMemcpyPeerAsync,
// cuDeviceCanAccessPeer and cuCtxEnablePeerAccess live with the other copies and contexts.
//
// As everywhere in the fake, device memory is host memory, so the copy is a row-by-row memmove
// run in order by the stream's worker. Checked when enqueued, like the real driver: a NULL
// description, arrays (not modelled; a NULL one is CUDA_ERROR_INVALID_VALUE), pitches under the
// width, slice heights under the height, a context that is not alive for a device side (a NULL
// one is no error: recorded, memcpy_3d_peer_null_context, the addresses decide), memory that no
// allocation, accessible mapping or registration holds. A level of detail is ignored, as the
// recorded cuMemcpy3DAsync does (copy_3d_nonzero_lod). Checked again when it runs: memory freed in
// between is CUDA_ERROR_ILLEGAL_ADDRESS, which becomes the context's sticky error.
#include "fake_cuda_internal.h"

#include <cstring>

using namespace xmc_fake;

namespace {

struct PeerSide {
    uintptr_t start = 0;
    bool device = false;
    size_t pitch = 0, slice = 0, span = 0;
};

CUresult side_of(PeerSide& s, CUmemorytype type, const void* host, CUdeviceptr dev, CUarray array, CUcontext ctx,
                 size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t width, size_t rows, size_t depth) {
    uintptr_t base = 0;
    switch (type) {
        case CU_MEMORYTYPE_HOST:
            base = reinterpret_cast<uintptr_t>(host);
            break;
        case CU_MEMORYTYPE_DEVICE:
            base = dev;
            s.device = true;
            if (ctx != nullptr && find_ctx_locked(from_handle(ctx)) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
            break;
        case CU_MEMORYTYPE_UNIFIED:
            base = dev;
            break;
        case CU_MEMORYTYPE_ARRAY:
            return array == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (base == 0) return CUDA_ERROR_INVALID_VALUE;
    const size_t h = depth > 1 ? height : rows;  // the slice height matters only across slices
    size_t rows_before = 0, off = 0, a = 0, b = 0, t = 0;
    if (__builtin_mul_overflow(z, h, &rows_before) || __builtin_add_overflow(rows_before, y, &rows_before) ||
        __builtin_mul_overflow(rows_before, pitch, &off) || __builtin_add_overflow(off, x, &off) ||
        __builtin_add_overflow(base, off, &s.start) || __builtin_mul_overflow(pitch, h, &s.slice))
        return CUDA_ERROR_INVALID_VALUE;
    s.pitch = pitch;
    if (__builtin_mul_overflow(depth - 1, s.slice, &a) || __builtin_mul_overflow(rows - 1, pitch, &b) ||
        __builtin_add_overflow(a, b, &t) || __builtin_add_overflow(t, width, &s.span))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t end = 0;
    if (__builtin_add_overflow(s.start, s.span, &end)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

// The host address of a side now, or 0 when it cannot be reached.
uintptr_t resolve_side(const PeerSide& s) {
    if (uintptr_t h = device_to_host_locked(s.start, s.span)) return h;
    if (s.device || in_device_range_locked(s.start, s.span)) return 0;
    return s.start;  // plain host memory
}

}  // namespace

XMC_FAKE_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* c, CUstream hStream) {
    FAKE_ENTER("cuMemcpy3DPeerAsync");
    if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const size_t width = c->WidthInBytes, rows = c->Height, depth = c->Depth;
    const bool multi_row = rows > 1 || depth > 1;
    if (multi_row && (c->srcPitch < width || c->dstPitch < width)) return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 && (c->srcHeight < rows || c->dstHeight < rows)) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (width == 0 || rows == 0 || depth == 0) return CUDA_SUCCESS;
    PeerSide src, dst;
    CUresult r = side_of(src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcContext, c->srcXInBytes,
                         c->srcY, c->srcZ, c->srcPitch, c->srcHeight, width, rows, depth);
    if (r == CUDA_SUCCESS)
        r = side_of(dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstContext, c->dstXInBytes,
                    c->dstY, c->dstZ, c->dstPitch, c->dstHeight, width, rows, depth);
    if (r != CUDA_SUCCESS) return r;
    if (resolve_side(src) == 0 || resolve_side(dst) == 0) return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.kind = Op::Kind::copy;
    op.exec_delay_us = current_exec_delay_us();
    op.copy = [src, dst, width, rows, depth]() -> CUresult {  // on the worker, under the mutex
        const uintptr_t from = resolve_side(src), to = resolve_side(dst);
        if (from == 0 || to == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (size_t z = 0; z < depth; ++z)
            for (size_t y = 0; y < rows; ++y)
                std::memmove(reinterpret_cast<void*>(to + z * dst.slice + y * dst.pitch),
                             reinterpret_cast<const void*>(from + z * src.slice + y * src.pitch), width);
        return CUDA_SUCCESS;
    };
    s->queue.push_back(std::move(op));
    g.cv.notify_all();
    return CUDA_SUCCESS;
}
