// The NCCL path where the build found no nccl.h (reference/cuda/CMakeLists.txt): never offered.
#include "cuda.hpp"

namespace xmc::cuda {

std::string nccl_unavailable() { return "the backend was built without nccl.h, so it has no NCCL path"; }
bool nccl_anywhere(const transfer::Work &) { return false; }
xmc_status nccl_join(xmc_instance *inst, const xmc_transfer_args &, int32_t, NcclLink *) {
    return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "transfer_execute", "transfer_execute: %s", nccl_unavailable().c_str());
}
xmc_status nccl_move(xmc_instance *inst, const xmc_transfer_args &, transfer::Work &, xmc_transfer_stats &,
                     transfer::Stager &, const NcclLink &, CUstream) {
    return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "transfer_execute", "transfer_execute: %s", nccl_unavailable().c_str());
}
void nccl_close(Instance *) {}

} // namespace xmc::cuda
