// Cases: the classes in which a second recording of the real driver still
// differed from the fake (test-power issue, fidelity):
// - capture queries on the legacy default stream: the legacy stream
//   synchronises implicitly with every blocking stream, so asking it about a
//   capture while a blocking stream captures may itself be refused (and may
//   invalidate that capture); a fake that answers "not capturing" hides a
//   backend that queries stream 0 during a user's capture;
// - the extent checks of a 3-D copy with Depth 1: which of srcHeight,
//   dstHeight and the pitches the driver still checks when there is one slice
//   (a fake that checks them as for two slices refuses copies the driver runs,
//   or accepts what it refuses);
// - the host-allocation entry points (memory the driver allocates, frees and
//   registers: cuMemHostAlloc, cuMemAllocHost, cuMemFreeHost), which the
//   benchmarks' pinned peaks and user buffers handed to a backend come from:
//   registering such memory again, unregistering it, freeing what the driver
//   did not allocate, twice, or from the middle.
//
// - 2-D copies between host memory whose rows lie in two registrations, touching or a page
//   apart (found by the interposer's record of the driver's own answers in the gpu1 tier on
//   the H200: the real driver refused one of COPY-STRIDED's boundary copies with
//   CUDA_ERROR_INVALID_VALUE, the fake ran it).
//
// Recorded in cuda_driver_580_fidelity.tsv, replayed against the fake by the
// cuda_probe_replay_fake_fidelity test.
#include "probe_support.h"

#include <cstdlib>

namespace xmc::probe {
namespace {

// ---- capture queries on the legacy stream ------------------------------------------

enum class Query { is_capturing, get_info };
enum class Other { none, blocking_global, nonblocking_global, blocking_relaxed, blocking_thread_local };

const char* other_name(Other o) {
    switch (o) {
        case Other::none: return "no stream capturing";
        case Other::blocking_global: return "a blocking stream capturing in global mode";
        case Other::nonblocking_global: return "a non-blocking stream capturing in global mode";
        case Other::blocking_relaxed: return "a blocking stream capturing in relaxed mode";
        case Other::blocking_thread_local: return "a blocking stream capturing in thread-local mode";
    }
    return "?";
}

// Asks the legacy stream (0) whether it captures while `other` holds; records
// the query's answer (its status value when it succeeds) or, with `end`, what
// ending the other capture answers afterwards (did the query invalidate it?).
Outcome legacy_query(P& p, Query q, Other other, bool end) {
    NEED(cuStreamBeginCapture);
    NEED(cuStreamEndCapture);
    NEED(cuGraphDestroy);
    if (q == Query::is_capturing) NEED(cuStreamIsCapturing);
    else NEED(cuStreamGetCaptureInfo);
    Cleanup cl;
    CUstream s = nullptr;
    if (other != Other::none) {
        const bool blocking = other != Other::nonblocking_global;
        s = stream(p, cl, blocking ? unsigned(CU_STREAM_DEFAULT) : unsigned(CU_STREAM_NON_BLOCKING));
        const CUstreamCaptureMode mode = other == Other::blocking_relaxed        ? CU_STREAM_CAPTURE_MODE_RELAXED
                                         : other == Other::blocking_thread_local ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                                                 : CU_STREAM_CAPTURE_MODE_GLOBAL;
        begin_capture(p, cl, s, mode);
    }
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    const CUresult r = q == Query::is_capturing
                           ? p.d.cuStreamIsCapturing(nullptr, &st)
                           : p.d.cuStreamGetCaptureInfo(nullptr, &st, &id, nullptr, nullptr, nullptr, nullptr);
    const std::string what = std::string(q == Query::is_capturing ? "cuStreamIsCapturing" : "cuStreamGetCaptureInfo") +
                             " of the legacy stream with " + other_name(other);
    if (end) {
        CUgraph g = nullptr;
        const CUresult er = p.d.cuStreamEndCapture(s, &g);
        if (g != nullptr) p.d.cuGraphDestroy(g);
        return res(p, er, what + " (" + result_name(p.d, r) + "); then cuStreamEndCapture of that stream");
    }
    if (r != CUDA_SUCCESS) return res(p, r, what);
    return value(st, what + ": 0 none, 1 active, 2 invalidated");
}

Outcome c_legacy_is_capturing_idle(P& p) { return legacy_query(p, Query::is_capturing, Other::none, false); }
Outcome c_legacy_is_capturing_blocking_global(P& p) {
    return legacy_query(p, Query::is_capturing, Other::blocking_global, false);
}
Outcome c_legacy_is_capturing_blocking_global_end(P& p) {
    return legacy_query(p, Query::is_capturing, Other::blocking_global, true);
}
Outcome c_legacy_is_capturing_nonblocking_global(P& p) {
    return legacy_query(p, Query::is_capturing, Other::nonblocking_global, false);
}
Outcome c_legacy_is_capturing_blocking_relaxed(P& p) {
    return legacy_query(p, Query::is_capturing, Other::blocking_relaxed, false);
}
Outcome c_legacy_is_capturing_blocking_thread_local(P& p) {
    return legacy_query(p, Query::is_capturing, Other::blocking_thread_local, false);
}
Outcome c_legacy_get_info_idle(P& p) { return legacy_query(p, Query::get_info, Other::none, false); }
Outcome c_legacy_get_info_blocking_global(P& p) { return legacy_query(p, Query::get_info, Other::blocking_global, false); }
Outcome c_legacy_get_info_blocking_global_end(P& p) {
    return legacy_query(p, Query::get_info, Other::blocking_global, true);
}
Outcome c_legacy_get_info_nonblocking_global(P& p) {
    return legacy_query(p, Query::get_info, Other::nonblocking_global, false);
}
Outcome c_legacy_get_info_blocking_relaxed(P& p) {
    return legacy_query(p, Query::get_info, Other::blocking_relaxed, false);
}

// ---- 2-D copies whose rows lie in two registrations -------------------------------------

// Host to host (both sides CU_MEMORYTYPE_HOST, as the CUDA backend copies registered memory),
// two rows of 64 bytes: the registered side's first row ends its first registration (one page),
// its second row starts the next one, touching it (`gap` false) or one unregistered page further
// on; the other side is pageable. `as_dst`: the registered side is the destination. `one`: control,
// the same two pages in one registration.
Outcome copy_2d_two_registrations(P& p, bool gap, bool as_dst, bool one = false) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    const size_t pg = page_size();
    char* region = host_pages(cl, 4 * pg);
    if (one) {
        reg(p, cl, region, 2 * pg);
    } else {
        reg(p, cl, region, pg);
        reg(p, cl, region + pg + (gap ? pg : 0), pg);
    }
    char* other = host_pages(cl, 4 * pg);
    const size_t pitch = pg + (gap ? pg : 0);
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    char* mine = region + pg - 64;
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = as_dst ? other : mine;
    c.dstHost = as_dst ? mine : other;
    c.srcPitch = c.dstPitch = pitch;
    c.WidthInBytes = 64;
    c.Height = 2;
    CUresult r = p.d.cuMemcpy2DAsync(&c, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, std::string("cuMemcpy2DAsync host to host, 2 rows of 64 B, registered side as the ") +
                         (as_dst ? "destination" : "source") +
                         (one ? ", both rows in one registration" : gap ? ", rows in two registrations a page apart"
                                                                           : ", rows in two touching registrations") +
                         "; stream sync " + result_name(p.d, sr));
}
Outcome c_copy_2d_rows_one_registration(P& p) { return copy_2d_two_registrations(p, false, true, true); }
Outcome c_copy_2d_rows_two_touching_registrations_dst(P& p) { return copy_2d_two_registrations(p, false, true); }
Outcome c_copy_2d_rows_two_touching_registrations_src(P& p) { return copy_2d_two_registrations(p, false, false); }
Outcome c_copy_2d_rows_two_registrations_gap_dst(P& p) { return copy_2d_two_registrations(p, true, true); }
Outcome c_copy_2d_rows_two_registrations_gap_src(P& p) { return copy_2d_two_registrations(p, true, false); }

// ---- 3-D copies of one slice ----------------------------------------------------------

// Device to device, one slice of 4 rows of 128 bytes, pitch 256, slice height
// 4, in 64 KiB allocations; `which` changes one field.
Outcome copy_3d_one_slice(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16), b = dalloc(p, cl, 1 << 16);
    CUDA_MEMCPY3D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = a;
    c.srcPitch = 256;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = b;
    c.dstPitch = 256;
    c.dstHeight = 4;
    c.WidthInBytes = 128;
    c.Height = 4;
    c.Depth = 1;
    std::string note;
    switch (which) {
        case 0: note = "as given: valid"; break;
        case 1: c.srcHeight = 2; note = "srcHeight 2 < Height 4"; break;
        case 2: c.dstHeight = 2; note = "dstHeight 2 < Height 4"; break;
        case 3: c.srcHeight = 0; c.dstHeight = 0; note = "srcHeight and dstHeight 0"; break;
        case 4: c.srcPitch = 64; note = "srcPitch 64 < WidthInBytes 128"; break;
        case 5: c.Height = 300; c.srcHeight = 300; c.dstHeight = 300; note = "300 rows of pitch 256 (75 KiB) from a 64 KiB allocation"; break;
        case 6: c.srcZ = 1; note = "srcZ 1: the second slice of a one-slice source"; break;
        default: c.srcPitch = 0; c.dstPitch = 0; c.Height = 1; note = "one row, pitches 0"; break;
    }
    CUresult r = p.d.cuMemcpy3DAsync(&c, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, std::string("cuMemcpy3DAsync Depth 1, ") + note + "; stream sync " + result_name(p.d, sr));
}

Outcome c_copy_3d_depth1_valid(P& p) { return copy_3d_one_slice(p, 0); }
Outcome c_copy_3d_depth1_src_height_smaller(P& p) { return copy_3d_one_slice(p, 1); }
Outcome c_copy_3d_depth1_dst_height_smaller(P& p) { return copy_3d_one_slice(p, 2); }
Outcome c_copy_3d_depth1_heights_zero(P& p) { return copy_3d_one_slice(p, 3); }
Outcome c_copy_3d_depth1_pitch_smaller_than_width(P& p) { return copy_3d_one_slice(p, 4); }
Outcome c_copy_3d_depth1_past_allocation(P& p) { return copy_3d_one_slice(p, 5); }
Outcome c_copy_3d_depth1_src_z_one(P& p) { return copy_3d_one_slice(p, 6); }
Outcome c_copy_3d_depth1_one_row_pitch_zero(P& p) { return copy_3d_one_slice(p, 7); }

// ---- host memory the driver allocates --------------------------------------------------

void need_host_alloc(P& p) {
    NEED(cuMemHostAlloc);
    NEED(cuMemFreeHost);
}

// n bytes from cuMemHostAlloc with `flags`, freed at cleanup unless *freed.
void* host_alloc(P& p, Cleanup& cl, size_t n, unsigned flags = 0) {
    void* h = nullptr;
    TRY(p.d.cuMemHostAlloc(&h, n, flags));
    Driver* d = &p.d;
    cl.add([d, h] { d->cuMemFreeHost(h); });
    return h;
}

Outcome c_host_alloc_then_register(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 1 << 16);
    CUresult r = p.d.cuMemHostRegister(h, 1 << 16, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(h);
    return res(p, r, "cuMemHostRegister of 64 KiB from cuMemHostAlloc");
}
Outcome c_host_alloc_then_unregister(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 1 << 16);
    return res(p, p.d.cuMemHostUnregister(h), "cuMemHostUnregister of memory from cuMemHostAlloc");
}
Outcome c_host_alloc_free_twice(P& p) {
    need_host_alloc(p);
    void* h = nullptr;
    TRY(p.d.cuMemHostAlloc(&h, 1 << 16, 0));
    TRY(p.d.cuMemFreeHost(h));
    return res(p, p.d.cuMemFreeHost(h), "the second cuMemFreeHost of one allocation");
}
Outcome c_host_alloc_free_interior(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 1 << 16);
    return res(p, p.d.cuMemFreeHost(static_cast<char*>(h) + 4096), "cuMemFreeHost of an interior address (+4 KiB)");
}
Outcome c_host_free_not_driver_memory(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    char* h = host_pages(cl, 4);
    return res(p, p.d.cuMemFreeHost(h), "cuMemFreeHost of mmap'ed pages the driver never saw");
}
Outcome c_host_free_registered(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    char* h = host_pages(cl, 4);
    reg(p, cl, h, 4 * page_size());
    return res(p, p.d.cuMemFreeHost(h), "cuMemFreeHost of pages registered by cuMemHostRegister");
}
Outcome c_host_free_null(P& p) {
    need_host_alloc(p);
    return res(p, p.d.cuMemFreeHost(nullptr), "cuMemFreeHost(NULL)");
}
Outcome c_host_alloc_zero_bytes(P& p) {
    need_host_alloc(p);
    void* h = nullptr;
    CUresult r = p.d.cuMemHostAlloc(&h, 0, 0);
    if (r == CUDA_SUCCESS && h != nullptr) p.d.cuMemFreeHost(h);
    return res(p, r, std::string("cuMemHostAlloc of 0 bytes; pointer ") + (h ? "set" : "NULL"));
}
Outcome c_host_alloc_unknown_flag(P& p) {
    need_host_alloc(p);
    void* h = nullptr;
    CUresult r = p.d.cuMemHostAlloc(&h, 4096, 0x80);
    if (r == CUDA_SUCCESS && h != nullptr) p.d.cuMemFreeHost(h);
    return res(p, r, "cuMemHostAlloc with flag 0x80 (no such flag)");
}
Outcome c_host_alloc_null_out(P& p) {
    need_host_alloc(p);
    return res(p, p.d.cuMemHostAlloc(nullptr, 4096, 0), "cuMemHostAlloc with a NULL out-pointer");
}
Outcome c_host_alloc_flags_value(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    unsigned f = 0;
    TRY(p.d.cuMemHostGetFlags(&f, h));
    return value(f, "cuMemHostGetFlags of cuMemHostAlloc(PORTABLE|DEVICEMAP) memory");
}
Outcome c_host_alloc_flags_interior(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 1 << 16, 0);
    unsigned f = 0;
    CUresult r = p.d.cuMemHostGetFlags(&f, static_cast<char*>(h) + 4096);
    if (r != CUDA_SUCCESS) return res(p, r, "cuMemHostGetFlags of an interior address");
    return value(f, "cuMemHostGetFlags of an interior address of cuMemHostAlloc(0) memory");
}
Outcome c_host_alloc_device_pointer(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 4096, 0);
    CUdeviceptr dp = 0;
    CUresult r = p.d.cuMemHostGetDevicePointer(&dp, h, 0);
    if (r != CUDA_SUCCESS) return res(p, r, "cuMemHostGetDevicePointer of cuMemHostAlloc(0) memory");
    return identity(dp == reinterpret_cast<CUdeviceptr>(h), "device pointer of cuMemHostAlloc(0) memory");
}
Outcome c_host_alloc_memory_type(P& p) {
    need_host_alloc(p);
    Cleanup cl;
    void* h = host_alloc(p, cl, 4096, 0);
    unsigned t = 0;
    CUresult r = p.d.cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(h));
    if (r != CUDA_SUCCESS) return res(p, r, "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of cuMemHostAlloc memory");
    return value(t, "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of cuMemHostAlloc memory: 1 host, 2 device");
}
Outcome c_alloc_host_flags_value(P& p) {
    need_host_alloc(p);
    NEED(cuMemAllocHost);
    void* h = nullptr;
    TRY(p.d.cuMemAllocHost(&h, 4096));
    unsigned f = 0;
    CUresult r = p.d.cuMemHostGetFlags(&f, h);
    p.d.cuMemFreeHost(h);
    if (r != CUDA_SUCCESS) return res(p, r, "cuMemHostGetFlags of cuMemAllocHost memory");
    return value(f, "cuMemHostGetFlags of cuMemAllocHost memory");
}
Outcome c_host_alloc_no_context(P& p) {
    need_host_alloc(p);
    void* h = nullptr;
    CUresult r = p.d.cuMemHostAlloc(&h, 4096, 0);
    if (r == CUDA_SUCCESS && h != nullptr) p.d.cuMemFreeHost(h);
    return res(p, r, "cuMemHostAlloc with no current context (cuInit only)");
}

}  // namespace

std::vector<Case> fidelity_cases() {
    return {
        {"legacy_is_capturing_idle", Setup::ctx, c_legacy_is_capturing_idle, "cuStreamIsCapturing(0), nothing capturing", nullptr},
        {"legacy_is_capturing_blocking_global", Setup::ctx, c_legacy_is_capturing_blocking_global,
         "cuStreamIsCapturing(0) while a blocking stream captures (global)", nullptr},
        {"legacy_is_capturing_blocking_global_end", Setup::ctx, c_legacy_is_capturing_blocking_global_end,
         "... then ending that capture: did the query invalidate it?", nullptr},
        {"legacy_is_capturing_nonblocking_global", Setup::ctx, c_legacy_is_capturing_nonblocking_global,
         "cuStreamIsCapturing(0) while a non-blocking stream captures (global)", nullptr},
        {"legacy_is_capturing_blocking_relaxed", Setup::ctx, c_legacy_is_capturing_blocking_relaxed,
         "cuStreamIsCapturing(0) while a blocking stream captures (relaxed)", nullptr},
        {"legacy_is_capturing_blocking_thread_local", Setup::ctx, c_legacy_is_capturing_blocking_thread_local,
         "cuStreamIsCapturing(0) while a blocking stream captures (thread-local)", nullptr},
        {"legacy_get_info_idle", Setup::ctx, c_legacy_get_info_idle, "cuStreamGetCaptureInfo(0), nothing capturing", nullptr},
        {"legacy_get_info_blocking_global", Setup::ctx, c_legacy_get_info_blocking_global,
         "cuStreamGetCaptureInfo(0) while a blocking stream captures (global)", nullptr},
        {"legacy_get_info_blocking_global_end", Setup::ctx, c_legacy_get_info_blocking_global_end,
         "... then ending that capture", nullptr},
        {"legacy_get_info_nonblocking_global", Setup::ctx, c_legacy_get_info_nonblocking_global,
         "cuStreamGetCaptureInfo(0) while a non-blocking stream captures (global)", nullptr},
        {"legacy_get_info_blocking_relaxed", Setup::ctx, c_legacy_get_info_blocking_relaxed,
         "cuStreamGetCaptureInfo(0) while a blocking stream captures (relaxed)", nullptr},
        {"copy_2d_rows_one_registration", Setup::ctx, c_copy_2d_rows_one_registration,
         "cuMemcpy2DAsync host to host, rows in one registration (control)", nullptr},
        {"copy_2d_rows_two_touching_registrations_dst", Setup::ctx, c_copy_2d_rows_two_touching_registrations_dst,
         "cuMemcpy2DAsync host to host, destination rows in two touching registrations", nullptr},
        {"copy_2d_rows_two_touching_registrations_src", Setup::ctx, c_copy_2d_rows_two_touching_registrations_src,
         "cuMemcpy2DAsync host to host, source rows in two touching registrations", nullptr},
        {"copy_2d_rows_two_registrations_gap_dst", Setup::ctx, c_copy_2d_rows_two_registrations_gap_dst,
         "cuMemcpy2DAsync host to host, destination rows in two registrations a page apart", nullptr},
        {"copy_2d_rows_two_registrations_gap_src", Setup::ctx, c_copy_2d_rows_two_registrations_gap_src,
         "cuMemcpy2DAsync host to host, source rows in two registrations a page apart", nullptr},
        {"copy_3d_depth1_valid", Setup::ctx, c_copy_3d_depth1_valid, "cuMemcpy3DAsync, one slice, valid", nullptr},
        {"copy_3d_depth1_src_height_smaller", Setup::ctx, c_copy_3d_depth1_src_height_smaller,
         "cuMemcpy3DAsync, one slice, srcHeight < Height", nullptr},
        {"copy_3d_depth1_dst_height_smaller", Setup::ctx, c_copy_3d_depth1_dst_height_smaller,
         "cuMemcpy3DAsync, one slice, dstHeight < Height", nullptr},
        {"copy_3d_depth1_heights_zero", Setup::ctx, c_copy_3d_depth1_heights_zero,
         "cuMemcpy3DAsync, one slice, srcHeight = dstHeight = 0", nullptr},
        {"copy_3d_depth1_pitch_smaller_than_width", Setup::ctx, c_copy_3d_depth1_pitch_smaller_than_width,
         "cuMemcpy3DAsync, one slice, srcPitch < WidthInBytes", nullptr},
        {"copy_3d_depth1_past_allocation", Setup::ctx, c_copy_3d_depth1_past_allocation,
         "cuMemcpy3DAsync, one slice reaching past both allocations", nullptr},
        {"copy_3d_depth1_src_z_one", Setup::ctx, c_copy_3d_depth1_src_z_one, "cuMemcpy3DAsync, one slice at srcZ 1",
         nullptr},
        {"copy_3d_depth1_one_row_pitch_zero", Setup::ctx, c_copy_3d_depth1_one_row_pitch_zero,
         "cuMemcpy3DAsync, one slice of one row, pitches 0", nullptr},
        {"host_alloc_then_register", Setup::ctx, c_host_alloc_then_register, "cuMemHostRegister of cuMemHostAlloc memory",
         nullptr},
        {"host_alloc_then_unregister", Setup::ctx, c_host_alloc_then_unregister,
         "cuMemHostUnregister of cuMemHostAlloc memory", nullptr},
        {"host_alloc_free_twice", Setup::ctx, c_host_alloc_free_twice, "cuMemFreeHost twice", nullptr},
        {"host_alloc_free_interior", Setup::ctx, c_host_alloc_free_interior, "cuMemFreeHost of an interior address",
         nullptr},
        {"host_free_not_driver_memory", Setup::ctx, c_host_free_not_driver_memory, "cuMemFreeHost of mmap'ed pages",
         nullptr},
        {"host_free_registered", Setup::ctx, c_host_free_registered, "cuMemFreeHost of registered pages", nullptr},
        {"host_free_null", Setup::ctx, c_host_free_null, "cuMemFreeHost(NULL)", nullptr},
        {"host_alloc_zero_bytes", Setup::ctx, c_host_alloc_zero_bytes, "cuMemHostAlloc of 0 bytes", nullptr},
        {"host_alloc_unknown_flag", Setup::ctx, c_host_alloc_unknown_flag, "cuMemHostAlloc with an unknown flag", nullptr},
        {"host_alloc_null_out", Setup::ctx, c_host_alloc_null_out, "cuMemHostAlloc with a NULL out-pointer", nullptr},
        {"host_alloc_flags_value", Setup::ctx, c_host_alloc_flags_value, "cuMemHostGetFlags of cuMemHostAlloc memory",
         nullptr},
        {"host_alloc_flags_interior", Setup::ctx, c_host_alloc_flags_interior,
         "cuMemHostGetFlags of an interior address of cuMemHostAlloc memory", nullptr},
        {"host_alloc_device_pointer", Setup::ctx, c_host_alloc_device_pointer,
         "cuMemHostGetDevicePointer of cuMemHostAlloc memory", nullptr},
        {"host_alloc_memory_type", Setup::ctx, c_host_alloc_memory_type,
         "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of cuMemHostAlloc memory", nullptr},
        {"alloc_host_flags_value", Setup::ctx, c_alloc_host_flags_value, "cuMemHostGetFlags of cuMemAllocHost memory",
         nullptr},
        {"host_alloc_no_context", Setup::init, c_host_alloc_no_context, "cuMemHostAlloc with no current context",
         nullptr},
    };
}

}  // namespace xmc::probe
