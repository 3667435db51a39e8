// Strided copies through the driver (capability `copy`, COPY-STRIDED). The
// descriptor is checked whole first with the rules every in-tree backend
// shares (copy_desc.hpp), then mapped onto one driver call on the stream:
//   - 1-D between device memory: cuMemcpyAsync;
//   - depth 1: cuMemcpy2DAsync_v2;
//   - depth > 1 with slice pitches that are whole multiples of the pitches:
//     cuMemcpy3DAsync_v2 (the driver counts slices in rows, srcHeight);
//   - otherwise one cuMemcpy2DAsync_v2 per slice.
// Host, pinned and registered memory are CU_MEMORYTYPE_HOST (the driver finds
// page-locked memory itself), device memory is CU_MEMORYTYPE_DEVICE.
#include "cuda.hpp"
#include "streams.hpp"

#include <cstring>

namespace xmc::cuda {
namespace {

void side_2d(const xmc_copy_side &s, char *base, CUmemorytype *type, const void **host, CUdeviceptr *dev) {
    *type = s.kind == XMC_MEM_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    *host = s.kind == XMC_MEM_DEVICE ? nullptr : base;
    *dev = s.kind == XMC_MEM_DEVICE ? reinterpret_cast<CUdeviceptr>(base) : 0;
}

// The 2-D copy of slice z (relative to the described region) of d.
CUDA_MEMCPY2D slice_2d(const xmc_copy_desc &d, size_t z) {
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    char *src = static_cast<char *>(d.src.ptr) + (d.src.z + z) * d.src.slice_pitch;
    char *dst = static_cast<char *>(d.dst.ptr) + (d.dst.z + z) * d.dst.slice_pitch;
    side_2d(d.src, src, &c.srcMemoryType, &c.srcHost, &c.srcDevice);
    const void *dst_host = nullptr;
    side_2d(d.dst, dst, &c.dstMemoryType, &dst_host, &c.dstDevice);
    c.dstHost = const_cast<void *>(dst_host);
    c.srcXInBytes = d.src.x_bytes;
    c.srcY = d.src.y;
    c.srcPitch = d.src.pitch;
    c.dstXInBytes = d.dst.x_bytes;
    c.dstY = d.dst.y;
    c.dstPitch = d.dst.pitch;
    // COPY-STRIDED: the described width, never the whole pitch (which
    // overwrites the padding between the destination's rows).
    c.WidthInBytes = d.width_bytes;
    c.Height = d.height;
    return c;
}

CUDA_MEMCPY3D whole_3d(const xmc_copy_desc &d) {
    CUDA_MEMCPY3D c;
    std::memset(&c, 0, sizeof c);
    const void *dst_host = nullptr;
    side_2d(d.src, static_cast<char *>(d.src.ptr), &c.srcMemoryType, &c.srcHost, &c.srcDevice);
    side_2d(d.dst, static_cast<char *>(d.dst.ptr), &c.dstMemoryType, &dst_host, &c.dstDevice);
    c.dstHost = const_cast<void *>(dst_host);
    c.srcXInBytes = d.src.x_bytes;
    c.srcY = d.src.y;
    c.srcZ = d.src.z;
    c.srcPitch = d.src.pitch;
    // COPY-STRIDED: slices counted in rows, as cuMemcpy3D takes them.
    c.srcHeight = d.src.slice_pitch / d.src.pitch;
    c.dstXInBytes = d.dst.x_bytes;
    c.dstY = d.dst.y;
    c.dstZ = d.dst.z;
    c.dstPitch = d.dst.pitch;
    c.dstHeight = d.dst.slice_pitch / d.dst.pitch;
    c.WidthInBytes = d.width_bytes;
    c.Height = d.height;
    c.Depth = d.depth;
    return c;
}

} // namespace

// The copy step of the CUDA StreamOps: the descriptor, the stream and the slots are checked
// (reference/common/streams.hpp).
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &c, xmc_stream *handle) {
    Driver &d = Driver::get();
    Stream s;
    if (!find_stream(inst, handle, &s)) return be::bad_stream(inst, "copy", handle);
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    const char *what = "cuCtxPushCurrent";
    if (r != CUDA_SUCCESS) return driver_fail(inst, r, "copy", what);
    if (c.height == 1 && c.depth == 1 && c.src.kind == XMC_MEM_DEVICE && c.dst.kind == XMC_MEM_DEVICE) {
        what = "cuMemcpyAsync";
        const auto src = reinterpret_cast<CUdeviceptr>(static_cast<char *>(c.src.ptr) + c.src.z * c.src.slice_pitch +
                                                       c.src.y * c.src.pitch + c.src.x_bytes);
        const auto dst = reinterpret_cast<CUdeviceptr>(static_cast<char *>(c.dst.ptr) + c.dst.z * c.dst.slice_pitch +
                                                       c.dst.y * c.dst.pitch + c.dst.x_bytes);
        r = d.cuMemcpyAsync(dst, src, c.width_bytes, s.stream);
    } else if (c.depth > 1 && c.src.slice_pitch % c.src.pitch == 0 && c.dst.slice_pitch % c.dst.pitch == 0) {
        what = "cuMemcpy3DAsync";
        const CUDA_MEMCPY3D m = whole_3d(c);
        r = d.cuMemcpy3DAsync(&m, s.stream);
    } else {
        what = "cuMemcpy2DAsync";
        // Slices are enqueued in order on one stream, so a failure part-way
        // leaves earlier slices queued: reported with the slice that failed.
        for (size_t z = 0; z < c.depth && r == CUDA_SUCCESS; ++z) {
            const CUDA_MEMCPY2D m = slice_2d(c, z);
            r = d.cuMemcpy2DAsync(&m, s.stream);
        }
    }
    return r == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, r, "copy", what);
}

} // namespace xmc::cuda
