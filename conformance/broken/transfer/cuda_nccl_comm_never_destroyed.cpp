// xmc-selftest: fails AFF-PATH
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-PATH
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-PATH, on the NCCL path): closing an instance forgets its NCCL communicators instead of
// destroying them; each keeps its connections, threads and device memory until the process
// exits (the fake NCCL's ledger shows them). Here close takes the instance's communicators away
// before the reference's close would destroy them.
#include "cuda_broken.hpp"

#include <vector>

namespace xmc::broken_cuda {
namespace {
std::mutex forgotten_mu;
std::vector<std::shared_ptr<cuda::NcclComms>> forgotten;  // never destroyed

xmc_status close(xmc_instance *inst) {
    if (inst) {
        auto *in = static_cast<cuda::Instance *>(inst);
        std::lock_guard<std::mutex> lock(in->mu), keep(forgotten_mu);
        if (in->nccl) forgotten.push_back(std::move(in->nccl));
    }
    return reference()->close(inst);
}
xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    if (inst) {
        auto *in = static_cast<cuda::Instance *>(inst);
        std::lock_guard<std::mutex> lock(in->mu), keep(forgotten_mu);
        if (in->nccl) forgotten.push_back(std::move(in->nccl));
    }
    return reference()->close_report(inst, out);
}
} // namespace
void plant(xmc_backend &t) {
    t.close = close;
    t.close_report = close_report;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_comm_never_destroyed")
