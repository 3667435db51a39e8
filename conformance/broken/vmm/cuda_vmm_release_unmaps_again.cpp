// xmc-selftest: fails VMM-DOUBLE,VMM-STATE,VMM-ERROR-CLEAR
// xmc-selftest: base cuda
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 300
// Bug (VMM-DOUBLE, on CUDA): a release of a slot that is already released is refused, but only
// after the slot's range was unmapped again: the driver sees a second cuMemUnmap of one mapping
// (which the real driver answers CUDA_SUCCESS, so nothing else shows it).
#include "cuda_broken.hpp"
#include "vmm_track.hpp"

namespace xmc::broken_cuda {
namespace {
void unmap_again(xmc_slot *const *s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (!broken_vmm::is_released(s[i])) continue;
        const xmc_slot_info info = broken_vmm::info_of(s[i]);
        xmc::cuda::Driver::get().cuMemUnmap(reinterpret_cast<CUdeviceptr>(info.address), info.size);
    }
}
xmc_status release(xmc_instance *inst, xmc_slot *s, xmc_stream *on, xmc_request **out) {
    const xmc_status st = broken_vmm::rec_release(inst, s, on, out);
    if (st == XMC_ERR_BUSY) unmap_again(&s, 1);
    return st;
}
xmc_status release_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on, xmc_request **out) {
    const xmc_status st = broken_vmm::rec_release_batch(inst, s, n, on, out);
    if (st == XMC_ERR_BUSY) unmap_again(s, n);
    return st;
}
} // namespace

void plant(xmc_backend &t) {
    broken_vmm::record_calls(t, reference());
    t.slot_release = release;
    t.slot_release_batch = release_batch;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_vmm_release_unmaps_again")
