// Cases: initialisation, devices, primary contexts and the context stack,
// peer access and peer copies (XMC_CU_CORE, XMC_CU_TRANSFER), and the optional
// cuGetErrorName / cuStreamWaitValue32 (XMC_CU_OPTIONAL). Each refused
// argument once: NULL results, invalid ordinals, bad flags, second operations.
#include "probe_support.h"

namespace xmc::probe {
namespace {

// -- initialisation and devices
Outcome c_init_invalid_flags(P& p) { return res(p, p.d.cuInit(1), "cuInit(1) before any cuInit"); }
Outcome c_init_twice(P& p) { return res(p, p.d.cuInit(0), "second cuInit(0)"); }
Outcome c_device_get_count_null(P& p) { return res(p, p.d.cuDeviceGetCount(nullptr)); }
Outcome c_device_get_null(P& p) { return res(p, p.d.cuDeviceGet(nullptr, 0)); }

// A device's query with a device that does not exist (ordinal = count), or a NULL result.
Outcome c_device_get_name_invalid_device(P& p) {
    char name[128] = {0};
    return res(p, p.d.cuDeviceGetName(name, sizeof name, p.device_count), "device = device count");
}
Outcome c_device_get_name_null(P& p) { return res(p, p.d.cuDeviceGetName(nullptr, 128, 0)); }
Outcome c_device_get_name_zero_length(P& p) {
    char name[8] = {0};
    return res(p, p.d.cuDeviceGetName(name, 0, 0), "len 0");
}
Outcome c_device_get_uuid_invalid_device(P& p) {
    CUuuid u;
    return res(p, p.d.cuDeviceGetUuid(&u, p.device_count), "device = device count");
}
Outcome c_device_get_uuid_null(P& p) { return res(p, p.d.cuDeviceGetUuid(nullptr, 0)); }
Outcome c_device_total_mem_invalid_device(P& p) {
    size_t t = 0;
    return res(p, p.d.cuDeviceTotalMem(&t, p.device_count), "device = device count");
}
Outcome c_device_total_mem_null(P& p) { return res(p, p.d.cuDeviceTotalMem(nullptr, 0)); }

// -- primary contexts and the context stack
Outcome c_primary_ctx_retain_invalid_device(P& p) {
    CUcontext c = nullptr;
    CUresult r = p.d.cuDevicePrimaryCtxRetain(&c, p.device_count);
    if (r == CUDA_SUCCESS) p.d.cuDevicePrimaryCtxRelease(p.device_count);
    return res(p, r, "device = device count");
}
Outcome c_primary_ctx_retain_null(P& p) {
    CUresult r = p.d.cuDevicePrimaryCtxRetain(nullptr, 0);
    if (r == CUDA_SUCCESS) p.d.cuDevicePrimaryCtxRelease(0);
    return res(p, r);
}
Outcome c_primary_ctx_release_invalid_device(P& p) {
    return res(p, p.d.cuDevicePrimaryCtxRelease(p.device_count), "device = device count");
}
Outcome c_primary_ctx_release_twice(P& p) {
    CUcontext c = nullptr;
    TRY(p.d.cuDevicePrimaryCtxRetain(&c, 0));
    TRY(p.d.cuDevicePrimaryCtxRelease(0));
    return res(p, p.d.cuDevicePrimaryCtxRelease(0), "retained once, released twice");
}
Outcome c_ctx_push_null(P& p) {
    CUresult r = p.d.cuCtxPushCurrent(nullptr);
    CUcontext c = nullptr;
    if (r == CUDA_SUCCESS) p.d.cuCtxPopCurrent(&c);
    return res(p, r);
}

// A primary context whose last retain was released (the backend releases
// when idle and may race a late caller), pushed again or used.
Outcome c_ctx_released_primary(P& p, bool use) {
    CUcontext c = nullptr;
    TRY(p.d.cuDevicePrimaryCtxRetain(&c, 0));
    TRY(p.d.cuDevicePrimaryCtxRelease(0));
    CUresult r = p.d.cuCtxPushCurrent(c);
    if (r != CUDA_SUCCESS || !use) {
        CUcontext x = nullptr;
        if (r == CUDA_SUCCESS) p.d.cuCtxPopCurrent(&x);
        return res(p, r, "cuCtxPushCurrent of a released primary context");
    }
    CUdeviceptr a = 0;
    CUresult m = p.d.cuMemAlloc(&a, 1 << 20);
    if (m == CUDA_SUCCESS) p.d.cuMemFree(a);
    CUcontext x = nullptr;
    p.d.cuCtxPopCurrent(&x);
    return res(p, m, "cuMemAlloc in a released primary context (pushed: CUDA_SUCCESS)");
}

// -- peer access and peer copies
Outcome c_can_access_peer_same_device(P& p) {
    int can = -1;
    CUresult r = p.d.cuDeviceCanAccessPeer(&can, 0, 0);
    if (r != CUDA_SUCCESS) return res(p, r);
    return value(can, "cuDeviceCanAccessPeer(0, 0)");
}
Outcome c_can_access_peer_invalid_device(P& p) {
    int can = -1;
    return res(p, p.d.cuDeviceCanAccessPeer(&can, 0, p.device_count), "peer = device count");
}
Outcome c_can_access_peer_null(P& p) { return res(p, p.d.cuDeviceCanAccessPeer(nullptr, 0, 0)); }

Outcome c_enable_peer_access_self(P& p) {
    CUresult r = p.d.cuCtxEnablePeerAccess(p.ctx[0], 0);
    if (r == CUDA_SUCCESS) p.d.cuCtxDisablePeerAccess(p.ctx[0]);
    return res(p, r, "the current context itself");
}
Outcome c_enable_peer_access_null(P& p) {
    CUresult r = p.d.cuCtxEnablePeerAccess(nullptr, 0);
    return res(p, r);
}
Outcome c_enable_peer_access_bad_flags(P& p) {
    CUresult r = p.d.cuCtxEnablePeerAccess(p.ctx[1], 1);
    if (r == CUDA_SUCCESS) p.d.cuCtxDisablePeerAccess(p.ctx[1]);
    return res(p, r, "flags 1, device 1's context");
}
Outcome c_enable_peer_access_twice(P& p) {
    TRY(p.d.cuCtxEnablePeerAccess(p.ctx[1], 0));
    CUresult r = p.d.cuCtxEnablePeerAccess(p.ctx[1], 0);
    p.d.cuCtxDisablePeerAccess(p.ctx[1]);
    return res(p, r, "device 1's context, enabled twice from device 0's");
}

// cuMemcpyPeerAsync on one device's context (both sides device 0).
Outcome c_memcpy_peer(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16), b = dalloc(p, cl, 1 << 16);
    CUresult r = CUDA_ERROR_UNKNOWN;
    const char* note = "";
    if (which == 0) {
        r = p.d.cuMemcpyPeerAsync(b, nullptr, a, p.ctx[0], 4096, s);
        note = "destination context NULL";
    } else if (which == 1) {
        r = p.d.cuMemcpyPeerAsync(b, p.ctx[0], a, p.ctx[0], (1 << 16) + 1, s);
        note = "one byte past the end of both allocations";
    } else {
        CUdeviceptr gone = 0;
        TRY(p.d.cuMemAlloc(&gone, 1 << 16));
        TRY(p.d.cuMemFree(gone));
        r = p.d.cuMemcpyPeerAsync(b, p.ctx[0], gone, p.ctx[0], 4096, s);
        note = "source freed";
    }
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, std::string(note) + "; stream sync " + result_name(p.d, sr));
}

CUDA_MEMCPY3D_PEER peer_3d(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx) {
    CUDA_MEMCPY3D_PEER c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.srcContext = sctx;
    c.srcPitch = 256;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstContext = dctx;
    c.dstPitch = 256;
    c.dstHeight = 4;
    c.WidthInBytes = 128;
    c.Height = 4;
    c.Depth = 2;
    return c;
}

Outcome c_memcpy_3d_peer(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16), b = dalloc(p, cl, 1 << 16);
    CUDA_MEMCPY3D_PEER c = peer_3d(b, p.ctx[0], a, p.ctx[0]);
    const CUDA_MEMCPY3D_PEER* arg = &c;
    const char* note = "";
    if (which == 0) { arg = nullptr; note = "NULL description"; }
    if (which == 1) { c.srcContext = nullptr; note = "source context NULL"; }
    if (which == 2) { c.srcPitch = 64; note = "srcPitch 64 < WidthInBytes 128"; }
    CUresult r = p.d.cuMemcpy3DPeerAsync(arg, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, std::string(note) + "; stream sync " + result_name(p.d, sr));
}

Outcome c_memcpy_peer_between_devices_no_peer_access(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a0 = dalloc(p, cl, 1 << 16);
    CUdeviceptr a1 = dalloc_device1(p, cl, 1 << 16);
    CUresult r = p.d.cuMemcpyPeerAsync(a1, p.ctx[1], a0, p.ctx[0], 1 << 16, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "device 0 to device 1, peer access never enabled; sync " + result_name(p.d, sr));
}

// -- error names
Outcome c_get_error_name_unknown(P& p) {
    const char* s = nullptr;
    // 1000 is no CUresult, yet inside the enum's range (9999 is not: a C++
    // driver such as the fake would load it with undefined behaviour)
    return res(p, p.d.cuGetErrorName(static_cast<CUresult>(1000), &s), "CUresult 1000");
}
Outcome c_get_error_name_null(P& p) { return res(p, p.d.cuGetErrorName(CUDA_ERROR_INVALID_VALUE, nullptr)); }

// -- cuStreamWaitValue32: the word is set to 1 and waited for with value 1,
// which every condition (GEQ, EQ, AND, NOR) already meets, so an accepted
// wait never holds the stream.
Outcome c_wait_value(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr word = dalloc(p, cl, 4096);
    uint32_t one = 1;
    TRY(p.d.cuMemcpyHtoD(word, &one, sizeof one));
    CUdeviceptr at = word;
    unsigned flags = CU_STREAM_WAIT_VALUE_GEQ;
    std::string note;
    char* host = nullptr;
    if (which == 0) { at = word + 2; note = "address 2 bytes into a word"; }
    if (which == 1) {
        host = host_pages(cl, 1);
        std::memcpy(host, &one, sizeof one);
        at = reinterpret_cast<CUdeviceptr>(host);
        note = "unregistered host memory";
    }
    if (which == 2) { flags = 0x10; note = "flags 0x10"; }
    if (which == 4) {
        CUdeviceptr gone = 0;
        TRY(p.d.cuMemAlloc(&gone, 4096));
        TRY(p.d.cuMemFree(gone));
        at = gone;
        note = "freed device memory";
    }
    if (which == 5) {
        host = host_pages(cl, 1);
        std::memcpy(host, &one, sizeof one);
        reg(p, cl, host, page_size(), CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
        TRY(p.d.cuMemHostGetDevicePointer(&at, host, 0));
        note = "registered host memory through its device pointer (the backend's wait words)";
    }
    CUresult r = p.d.cuStreamWaitValue32(s, at, 1, flags);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, note + "; stream sync " + result_name(p.d, sr));
}

}  // namespace

std::vector<Case> core_cases() {
    return {
        {"init_invalid_flags", Setup::none, c_init_invalid_flags, "cuInit(1)", nullptr},
        {"init_twice", Setup::init, c_init_twice, "cuInit(0) after cuInit(0)", nullptr},
        {"device_get_count_null", Setup::init, c_device_get_count_null, "cuDeviceGetCount(NULL)", nullptr},
        {"device_get_null", Setup::init, c_device_get_null, "cuDeviceGet(NULL, 0)", nullptr},
        {"device_get_name_invalid_device", Setup::init, c_device_get_name_invalid_device,
         "cuDeviceGetName of device = device count", nullptr},
        {"device_get_name_null", Setup::init, c_device_get_name_null, "cuDeviceGetName(NULL, 128, 0)", nullptr},
        {"device_get_name_zero_length", Setup::init, c_device_get_name_zero_length, "cuDeviceGetName(buf, 0, 0)",
         kRefusedNotCrashed},
        {"device_get_uuid_invalid_device", Setup::init, c_device_get_uuid_invalid_device,
         "cuDeviceGetUuid of device = device count", nullptr},
        {"device_get_uuid_null", Setup::init, c_device_get_uuid_null, "cuDeviceGetUuid(NULL, 0)", nullptr},
        {"device_total_mem_invalid_device", Setup::init, c_device_total_mem_invalid_device,
         "cuDeviceTotalMem of device = device count", nullptr},
        {"device_total_mem_null", Setup::init, c_device_total_mem_null, "cuDeviceTotalMem(NULL, 0)", nullptr},
        {"primary_ctx_retain_invalid_device", Setup::init, c_primary_ctx_retain_invalid_device,
         "cuDevicePrimaryCtxRetain of device = device count", nullptr},
        {"primary_ctx_retain_null", Setup::init, c_primary_ctx_retain_null, "cuDevicePrimaryCtxRetain(NULL, 0)",
         nullptr},
        {"primary_ctx_release_invalid_device", Setup::init, c_primary_ctx_release_invalid_device,
         "cuDevicePrimaryCtxRelease of device = device count", nullptr},
        {"primary_ctx_release_twice", Setup::init, c_primary_ctx_release_twice,
         "cuDevicePrimaryCtxRelease twice after one retain", nullptr},
        {"ctx_push_null", Setup::ctx, c_ctx_push_null, "cuCtxPushCurrent(NULL)", nullptr},
        {"ctx_push_released_primary", Setup::init, with<c_ctx_released_primary, false>,
         "cuCtxPushCurrent of a primary context released to no retains", nullptr},
        {"ctx_released_primary_mem_alloc", Setup::init, with<c_ctx_released_primary, true>,
         "cuMemAlloc with a released primary context pushed", nullptr},
        {"can_access_peer_same_device", Setup::init, c_can_access_peer_same_device,
         "cuDeviceCanAccessPeer of a device with itself", nullptr},
        {"can_access_peer_invalid_device", Setup::init, c_can_access_peer_invalid_device,
         "cuDeviceCanAccessPeer with peer = device count", nullptr},
        {"can_access_peer_null", Setup::init, c_can_access_peer_null, "cuDeviceCanAccessPeer(NULL, 0, 0)", nullptr},
        {"enable_peer_access_self", Setup::ctx, c_enable_peer_access_self,
         "cuCtxEnablePeerAccess of the current context", nullptr},
        {"enable_peer_access_null", Setup::ctx, c_enable_peer_access_null, "cuCtxEnablePeerAccess(NULL, 0)",
         nullptr},
        {"enable_peer_access_bad_flags", Setup::ctx2, c_enable_peer_access_bad_flags,
         "cuCtxEnablePeerAccess with flags 1", nullptr},
        {"enable_peer_access_twice", Setup::ctx2, c_enable_peer_access_twice,
         "cuCtxEnablePeerAccess of the same peer twice", nullptr},
        {"memcpy_peer_null_context", Setup::ctx, with<c_memcpy_peer, 0>,
         "cuMemcpyPeerAsync with a NULL destination context", nullptr},
        {"memcpy_peer_past_end", Setup::ctx, with<c_memcpy_peer, 1>,
         "cuMemcpyPeerAsync one byte past the allocations", nullptr},
        {"memcpy_peer_freed_source", Setup::ctx, with<c_memcpy_peer, 2>,
         "cuMemcpyPeerAsync from freed device memory", nullptr},
        {"memcpy_3d_peer_null_desc", Setup::ctx, with<c_memcpy_3d_peer, 0>, "cuMemcpy3DPeerAsync(NULL)",
         kRefusedNotCrashed},
        {"memcpy_3d_peer_null_context", Setup::ctx, with<c_memcpy_3d_peer, 1>,
         "cuMemcpy3DPeerAsync with a NULL source context", nullptr},
        {"memcpy_3d_peer_pitch_smaller_than_width", Setup::ctx, with<c_memcpy_3d_peer, 2>,
         "cuMemcpy3DPeerAsync with srcPitch < WidthInBytes", nullptr},
        {"memcpy_peer_between_devices_no_peer_access", Setup::ctx2, c_memcpy_peer_between_devices_no_peer_access,
         "cuMemcpyPeerAsync between two devices without peer access", nullptr},
        {"get_error_name_unknown", Setup::none, c_get_error_name_unknown, "cuGetErrorName of CUresult 1000",
         nullptr},
        {"get_error_name_null", Setup::none, c_get_error_name_null, "cuGetErrorName with a NULL result", kRefusedNotCrashed},
        {"wait_value32_unaligned", Setup::ctx, with<c_wait_value, 0>,
         "cuStreamWaitValue32 on an address that is not 4-byte aligned", nullptr},
        {"wait_value32_host_pointer", Setup::ctx, with<c_wait_value, 1>,
         "cuStreamWaitValue32 on unregistered host memory", nullptr},
        {"wait_value32_bad_flags", Setup::ctx, with<c_wait_value, 2>, "cuStreamWaitValue32 with flags 0x10",
         nullptr},
        {"wait_value32_freed_memory", Setup::ctx, with<c_wait_value, 4>,
         "cuStreamWaitValue32 on freed device memory", nullptr},
        {"wait_value32_registered_host", Setup::ctx, with<c_wait_value, 5>,
         "cuStreamWaitValue32 on registered host memory's device pointer", nullptr},
    };
}

}  // namespace xmc::probe
