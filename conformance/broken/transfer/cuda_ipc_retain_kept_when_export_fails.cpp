// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: filter AFF-NO-HANG
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC from slots, on CUDA, on the exporter's error path): to share a source in a slot
// the exporter retains the slot's physical handle and exports it as a file descriptor; when the
// export fails, it forgets to drop the retain, so the slot's memory outlives the slot's own
// release for as long as the process lives. Successful exports are untouched; only a failed
// cuMemExportToShareableHandle on a rank whose source a peer reads shows it (the fault sweep
// between processes, sources in slots: the handle left in the driver's ledger once the slot and
// the run's instance are gone). Here the release that follows a failed export does nothing.
#include "cuda_broken.hpp"


namespace xmc::broken_cuda {
namespace {
using Export = decltype(xmc::cuda::Driver::cuMemExportToShareableHandle);
using Release = decltype(xmc::cuda::Driver::cuMemRelease);
Export real_export = nullptr;
Release real_release = nullptr;
std::mutex mu;
std::set<CUmemGenericAllocationHandle> not_exported;  // retained for an export that failed

CUresult CUDAAPI export_handle(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                               unsigned long long flags) {
    const CUresult r = real_export(out, h, type, flags);
    std::lock_guard<std::mutex> lock(mu);
    if (r != CUDA_SUCCESS) not_exported.insert(h);
    return r;
}
CUresult CUDAAPI release(CUmemGenericAllocationHandle h) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (not_exported.erase(h)) return CUDA_SUCCESS;  // the bug: the retain is kept
    }
    return real_release(h);
}

void swap() {
    xmc::cuda::Driver &d = xmc::cuda::Driver::get();
    real_export = d.cuMemExportToShareableHandle, d.cuMemExportToShareableHandle = export_handle;
    real_release = d.cuMemRelease, d.cuMemRelease = release;
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_after_swap<swap>; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_retain_kept_when_export_fails")
