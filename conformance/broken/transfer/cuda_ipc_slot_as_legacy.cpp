// xmc-selftest: fails AFF-PATH,AFF-PREPARED-FOLLOW
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC, on CUDA): the exporter takes every device source for cuMemAlloc memory and
// shares it by its legacy handle, never asking the driver whether the pointer is legacy-IPC
// capable. A source in a slot (VMM memory, as a caching allocator's expandable segments are) has
// no legacy handle: cuIpcGetMemHandle refuses it (CUDA_ERROR_INVALID_VALUE, recorded on the H200)
// and the transfer fails, where the descriptor of its physical memory would have shared it. Here
// the driver's answer to IS_LEGACY_CUDA_IPC_CAPABLE is always yes. (AFF-PREPARED-FOLLOW prepares over
// a source in a slot: the same refusal.)
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
PointerAttribute real_attribute = nullptr;

CUresult CUDAAPI attribute(void *data, CUpointer_attribute what, CUdeviceptr ptr) {
    if (what != CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE) return real_attribute(data, what, ptr);
    const CUresult r = real_attribute(data, what, ptr);
    if (r == CUDA_SUCCESS) *static_cast<int *>(data) = 1;  // the bug: every pointer is cuMemAlloc's
    return r;
}

xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    interpose_pointer_attribute(attribute, &real_attribute);
    return reference()->transfer_execute(inst, a, st);
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_slot_as_legacy")
