// xmc_nccl_probe: what the NCCL on this machine answers for the two set-ups the CUDA backend's
// NCCL path meets on one GPU (SPEC 8), printed one line each:
//   1. a single-rank communicator's local path: a grouped ncclSend/ncclRecv to itself of 1 MiB of
//      device memory, the bytes compared;
//   2. two ranks on the one GPU (two threads of this process, one communicator): NCCL refuses
//      that by default; the line says with what, or that it worked.
// The driver is XMC_CUDA_DRIVER (default libcuda.so.1), NCCL is XMC_NCCL_LIBRARY (default
// libnccl.so.2), both loaded as the backend loads them. Exit 0 when both lines were answered
// (whatever the answers), 77 without a driver, NCCL or device (skipped), 1 on a wrong byte.
#include <cuda.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define STR2(x) #x
#define STR(x) STR2(x)
#define CU(X) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxPushCurrent) X(cuCtxPopCurrent) \
    X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamCreate) X(cuStreamSynchronize)    \
    X(cuStreamDestroy)
#define NC(X) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommDestroy) \
    X(ncclCommAbort) X(ncclCommGetAsyncError) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) \
    X(ncclGetErrorString)
struct Api {
#define M(name) decltype(&::name) name = nullptr;
    CU(M) NC(M)
#undef M
} api;

std::string text(ncclResult_t r) { return std::string(api.ncclGetErrorString(r)) + " (" + std::to_string(int(r)) + ")"; }

ncclResult_t settle(ncclComm_t c, int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    ncclResult_t a = ncclInProgress;
    while (std::chrono::steady_clock::now() < end) {
        if (ncclResult_t r = api.ncclCommGetAsyncError(c, &a); r != ncclSuccess) return r;
        if (a != ncclInProgress) return a;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return a;
}

// A non-blocking communicator (as the backend makes them), settled within 20 s.
ncclResult_t make(ncclComm_t *c, int n, const ncclUniqueId &id, int rank) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = api.ncclCommInitRankConfig(c, n, id, rank, &cfg);
    if (r == ncclInProgress) r = settle(*c, 20000);
    return r;
}

} // namespace

int main() {
    const char *drv = std::getenv("XMC_CUDA_DRIVER"), *nl = std::getenv("XMC_NCCL_LIBRARY");
    void *cu = dlopen(drv && *drv ? drv : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *nc = dlopen(nl && *nl ? nl : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!cu || !nc) {
        std::printf("nccl probe: skipped: %s\n", dlerror());
        return 77;
    }
#define R(lib, name) api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, STR(name)));
#define RC(name) R(cu, name)
#define RN(name) R(nc, name)
    CU(RC) NC(RN)
    int version = 0;
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (!api.cuInit || api.cuInit(0) != CUDA_SUCCESS || api.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        api.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || !api.ncclGetVersion ||
        !api.ncclCommInitRankConfig || api.ncclGetVersion(&version) != ncclSuccess) {
        std::printf("nccl probe: skipped: no usable driver, device 0 or NCCL entry points\n");
        return 77;
    }
    std::printf("nccl probe: NCCL %d (%s), driver %s\n", version, nl && *nl ? nl : "libnccl.so.2",
                drv && *drv ? drv : "libcuda.so.1");
    const size_t bytes = 1 << 20;
    int rc = 0;
    {  // 1. one rank, to itself
        api.cuCtxPushCurrent(ctx);
        CUdeviceptr a = 0, b = 0;
        CUstream s = nullptr;
        std::vector<unsigned char> host(bytes), back(bytes, 0);
        for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>(i * 7 + 3);
        api.cuMemAlloc(&a, bytes);
        api.cuMemAlloc(&b, bytes);
        api.cuMemcpyHtoD(a, host.data(), bytes);
        api.cuStreamCreate(&s, 0);
        ncclUniqueId id;
        ncclComm_t c = nullptr;
        ncclResult_t r = api.ncclGetUniqueId(&id);
        if (r == ncclSuccess) r = make(&c, 1, id, 0);
        if (r == ncclSuccess) {
            api.ncclGroupStart();
            ncclResult_t s1 = api.ncclSend(reinterpret_cast<void *>(a), bytes, ncclUint8, 0, c, s);
            ncclResult_t s2 = api.ncclRecv(reinterpret_cast<void *>(b), bytes, ncclUint8, 0, c, s);
            r = api.ncclGroupEnd();
            if (s1 != ncclSuccess && s1 != ncclInProgress) r = s1;
            if (s2 != ncclSuccess && s2 != ncclInProgress) r = s2;
            if (r == ncclInProgress) r = settle(c, 20000);
            if (r == ncclSuccess && api.cuStreamSynchronize(s) != CUDA_SUCCESS) r = ncclUnhandledCudaError;
        }
        if (r == ncclSuccess) {
            api.cuMemcpyDtoH(back.data(), b, bytes);
            const bool same = std::memcmp(host.data(), back.data(), bytes) == 0;
            std::printf("nccl probe: single-rank local path: %s\n", same ? "ok, 1 MiB arrived" : "WRONG BYTES");
            if (!same) rc = 1;
        } else {
            std::printf("nccl probe: single-rank local path: failed with %s\n", text(r).c_str());
        }
        if (c && api.ncclCommDestroy(c) != ncclSuccess) api.ncclCommAbort(c);
        api.cuStreamDestroy(s);
        api.cuMemFree(a);
        api.cuMemFree(b);
        CUcontext popped = nullptr;
        api.cuCtxPopCurrent(&popped);
    }
    {  // 2. two ranks on the one GPU
        ncclUniqueId id;
        ncclResult_t got[2] = {ncclInternalError, ncclInternalError};
        ncclComm_t comms[2] = {nullptr, nullptr};
        if (api.ncclGetUniqueId(&id) == ncclSuccess) {
            std::vector<std::thread> t;
            for (int r = 0; r < 2; ++r)
                t.emplace_back([&, r] {
                    api.cuCtxPushCurrent(ctx);
                    got[r] = make(&comms[r], 2, id, r);
                    CUcontext popped = nullptr;
                    api.cuCtxPopCurrent(&popped);
                });
            for (auto &x : t) x.join();
        }
        std::printf("nccl probe: two ranks on one GPU: rank 0 %s, rank 1 %s\n",
                    got[0] == ncclSuccess ? "joined" : ("answered " + text(got[0])).c_str(),
                    got[1] == ncclSuccess ? "joined" : ("answered " + text(got[1])).c_str());
        for (ncclComm_t c : comms)
            if (c) api.ncclCommAbort(c);
    }
    return rc;
}
