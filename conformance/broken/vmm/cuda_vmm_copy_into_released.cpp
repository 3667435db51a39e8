// xmc-selftest: fails VMM-UNMAPPED-FAULTS,VMM-ERROR-CLEAR,VMM-BATCH-PARTIAL
// xmc-selftest: may-fail VMM-DEFERRED,VMM-CLOSE: their fault sweeps probe a released slot with a copy only at the sites where the fault lands after the release, and on CUDA which cuCtxPushCurrent call that is depends on the driver's callback thread; 1 run in 3 here reached VMM-DEFERRED's, and a loaded 2-core run reached VMM-CLOSE's (site 50, cuCtxPushCurrent #73 in close)
// xmc-selftest: base cuda
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 300
// Bug (VMM-UNMAPPED-FAULTS, on CUDA): copy hands the driver device pointers without consulting
// the slot table, so a copy into or out of a released slot's range reaches cuMemcpyAsync (the
// fake refuses it CUDA_ERROR_INVALID_VALUE; the H200's driver crashed with SIGSEGV).
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
xmc_status copy(xmc_instance *inst, const xmc_copy_desc *c, xmc_stream *handle) {
    const xmc_status st = reference()->copy(inst, c, handle);
    xmc_error_info e{};
    reference()->last_error(inst, &e);
    // Only the slot table's refusal is bypassed, for the 1-D copies the slot tests make.
    if (st != XMC_ERR_BUSY || !std::strstr(e.message, "no memory mapped now") || c->height != 1 || c->depth != 1)
        return st;
    xmc::cuda::Stream s;
    if (!xmc::cuda::find_stream(inst, handle, &s)) return st;
    xmc::cuda::Driver &d = xmc::cuda::Driver::get();
    xmc::cuda::CtxScope scope(d, s.ctx);
    const auto src = reinterpret_cast<CUdeviceptr>(static_cast<char *>(c->src.ptr) + c->src.x_bytes);
    const auto dst = reinterpret_cast<CUdeviceptr>(static_cast<char *>(c->dst.ptr) + c->dst.x_bytes);
    const CUresult r = d.cuMemcpyAsync(dst, src, c->width_bytes, s.stream);
    return r == CUDA_SUCCESS ? XMC_OK : xmc::cuda::driver_fail(inst, r, "copy", "cuMemcpyAsync");
}
} // namespace

void plant(xmc_backend &t) { t.copy = copy; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_vmm_copy_into_released")
