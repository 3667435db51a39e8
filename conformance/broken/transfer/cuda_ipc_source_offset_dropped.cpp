// xmc-selftest: fails AFF-EXEC-EXACT
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// xmc-selftest: env RC_PARAMS=max_success=10
// Bug (path IPC, on CUDA): the exporter tells its readers that its source starts where the shared
// allocation does. cuIpcGetMemHandle names a whole allocation (an interior pointer gives the
// allocation's handle: recorded on the H200), and the reader's cuIpcOpenMemHandle gives that
// allocation's base, so a source inside a larger allocation (a tensor in a caching allocator's
// block) is read from the block's first bytes. Here the driver's answer for the start of the
// source's range is the source pointer itself.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
PointerAttribute real_attribute = nullptr;

CUresult CUDAAPI attribute(void *data, CUpointer_attribute what, CUdeviceptr ptr) {
    if (what != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && what != CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR)
        return real_attribute(data, what, ptr);
    CUdeviceptr start = 0;
    const CUresult r = real_attribute(&start, what, ptr);
    if (r == CUDA_SUCCESS) *static_cast<CUdeviceptr *>(data) = ptr;  // the bug: no offset
    return r;
}

xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    interpose_pointer_attribute(attribute, &real_attribute);
    return reference()->transfer_execute(inst, a, st);
}
} // namespace

void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_source_offset_dropped")
