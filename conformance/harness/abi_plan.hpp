// A plan of the affine planner (reference/affine) in the ABI's terms: the
// segments transfer_execute takes (include/xmc/backend.h).
#pragma once
#include <xmc/affine.hpp>
#include <xmc/backend.h>

#include <cstddef>
#include <vector>

namespace xmc::conformance {

inline std::vector<xmc_segment> abi_segments(const xmc::affine::Plan &p) {
    std::vector<xmc_segment> out;
    out.reserve(p.segments.size());
    for (const xmc::affine::Segment &s : p.segments) {
        xmc_segment a{};
        a.src_rank = s.src_rank;
        a.tgt_rank = s.tgt_rank;
        a.ndim = int32_t(s.extents.size());
        a.src_offset = s.src_offset;
        a.tgt_offset = s.tgt_offset;
        for (std::size_t d = 0; d < s.extents.size(); ++d) {
            a.extents[d] = s.extents[d];
            a.src_strides[d] = s.src_strides[d];
            a.tgt_strides[d] = s.tgt_strides[d];
        }
        out.push_back(a);
    }
    return out;
}

} // namespace xmc::conformance
