// The reference executor (AFF-EXEC-EXACT) and the coverage count (AFF-PLAN-EXACT): plain loops over
// every element of every segment. With extract_shard (map.cpp) they are the oracle the planner
// (reference/affine) is checked against; they use only the Plan's types, never the planner.
#include "detail.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace xmc::affine {

using namespace detail;

namespace {

// Refusal unless every element of the box (offset, strides, extents) lies in [0, elements).
std::optional<Refusal> check_box(int64_t offset, const std::vector<int64_t>& strides, const std::vector<int64_t>& ext,
                                 std::size_t elements,
                                 const std::string& what) {
    if (strides.size() != ext.size()) return refuse(Reason::SegmentOutOfBounds, what + ": strides/extents differ in length");
    if (std::any_of(ext.begin(), ext.end(), [](int64_t e) { return e < 0; }))
        return refuse(Reason::SegmentOutOfBounds, what + ": negative extent");
    if (is_empty(ext)) return std::nullopt;
    int64_t lo = offset, hi = offset;  // smallest and largest element offset the box touches
    for (std::size_t d = 0; d < ext.size(); ++d) {
        int64_t reach = 0;  // how far the last index along d moves from the first
        bool overflow = __builtin_mul_overflow(ext[d] - 1, strides[d], &reach);
        overflow = overflow || (reach < 0 ? __builtin_add_overflow(lo, reach, &lo) : __builtin_add_overflow(hi, reach, &hi));
        if (overflow) return refuse(Reason::SegmentOutOfBounds, what + ": offsets overflow");
    }
    if (lo < 0 || hi >= int64_t(elements))
        return refuse(Reason::SegmentOutOfBounds, what + ": reaches outside its " + std::to_string(elements) +
                                                      "-element shard");
    return std::nullopt;
}

template <class F>
void for_each_pair(const Segment& s, F&& f) {  // f(source element offset, target element offset)
    for_each_index(s.extents, [&](const Index& i) {
        int64_t a = s.src_offset, b = s.tgt_offset;
        for (std::size_t d = 0; d < i.size(); ++d) a += i[d] * s.src_strides[d], b += i[d] * s.tgt_strides[d];
        f(a, b);
    });
}

}  // namespace

std::optional<Refusal> execute_reference(const Plan& plan, const Shards& src, Shards& tgt, std::size_t elem_size) {
    // AFF-EXEC-EXACT: the reference each executor must equal, bit for bit.
    if (elem_size == 0) return refuse(Reason::BadElementSize, "element size 0");
    // AFF-REFUSE-BEFORE-WRITE: the reference, too, refuses before any write.
    // Check everything before the first write.
    for (std::size_t i = 0; i < plan.segments.size(); ++i) {
        const Segment& s = plan.segments[i];
        const std::string w = "segment " + std::to_string(i);
        auto a = src.find(s.src_rank);
        auto b = tgt.find(s.tgt_rank);
        if (a == src.end()) return refuse(Reason::UnknownRank, w + ": no source buffer for rank " + std::to_string(s.src_rank));
        if (b == tgt.end()) return refuse(Reason::UnknownRank, w + ": no target buffer for rank " + std::to_string(s.tgt_rank));
        if (a->second.size() % elem_size || b->second.size() % elem_size)
            return refuse(Reason::BufferMismatch, w + ": buffer size is not a multiple of the element size");
        if (auto r = check_box(s.src_offset, s.src_strides, s.extents, a->second.size() / elem_size, w + " source"))
            return r;
        if (auto r = check_box(s.tgt_offset, s.tgt_strides, s.extents, b->second.size() / elem_size, w + " target"))
            return r;
    }
    for (const Segment& s : plan.segments) {
        const Bytes& from = src.at(s.src_rank);
        Bytes& to = tgt.at(s.tgt_rank);
        for_each_pair(s, [&](int64_t a, int64_t b) {
            std::memcpy(&to[std::size_t(b) * elem_size], &from[std::size_t(a) * elem_size], elem_size);
        });
    }
    return std::nullopt;
}

// AFF-PLAN-EXACT: each target element must be written exactly once.
Result<std::map<int, std::vector<uint32_t>>> coverage_count(const Plan& plan, const Map& target) {
    std::map<int, std::vector<uint32_t>> counts;
    for (const RankLayout& r : target.ranks) counts[r.rank].assign(std::size_t(numel(r.shard_shape)), 0);
    for (std::size_t i = 0; i < plan.segments.size(); ++i) {
        const Segment& s = plan.segments[i];
        auto it = counts.find(s.tgt_rank);
        if (it == counts.end())
            return refuse(Reason::UnknownRank, "segment " + std::to_string(i) + " writes undeclared rank " +
                                                   std::to_string(s.tgt_rank));
        if (auto r = check_box(s.tgt_offset, s.tgt_strides, s.extents, it->second.size(), "segment " + std::to_string(i)))
            return *r;
        for_each_pair(s, [&](int64_t, int64_t b) { ++it->second[std::size_t(b)]; });
    }
    return counts;
}

}  // namespace xmc::affine
