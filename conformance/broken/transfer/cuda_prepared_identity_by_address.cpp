// xmc-selftest: fails AFF-PREPARED-STALE
// xmc-selftest: base cuda
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug (prepared transfers, on CUDA): device memory the backend never allocated (a framework's
// caching allocator's) is known by its address: a buffer freed and allocated again at the same
// address looks like the one prepared, so the next run writes into whatever now lives there. The
// driver's buffer ID is new for every allocation, also at a reused address (recorded on the
// H200). Here the driver's answer to CU_POINTER_ATTRIBUTE_BUFFER_ID is the address itself.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
PointerAttribute real_attribute = nullptr;

CUresult CUDAAPI attribute(void *data, CUpointer_attribute what, CUdeviceptr ptr) {
    const CUresult r = real_attribute(data, what, ptr);
    if (what == CU_POINTER_ATTRIBUTE_BUFFER_ID && r == CUDA_SUCCESS)
        *static_cast<unsigned long long *>(data) = ptr;  // the bug: the address as the identity
    return r;
}

xmc_status transfer_prepare(xmc_instance *inst, const xmc_transfer_args *a, xmc_prepared **p) {
    interpose_pointer_attribute(attribute, &real_attribute);
    return reference()->transfer_prepare(inst, a, p);
}
} // namespace

void plant(xmc_backend &t) { t.transfer_prepare = transfer_prepare; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_prepared_identity_by_address")
