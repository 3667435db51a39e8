// The planner (AFF-PLAN-EXACT/REFUSE/DETERMINISTIC, AFF-REPLICA, AFF-SCALAR) and plan digests.
// A tuned product under test, not an oracle (SPEC 2, "One seam"): tests and fuzz/fuzz_affine_json
// check its plans with the model's extracting oracle (extract_shard, execute_reference and
// coverage_count in reference/model/affine).
//
// How a plan is made:
//  1. Source cells (model/affine/cells.cpp; validate_map computes them anyway): the logical tensor
//     cut into disjoint boxes, each held whole by a known set of source ranks (replicas with
//     identical boxes share one cell).
//  2. One sort-and-sweep (for a few pieces: a comparison of every pair) finds, for every non-empty
//     target piece T, the cells that meet it.
//  3. Each T is checked to be covered (the cells are disjoint, so their parts inside T must add up
//     to T's volume); otherwise TargetNotHeld.
//  4. Each part T ∩ cell is read from its only holder, else from the lowest holder, or from the
//     selector's answer, which must be one of the holders (InvalidReplicaChoice otherwise).
//  5. Segments that are adjacent along one axis in both the source and the target shard are merged,
//     and the list is sorted.
// A piece of a flat shard (AFF-MAP-FLAT) is one run of it: its parts are placed in the frame of the
// piece (a row-major array of its extents, from its shard_offset on), so steps 2-5 are those of
// boxes; only segments in one frame merge.
// Pieces are sorted first, so the plan does not depend on the order of pieces or ranks in the input.
// The model's boxes, cells and validate_map, which the planner builds on.
#include "model/affine/detail.hpp"

#include <algorithm>
#include <functional>
#include <tuple>

namespace xmc::affine {

using namespace detail;

namespace {

// A segment before it is turned into offsets: corners in the source and target shards, and the
// common extents. (Where the box sits in the logical tensor no longer matters once it is placed.)
// Each corner is in the frame of its piece (detail::Frame: a rank's shard, or a run of a flat one).
struct Raw {
    int src_rank, tgt_rank;
    Index sc, tc, ext;
    Frame src_frame;
    Frame tgt_frame;
};

// Merges pairs of segments that are adjacent along one axis in both the source and the target
// shard, axis by axis, until nothing merges. For axis k, segments are sorted so that those which
// may merge (same ranks, same shift between source and target along k, same everything on the
// other axes) are neighbours in order of their position along k.
void coalesce(std::vector<Raw>& segs) {
    if (segs.empty()) return;
    // Only segments between the same two ranks ever merge. A few segments that all join different
    // pairs of ranks (e.g. one tensor's shards, each part read from another rank) stay as they are
    // (their order does not matter: plan() sorts the segments).
    if (segs.size() <= 32) {
        bool shared = false;  // two segments join the same source and target rank
        for (std::size_t i = 0; i < segs.size() && !shared; ++i)
            for (std::size_t j = 0; j < i && !shared; ++j)
                shared = segs[i].src_rank == segs[j].src_rank && segs[i].tgt_rank == segs[j].tgt_rank;
        if (!shared) return;
    }
    const std::size_t n = segs[0].ext.size();
    for (bool merged = true; merged;) {
        merged = false;
        for (std::size_t k = 0; k < n; ++k) {
            // <0, 0, >0 like a comparison of the keys, the position along k left out.
            auto group = [k, n](const Raw& a, const Raw& b) -> int64_t {
                if (a.src_rank != b.src_rank) return a.src_rank < b.src_rank ? -1 : 1;
                if (a.tgt_rank != b.tgt_rank) return a.tgt_rank < b.tgt_rank ? -1 : 1;
                // AFF-MAP-FLAT: corners in different frames (runs of a flat shard) never merge.
                // (A frame's shape points into the map and names it; std::less orders any pointers.)
                const std::less<const std::vector<int64_t>*> before;
                if (a.src_frame.shape != b.src_frame.shape) return before(a.src_frame.shape, b.src_frame.shape) ? -1 : 1;
                if (a.tgt_frame.shape != b.tgt_frame.shape) return before(a.tgt_frame.shape, b.tgt_frame.shape) ? -1 : 1;
                const int64_t sa = a.tc[k] - a.sc[k], sb = b.tc[k] - b.sc[k];
                if (sa != sb) return sa < sb ? -1 : 1;
                for (std::size_t d = 0; d < n; ++d) {
                    if (d == k) continue;
                    if (a.sc[d] != b.sc[d]) return a.sc[d] < b.sc[d] ? -1 : 1;
                    if (a.tc[d] != b.tc[d]) return a.tc[d] < b.tc[d] ? -1 : 1;
                    if (a.ext[d] != b.ext[d]) return a.ext[d] < b.ext[d] ? -1 : 1;
                }
                return 0;
            };
            auto less = [&](const Raw& a, const Raw& b) {
                const int64_t g = group(a, b);
                return g != 0 ? g < 0 : a.sc[k] < b.sc[k];
            };
            if (!std::is_sorted(segs.begin(), segs.end(), less)) std::sort(segs.begin(), segs.end(), less);
            std::size_t out = 0;
            for (std::size_t i = 0; i < segs.size(); ++i) {
                if (out > 0) {
                    Raw& last = segs[out - 1];
                    if (group(last, segs[i]) == 0 && last.sc[k] + last.ext[k] == segs[i].sc[k]) {
                        last.ext[k] += segs[i].ext[k];
                        merged = true;
                        continue;
                    }
                }
                if (out != i) segs[out] = segs[i];
                ++out;
            }
            segs.resize(out);
        }
    }
}

std::size_t piece_count(const Map& m) {
    std::size_t c = 0;
    for (const RankLayout& r : m.ranks) c += r.pieces.size();
    return c;
}

// FNV-1a, 64 bit, taking a 64-bit word per step (a byte per step made the digest a tenth of the
// planner's time), with a shift that folds high bits down: the same digest on every platform.
struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    void word(uint64_t x) {
        h = (h ^ x) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    void vec(const std::vector<int64_t>& v) {
        word(v.size());
        for (int64_t x : v) word(uint64_t(x));
    }
};

// Steps 1-4 (after the budgets): both maps validated, then every part of every target piece with the
// source piece to read it from. The pieces, cells and meetings are freed on return, before the
// plan's own vectors are made.
std::optional<Refusal> parts_to_copy(const Map& source, const Map& target, const ReplicaSelector& selector,
                                     std::vector<Raw>* raw) {
    std::vector<Placed> src, tgt;
    std::vector<Cell> cells;
    if (auto r = validate_map(source, &src, &cells)) return refuse(r->reason, "source map: " + r->message);
    if (auto r = validate_map(target, &tgt, nullptr)) return refuse(r->reason, "target map: " + r->message);
    // AFF-PLAN-REFUSE: different logical shapes, then a scale other than 1.
    if (source.shape != target.shape)
        return refuse(Reason::ShapeMismatch, "source shape " + to_string(source.shape) + " != target shape " +
                                                 to_string(target.shape));
    for (const Map* m : {&source, &target})
        for (const RankLayout& r : m->ranks)
            for (const Piece& p : r.pieces)
                if (p.scale != 1.0)
                    return refuse(Reason::ScaleNotOne, std::string(m == &source ? "source" : "target") + " rank " +
                                                           std::to_string(r.rank) + " has a piece with scale " +
                                                           std::to_string(p.scale));

    std::vector<const Box*> cell_boxes, tgt_boxes;
    cell_boxes.reserve(cells.size());
    tgt_boxes.reserve(tgt.size());
    for (const Cell& c : cells) cell_boxes.push_back(&c.box);
    for (const Placed& p : tgt) tgt_boxes.push_back(&p.logical);
    // (target piece, cell meeting it), sorted by target piece: each piece's cells are one run.
    std::vector<std::pair<std::size_t, std::size_t>> meets = overlapping_pairs(tgt_boxes, &cell_boxes);
    if (!std::is_sorted(meets.begin(), meets.end())) std::sort(meets.begin(), meets.end());

    raw->reserve(meets.size());  // one segment per meeting, before merging
    std::vector<std::pair<Box, std::size_t>> parts;  // T ∩ cell, and the cell (reused for every T)
    std::size_t next = 0;  // first entry of `meets` not yet used
    for (std::size_t t = 0; t < tgt.size(); ++t) {
        const Placed& T = tgt[t];
        parts.clear();
        int64_t covered = 0;
        for (; next < meets.size() && meets[next].first == t; ++next) {
            const std::size_t c = meets[next].second;
            Box in;
            intersect(T.logical, cells[c].box, &in);
            covered += numel(in.ext);
            parts.emplace_back(std::move(in), c);
        }
        // AFF-PLAN-EXACT: the cells are disjoint: each target element is read once.
        // AFF-PLAN-REFUSE: an element no source holds: refused, never a partial plan.
        if (covered != numel(T.logical.ext))
            return refuse(Reason::TargetNotHeld, "no source rank holds part of target rank " + std::to_string(T.rank) +
                                                     "'s logical box at " + to_string(T.logical.lo) + " extents " +
                                                     to_string(T.logical.ext));
        // AFF-PLAN-DETERMINISTIC: parts sorted by corner, whatever the input order.
        // Parts in logical order, so that a selector is asked in a fixed order.
        auto by_corner = [](const auto& a, const auto& b) { return a.first.lo < b.first.lo; };
        if (!std::is_sorted(parts.begin(), parts.end(), by_corner)) std::sort(parts.begin(), parts.end(), by_corner);
        for (const auto& [box, c] : parts) {
            const auto& holders = cells[c].holders;
            // AFF-REPLICA: the lowest holder, or the selector's pick (asked only when several ranks
            // hold the part), which must be a holder.
            std::size_t pick = 0;  // the only holder, or by default the lowest (holders ascend by rank)
            if (holders.size() > 1 && selector) {
                std::vector<int> candidates;
                for (const auto& h : holders) candidates.push_back(h.first);
                const int answer = selector(candidates, ReplicaQuery{T.rank, box.lo, box.ext});
                auto it = std::find(candidates.begin(), candidates.end(), answer);
                if (it == candidates.end())
                    return refuse(Reason::InvalidReplicaChoice, "selector answered rank " + std::to_string(answer) +
                                                                    ", not a holder of logical box at " +
                                                                    to_string(box.lo));
                pick = std::size_t(it - candidates.begin());
            }
            const Placed& S = src[holders[pick].second];
            Raw seg{S.rank, T.rank, box.lo, box.lo, box.ext, S.frame, T.frame};
            for (std::size_t d = 0; d < box.lo.size(); ++d) {  // the part's corner, moved into each shard
                seg.sc[d] = S.shard_corner[d] + (box.lo[d] - S.logical.lo[d]);
                seg.tc[d] = T.shard_corner[d] + (box.lo[d] - T.logical.lo[d]);
            }
            raw->push_back(std::move(seg));
        }
    }
    return std::nullopt;
}

}  // namespace

Result<Plan> plan(const Map& source, const Map& target, const Budgets& budgets, const ReplicaSelector& selector) {
    // AFF-PLAN-REFUSE: dims and pieces over budget, each its own reason.
    // Budgets first: they bound the work everything below does.
    for (const Map* m : {&source, &target}) {
        const char* side = m == &source ? "source" : "target";
        if (m->shape.size() > budgets.max_dims)
            return refuse(Reason::DimsOverBudget, std::string(side) + " has " + std::to_string(m->shape.size()) +
                                                      " dims, budget " + std::to_string(budgets.max_dims));
        if (piece_count(*m) > budgets.max_pieces)
            return refuse(Reason::PiecesOverBudget, std::string(side) + " has " + std::to_string(piece_count(*m)) +
                                                        " pieces, budget " + std::to_string(budgets.max_pieces));
    }
    std::vector<Raw> raw;
    if (auto r = parts_to_copy(source, target, selector, &raw)) return *r;
    coalesce(raw);
    // AFF-PLAN-REFUSE: segments over budget, after merging.
    if (raw.size() > budgets.max_segments)
        return refuse(Reason::SegmentsOverBudget, "plan needs " + std::to_string(raw.size()) +
                                                      " segments, budget " + std::to_string(budgets.max_segments));

    // AFF-PLAN-DETERMINISTIC: canonical order: equal inputs, equal plans and digests.
    // The segments' offsets, put in canonical order (tgt_rank, tgt_offset, src_rank, src_offset,
    // extents) before the segments themselves, with their vectors, are made.
    struct Placement {
        int tgt_rank;
        int64_t tgt_offset;
        int src_rank;
        int64_t src_offset;
        const Raw* raw;
    };
    std::vector<Placement> order;
    order.reserve(raw.size());
    for (const Raw& r : raw)
        order.push_back({r.tgt_rank, r.tgt_frame.base + ravel(r.tc, *r.tgt_frame.shape), r.src_rank,
                         r.src_frame.base + ravel(r.sc, *r.src_frame.shape), &r});
    std::sort(order.begin(), order.end(), [](const Placement& a, const Placement& b) {
        return std::tie(a.tgt_rank, a.tgt_offset, a.src_rank, a.src_offset, a.raw->ext) <
               std::tie(b.tgt_rank, b.tgt_offset, b.src_rank, b.src_offset, b.raw->ext);
    });
    Plan p;
    p.shape = source.shape;
    p.segments.reserve(order.size());
    for (const Placement& o : order)
        p.segments.push_back(Segment{o.src_rank, o.src_offset, row_major_strides(*o.raw->src_frame.shape), o.tgt_rank,
                                     o.tgt_offset, row_major_strides(*o.raw->tgt_frame.shape), o.raw->ext});
    p.digest = plan_digest(p.shape, p.segments);
    return p;
}

uint64_t plan_digest(const std::vector<int64_t>& shape, const std::vector<Segment>& segments) {
    Fnv f;
    f.word(0x786d632d61666631ull);  // "xmc-aff1": format tag
    f.vec(shape);
    f.word(segments.size());
    for (const Segment& s : segments) {
        f.word(uint64_t(int64_t(s.src_rank)));
        f.word(uint64_t(s.src_offset));
        f.vec(s.src_strides);
        f.word(uint64_t(int64_t(s.tgt_rank)));
        f.word(uint64_t(s.tgt_offset));
        f.vec(s.tgt_strides);
        f.vec(s.extents);
    }
    return f.h;
}

// AFF-AGREE: the digest of what ranks must agree on. The executors vote with transfer_digest
// (reference/common/transfer_protocol.cpp), which adds the group.
uint64_t agreement_digest(const Plan& plan, std::size_t elem_size, uint64_t budget) {
    Fnv f;
    f.word(0x786d632d61677231ull);  // "xmc-agr1"
    f.word(plan_digest(plan.shape, plan.segments));  // recomputed: a stale plan.digest cannot hide a change
    f.word(elem_size);
    f.word(budget);
    return f.h;
}

}  // namespace xmc::affine
