// Registration through the driver (capability `register`, REG-*):
// cuMemHostRegister in the primary context of the device asked for, found by
// its UUID (REG-UUID), then cuMemHostGetDevicePointer must give back the host
// address (REG-IDENTITY). Ranges are tracked in a process-wide ordered map
// shared by every instance, together with the context that registered them,
// so unregister releases in that context (REG-SAME-CONTEXT) and a failed
// release keeps the entry (REG-UNREG-FAIL).
//
// Flags: CU_MEMHOSTREGISTER_DEVICEMAP, not PORTABLE, unless the caller asks
// for XMC_REG_PORTABLE (REG-PORTABLE: usable by every device; then
// CU_MEMHOSTREGISTER_PORTABLE too). SPEC REG-DEVICE says a plain registration
// lives in a context of device d only; a portable one would be visible from
// every context and hide a registration made in the wrong one.
//
// Large registrations (REG-LARGE): XMC_REG_LARGE_SPLIT in chunks of
// kRegChunkBytes (1 GiB). The driver documents no per-call limit, but a large
// range can be refused whole (hardware/probe: reg_huge_prot_none answered
// CUDA_ERROR_OUT_OF_MEMORY); chunks keep each call bounded. All or nothing: a
// chunk the driver refuses releases the chunks before it and reports the
// driver's code; the chunks are one registration to query and unregister,
// and unregister releases every chunk.
//
// Alignment policy (REG-ALIGN): refuse, as everywhere; the driver would take
// unaligned ranges (hardware/probe: reg_unaligned_*).
#include "cuda.hpp"

#include <cstring>

namespace xmc::cuda {
namespace {

xmc_status check(xmc_instance *inst, int32_t device, uint32_t) {
    Driver &d = Driver::get();
    // REG-UNAVAILABLE: no driver, device or entry point: unsupported, never a crash.
    if (xmc_status st = require(inst, "reg_register", d.missing_register); st != XMC_OK) return st;
    return check_device(inst, device, "reg_register");
}

// REG-DEVICE, REG-UUID: device `index`'s own primary context, by UUID.
xmc_status context(xmc_instance *inst, const char *call, int32_t index, void **ctx) {
    Driver &d = Driver::get();
    CUcontext c = nullptr;
    if (CUresult r = d.context_for(d.devices[static_cast<size_t>(index)].uuid, &c, nullptr); r != CUDA_SUCCESS)
        return driver_fail(inst, r, call, "cuDevicePrimaryCtxRetain");
    *ctx = c;
    return XMC_OK;
}

// REG-PORTABLE: XMC_REG_PORTABLE adds CU_MEMHOSTREGISTER_PORTABLE.
xmc_status make(xmc_instance *inst, const char *call, void *ctx, void *addr, size_t bytes, int32_t, uint32_t flags,
                int64_t *native) {
    CUresult res = CUDA_SUCCESS;
    const xmc_status st = driver_register_in(inst, call, static_cast<CUcontext>(ctx), addr, bytes, &res,
                                             (flags & XMC_REG_PORTABLE) ? CU_MEMHOSTREGISTER_PORTABLE : 0u);
    *native = res;
    return st;
}

int64_t release(const char *, void *ctx, void *, void *addr, size_t) {
    Driver &d = Driver::get();
    CtxScope scope(d, static_cast<CUcontext>(ctx));
    CUresult res = scope.result();
    if (res == CUDA_SUCCESS) res = d.cuMemHostUnregister(addr);
    if (res == CUDA_SUCCESS) {
        std::lock_guard<std::mutex> dl(d.mu);
        --d.registrations;
    }
    return res;
}

const char *native_name(int64_t r) { return Driver::get().result_name(static_cast<CUresult>(r)); }
void idle() { Driver::get().release_if_idle(); }
bool gone(int64_t) { return false; }

} // namespace

be::Registrations &registrations() {
    static be::Registrations r(be::RegOps{"cuMemHostUnregister", {XMC_REG_LARGE_SPLIT, kRegChunkBytes}, check,
                                          context, make, release, native_name, idle, gone, be::reg_lock, be::reg_unlock});
    return r;
}

XMC_REGISTRATION_ENTRIES(registrations)

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    return registrations().release_all(inst, released);
}

xmc_status driver_register_in(xmc_instance *inst, const char *call, CUcontext ctx, void *addr, size_t bytes,
                              CUresult *native, unsigned extra_flags) {
    Driver &d = Driver::get();
    CtxScope scope(d, ctx);
    if ((*native = scope.result()) != CUDA_SUCCESS) return driver_fail(inst, *native, call, "cuCtxPushCurrent");
    // REG-FAIL: a refused registration fails with the driver's code, untracked.
    if ((*native = d.cuMemHostRegister(addr, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | extra_flags)) != CUDA_SUCCESS)
        return driver_fail(inst, *native, call, "cuMemHostRegister");
    CUdeviceptr dptr = 0;
    const CUresult got = d.cuMemHostGetDevicePointer(&dptr, addr, 0);
    // REG-IDENTITY: the device pointer must be the host address, else undone.
    if (got != CUDA_SUCCESS || dptr != reinterpret_cast<CUdeviceptr>(addr)) {
        // Nothing stays registered: undo before refusing.
        const CUresult undo = d.cuMemHostUnregister(addr);
        *native = got != CUDA_SUCCESS ? got : undo;
        if (got != CUDA_SUCCESS) return driver_fail(inst, got, call, "cuMemHostGetDevicePointer");
        return be::fail(inst, XMC_ERR_NON_IDENTITY, undo, call,
                        "%s: the driver mapped host %p at device address 0x%llx, not the same address%s", call, addr,
                        static_cast<unsigned long long>(dptr),
                        undo == CUDA_SUCCESS ? "; registration undone" : "; undoing it failed too (native code)");
    }
    std::lock_guard<std::mutex> lock(d.mu);
    ++d.registrations;  // keeps the context retained after the last close
    return XMC_OK;
}

xmc_status driver_register(xmc_instance *inst, const char *call, void *addr, size_t bytes, int32_t index,
                           CUcontext *ctx_out, CUresult *native, unsigned extra_flags) {
    void *ctx = nullptr;
    if (xmc_status st = context(inst, call, index, &ctx); st != XMC_OK) {
        xmc_error_info why{};
        be::last_error(inst, &why);
        *native = static_cast<CUresult>(why.native_code);
        return st;
    }
    *ctx_out = static_cast<CUcontext>(ctx);
    return driver_register_in(inst, call, *ctx_out, addr, bytes, native, extra_flags);
}

} // namespace xmc::cuda
