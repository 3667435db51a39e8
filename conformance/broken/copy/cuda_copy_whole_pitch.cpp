// xmc-selftest: fails COPY-STRIDED
// xmc-selftest: base cuda
// xmc-selftest: filter COPY-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (COPY-STRIDED, on CUDA): a strided copy moves whole rows of the pitch
// instead of the described width: each row is widened to the bytes both
// pitches leave after the row's start, so the padding between rows of the
// destination is overwritten. 1-D copies are unchanged. The bug is the copy
// step of the CUDA StreamOps: the descriptor was checked as the caller gave it.
#include "cuda_broken.hpp"
#include "stream_steps.hpp"

#include <algorithm>

namespace xmc::broken_cuda {

static xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &desc, xmc_stream *s) {
    xmc_copy_desc wide = desc;
    if (desc.height != 1 || desc.depth != 1)  // the bug
        wide.width_bytes = std::max(desc.width_bytes, std::min(desc.src.pitch - desc.src.x_bytes,
                                                               desc.dst.pitch - desc.dst.x_bytes));
    return broken_steps::real<be::StreamOps>().enqueue_copy(inst, wide, s);
}

void plant(xmc_backend &) { broken_steps::steps(xmc::cuda::stream_ops()).enqueue_copy = enqueue_copy; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_copy_whole_pitch")
