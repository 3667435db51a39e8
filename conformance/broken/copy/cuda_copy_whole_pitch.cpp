// xmc-selftest: fails COPY-STRIDED
// xmc-selftest: base cuda
// xmc-selftest: filter COPY-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (COPY-STRIDED, on CUDA): a strided copy moves whole rows of the pitch
// instead of the described width: each row is widened to the bytes both
// pitches leave after the row's start, so the padding between rows of the
// destination is overwritten. 1-D copies are unchanged.
#include "cuda_broken.hpp"

#include <algorithm>

namespace xmc::broken_cuda {

static xmc_status copy(xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s) {
    if (!desc || desc->width_bytes == 0 || (desc->height == 1 && desc->depth == 1) || desc->src.pitch < desc->src.x_bytes ||
        desc->dst.pitch < desc->dst.x_bytes)
        return reference()->copy(inst, desc, s);
    xmc_copy_desc wide = *desc;
    wide.width_bytes = std::min(desc->src.pitch - desc->src.x_bytes, desc->dst.pitch - desc->dst.x_bytes);  // the bug
    if (wide.width_bytes < desc->width_bytes) wide.width_bytes = desc->width_bytes;  // let the reference refuse it
    return reference()->copy(inst, &wide, s);
}

void plant(xmc_backend &t) { t.copy = copy; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_copy_whole_pitch")
