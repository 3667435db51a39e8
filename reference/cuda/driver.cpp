// Loading the driver: dlopen of XMC_CUDA_DRIVER (default libcuda.so.1),
// dlsym of each entry point by the versioned name cuda.h maps it to, cuInit,
// and the device table (ordinal, UUID, name, memory). Any failure leaves the
// driver "not usable" with the reason: the backend still opens, reports no
// device, and answers the calls that need the driver with XMC_ERR_UNSUPPORTED
// (REG-UNAVAILABLE). Primary contexts are retained on first use and released
// when no instance and no registration needs them, so a closed backend leaves
// nothing in the driver.
#include "cuda.hpp"
#include "driver_contexts.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xmc::cuda {

#define XMC_CU_STR2(x) #x
#define XMC_CU_STR(x) XMC_CU_STR2(x)  // expands the macro first: "cuMemAlloc_v2"

namespace {

// Resolves one group; returns the first missing symbol's name, or "".
template <class F>
void resolve_one(void *lib, const char *symbol, F *out, std::string *missing) {
    *out = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!*out && missing->empty()) *missing = symbol;
}

void load(Driver &d) {
    const char *env = std::getenv("XMC_CUDA_DRIVER");
    d.library = env && *env ? env : "libcuda.so.1";
    void *lib = dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    // REG-UNAVAILABLE: no driver library: not usable, the reason kept.
    if (!lib) {
        const char *err = dlerror();
        d.why = "no CUDA driver: dlopen(" + d.library + ") failed: " + (err ? err : "unknown error");
        return;
    }
    // Kept loaded for the process's life: contexts and callbacks point into it.
    std::string missing_core, unused;
#define XMC_CU_CORE_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &missing_core);
#define XMC_CU_REG_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_register);
#define XMC_CU_STREAM_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_stream);
#define XMC_CU_COPY_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_copy);
#define XMC_CU_VMM_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_vmm);
#define XMC_CU_TRANSFER_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_transfer);
#define XMC_CU_IPC_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_ipc);
#define XMC_CU_IPC_VMM_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_ipc_vmm);
#define XMC_CU_GRAPH_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &d.missing_graph);
#define XMC_CU_OPT_ONE(name) resolve_one(lib, XMC_CU_STR(name), &d.name, &unused);
    XMC_CU_CORE(XMC_CU_CORE_ONE)
    XMC_CU_REGISTER(XMC_CU_REG_ONE)
    XMC_CU_STREAM(XMC_CU_STREAM_ONE)
    XMC_CU_COPY(XMC_CU_COPY_ONE)
    XMC_CU_VMM(XMC_CU_VMM_ONE)
    XMC_CU_TRANSFER(XMC_CU_TRANSFER_ONE)
    XMC_CU_IPC(XMC_CU_IPC_ONE)
    XMC_CU_IPC_VMM(XMC_CU_IPC_VMM_ONE)
    XMC_CU_GRAPH(XMC_CU_GRAPH_ONE)
    XMC_CU_OPTIONAL(XMC_CU_OPT_ONE)
    if (!missing_core.empty()) {
        d.why = d.library + " does not export " + missing_core + ", which the backend needs";
        return;
    }
    if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
        d.why = "cuInit failed with " + std::string(d.result_name(r)) + " (" + std::to_string(r) + ")";
        return;
    }
    int count = 0;
    if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count <= 0) {
        d.why = r != CUDA_SUCCESS ? "cuDeviceGetCount failed with " + std::string(d.result_name(r))
                                  : "no device: the driver reports none";
        return;
    }
    // The xmc device index is the driver's ordinal; each device is identified
    // by its UUID, which device_info reports.
    for (int i = 0; i < count; ++i) {
        Device dev;
        CUresult r = d.cuDeviceGet(&dev.dev, i);
        if (r == CUDA_SUCCESS) r = d.cuDeviceGetUuid(&dev.uuid, dev.dev);
        if (r == CUDA_SUCCESS) r = d.cuDeviceGetName(dev.name, sizeof dev.name, dev.dev);
        if (r == CUDA_SUCCESS) r = d.cuDeviceTotalMem(&dev.total, dev.dev);
        if (r != CUDA_SUCCESS) {
            d.devices.clear();
            d.why = "describing device " + std::to_string(i) + " failed with " + d.result_name(r);
            return;
        }
        // A device that cannot say is taken not to export (its slots are then shared by no IPC).
        int fd_ok = 0;
        dev.posix_fd = d.cuDeviceGetAttribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                              dev.dev) == CUDA_SUCCESS && fd_ok != 0;
        d.devices.push_back(dev);
    }
    d.usable = true;
}

} // namespace

Driver &Driver::get() {
    static Driver d;
    static std::once_flag once;
    std::call_once(once, [] { load(d); });
    return d;
}

const char *Driver::result_name(CUresult r) const {
    const char *name = nullptr;
    if (cuGetErrorName && cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
    return "CUresult";
}

CUresult Driver::context_for(const CUuuid &uuid, CUcontext *out, int32_t *index) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < devices.size(); ++i) {
        Device &dev = devices[i];
        // REG-UUID: matched by UUID, never by position.
        if (std::memcmp(dev.uuid.bytes, uuid.bytes, sizeof uuid.bytes) != 0) continue;
        if (!dev.ctx) {
            if (CUresult r = cuDevicePrimaryCtxRetain(&dev.ctx, dev.dev); r != CUDA_SUCCESS) {
                dev.ctx = nullptr;
                return r;
            }
        }
        *out = dev.ctx;
        if (index) *index = static_cast<int32_t>(i);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

CUresult Driver::release_if_idle() {
    return be::release_if_idle(*this, CUDA_SUCCESS, [&](Device &dev) { return cuDevicePrimaryCtxRelease(dev.dev); });
}

xmc_status status_of(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return XMC_OK;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return XMC_ERR_ALREADY_REGISTERED;
    case CUDA_ERROR_NOT_SUPPORTED: return XMC_ERR_UNSUPPORTED;
    // GRAPH-CAPTURE: what the driver refuses because of a capture (and the end of a
    // capture it invalidated) is its own class.
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: return XMC_ERR_CAPTURING;
    default: return XMC_ERR_DRIVER;
    }
}

xmc_status driver_fail(xmc_instance *inst, CUresult r, const char *call, const char *what) {
    return be::fail(inst, status_of(r), r, call, "%s: %s failed with %s (%d)", call, what,
                    Driver::get().result_name(r), static_cast<int>(r));
}

xmc_status require(xmc_instance *inst, const char *call, const std::string &missing) {
    Driver &d = Driver::get();
    return be::require_driver(inst, call, d.usable, d.why, "driver", d.library, missing);
}

xmc_status check_device(xmc_instance *inst, int32_t device, const char *call) {
    return be::check_device_index(inst, device, Driver::get().devices.size(), call);
}

} // namespace xmc::cuda
