// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: filter AFF-NO-HANG
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC from slots, on CUDA, on an error path): when the driver refuses to free the
// address range a peer's source was mapped at, the reader drops the range as if it were freed:
// no later close frees it, and each refusal leaks a reservation of the peer's mapping size in
// this process (the bug the fault sweep between processes found in the reference, which now
// frees it again at the next close). Here, after a refused cuMemAddressFree of a range an
// imported handle was mapped at, every later free of that range answers success and does nothing.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
decltype(xmc::cuda::Driver::cuMemMap) real_map = nullptr;
decltype(xmc::cuda::Driver::cuMemAddressFree) real_free = nullptr;
std::mutex mu;
std::set<CUdeviceptr> peer_ranges, dropped;  // ranges an imported handle was mapped at; refused once

CUresult CUDAAPI map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f) {
    if (imports::has(h)) {
        std::lock_guard<std::mutex> lock(mu);
        peer_ranges.insert(p);
    }
    return real_map(p, size, offset, h, f);
}
CUresult CUDAAPI address_free(CUdeviceptr p, size_t size) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (dropped.count(p)) return CUDA_SUCCESS;  // the bug: the retry does nothing
    }
    const CUresult r = real_free(p, size);
    std::lock_guard<std::mutex> lock(mu);
    if (r != CUDA_SUCCESS && peer_ranges.count(p)) dropped.insert(p);
    if (r == CUDA_SUCCESS) peer_ranges.erase(p);
    return r;
}
void swap() {
    imports::track();
    xmc::cuda::Driver &d = xmc::cuda::Driver::get();
    real_map = d.cuMemMap, d.cuMemMap = map;
    real_free = d.cuMemAddressFree, d.cuMemAddressFree = address_free;
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_after_swap<swap>; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_range_dropped_when_free_refused")
