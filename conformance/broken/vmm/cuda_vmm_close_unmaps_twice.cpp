// xmc-selftest: fails VMM-DOUBLE,VMM-BATCH-PARTIAL
// xmc-selftest: may-fail VMM-CLOSE: a sequence that closes a slot right after releasing it has this close unmap the mapping before the release's own unmap, which then fails, so the slot stays for a retry and the instance's close fails; only the sequences that draw it get there
// xmc-selftest: base cuda
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 300
// Bug (VMM-DOUBLE, on CUDA): close unmaps the slot's range whatever its state, so closing a slot
// whose release already unmapped it makes the driver see a second cuMemUnmap of that mapping.
// VMM-BATCH-PARTIAL's sequences close released slots too, and count second unmaps as well.
#include "cuda_broken.hpp"
#include "vmm_track.hpp"

namespace xmc::broken_cuda {
namespace {
xmc_status close_slot(xmc_instance *inst, xmc_slot *s) {
    if (broken_vmm::is_released(s)) {
        const xmc_slot_info info = broken_vmm::info_of(s);
        xmc::cuda::Driver::get().cuMemUnmap(reinterpret_cast<CUdeviceptr>(info.address), info.size);
    }
    return broken_vmm::rec_close(inst, s);
}
} // namespace

void plant(xmc_backend &t) {
    broken_vmm::record_calls(t, reference());
    t.slot_close = close_slot;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_vmm_close_unmaps_twice")
