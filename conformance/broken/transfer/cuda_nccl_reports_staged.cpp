// xmc-selftest: fails AFF-PATH
// xmc-selftest: base cuda
// xmc-selftest: fake-nccl
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-PATH, on the NCCL path): the path reported for a peer is the one the executor was
// written for first, staged, while the bytes go over NCCL: a caller that reads the report
// (to budget its transport, to account its traffic) is told the transport carried bytes it never
// saw. Here every peer reported as NCCL is reported as staged. (Forcing NCCL then reports another
// path than the forced one, so NCCL is neither taken nor refused, and the bodies of the other
// requirements run on the paths that are taken: only AFF-PATH fails.)
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
namespace {
xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    const xmc_status s = reference()->transfer_execute(inst, a, st);
    if (a && a->struct_size >= sizeof(xmc_transfer_args) && a->peer_paths && a->group && a->group->size > 0)
        for (int p = 0; p < a->group->size; ++p)
            if (a->peer_paths[p] == XMC_PATH_NCCL) a->peer_paths[p] = XMC_PATH_STAGED;
    return s;
}
} // namespace
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_nccl_reports_staged")
