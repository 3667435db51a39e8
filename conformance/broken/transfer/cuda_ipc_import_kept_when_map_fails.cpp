// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: filter AFF-NO-HANG
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC from slots, on CUDA, on an error path): a reader that imported a peer's physical
// memory by its file descriptor and then could not map it forgets the imported handle: the
// release of that handle is skipped, so each failed map keeps a peer's memory alive in this
// process until it exits. Transfers that succeed are untouched; only a failed cuMemMap of an
// imported handle on a reader shows it (the fault sweep between processes, sources in slots:
// the driver's ledger after the run's instance is closed). Here cuMemRelease answers success
// and does nothing for an imported handle whose map failed.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
decltype(xmc::cuda::Driver::cuMemMap) real_map = nullptr;
decltype(xmc::cuda::Driver::cuMemRelease) real_release = nullptr;
std::mutex mu;
std::set<CUmemGenericAllocationHandle> unmapped;  // imported handles whose map failed

CUresult CUDAAPI map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f) {
    const CUresult r = real_map(p, size, offset, h, f);
    std::lock_guard<std::mutex> lock(mu);
    if (r != CUDA_SUCCESS && imports::has(h)) unmapped.insert(h);
    return r;
}
CUresult CUDAAPI release(CUmemGenericAllocationHandle h) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (unmapped.erase(h)) return CUDA_SUCCESS;  // the bug: forgotten on the error path
    }
    return real_release(h);
}
void swap() {
    imports::track();
    xmc::cuda::Driver &d = xmc::cuda::Driver::get();
    real_map = d.cuMemMap, d.cuMemMap = map;
    real_release = d.cuMemRelease, d.cuMemRelease = release;
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_after_swap<swap>; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_import_kept_when_map_fails")
