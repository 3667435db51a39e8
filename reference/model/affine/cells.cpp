// Source cells: the logical tensor cut into disjoint boxes, each with the exact set of ranks holding
// it (used by validate() to check `locations`, and by the planner to pick replicas).
#include "detail.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace xmc::affine::detail {

namespace {

bool canonical_less(const Placed& a, const Placed& b) {
    return std::tie(a.rank, a.logical.lo, a.logical.ext, a.shard_corner, a.frame.base) <
           std::tie(b.rank, b.logical.lo, b.logical.ext, b.shard_corner, b.frame.base);
}

}  // namespace

// AFF-PLAN-DETERMINISTIC: one order, whatever the input's order of ranks and pieces.
void sort_placed(std::vector<Placed>& placed) {
    if (!std::is_sorted(placed.begin(), placed.end(), canonical_less))
        std::sort(placed.begin(), placed.end(), canonical_less);
}

namespace {

// r minus the box i inside it, as at most 2 * ndim disjoint boxes.
std::vector<Box> subtract(const Box& r, const Box& i) {
    std::vector<Box> out;
    Box rest = r;
    for (std::size_t d = 0; d < r.lo.size(); ++d) {
        const int64_t rest_hi = rest.lo[d] + rest.ext[d], i_hi = i.lo[d] + i.ext[d];
        if (rest.lo[d] < i.lo[d]) {
            Box below = rest;
            below.ext[d] = i.lo[d] - rest.lo[d];
            out.push_back(std::move(below));
        }
        if (i_hi < rest_hi) {
            Box above = rest;
            above.lo[d] = i_hi;
            above.ext[d] = rest_hi - i_hi;
            out.push_back(std::move(above));
        }
        rest.lo[d] = i.lo[d];
        rest.ext[d] = i.ext[d];
    }
    return out;
}

// Holders of both lists, ascending by rank; for a rank in both, a's piece is kept.
std::vector<std::pair<int, std::size_t>> merge_holders(std::vector<std::pair<int, std::size_t>> a,
                                                       const std::vector<std::pair<int, std::size_t>>& b) {
    a.insert(a.end(), b.begin(), b.end());
    std::stable_sort(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    a.erase(std::unique(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.first == y.first; }), a.end());
    return a;
}

// Cells that overlap, cut into disjoint cells: each new cell is split against every part made so
// far (shared parts get both holder lists) and its leftover becomes parts of its own. Quadratic in
// the group's size, but only replicas cut differently on different ranks ever get here.
std::vector<Cell> refine(const std::vector<Cell>& group) {
    std::vector<Cell> done;
    for (const Cell& c : group) {
        std::vector<Cell> next;
        std::vector<Box> rest{c.box};  // the part of c no earlier part covers
        for (Cell& d : done) {
            Box in;
            if (!intersect(d.box, c.box, &in)) {
                next.push_back(std::move(d));
                continue;
            }
            for (Box& out : subtract(d.box, in)) next.push_back({std::move(out), d.holders});
            next.push_back({in, merge_holders(d.holders, c.holders)});
            std::vector<Box> still;
            for (const Box& r : rest) {
                Box cut;
                if (!intersect(r, in, &cut)) still.push_back(r);
                else for (Box& out : subtract(r, cut)) still.push_back(std::move(out));
            }
            rest = std::move(still);
        }
        for (Box& r : rest) next.push_back({std::move(r), c.holders});
        done = std::move(next);
    }
    return done;
}

}  // namespace

std::vector<Cell> source_cells(const std::vector<Placed>& src,
                               const std::vector<std::pair<std::size_t, std::size_t>>& overlaps) {
    // Replicas with identical boxes: one cell, holders ascending by rank.
    std::vector<std::size_t> order(src.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // By box, then by index: the order a stable sort by box gives (without its temporary buffer).
    auto by_box = [&](std::size_t a, std::size_t b) {
        return std::tie(src[a].logical.lo, src[a].logical.ext, a) < std::tie(src[b].logical.lo, src[b].logical.ext, b);
    };
    if (!std::is_sorted(order.begin(), order.end(), by_box)) std::sort(order.begin(), order.end(), by_box);
    auto same_box = [&](std::size_t a, std::size_t b) {
        return src[a].logical.lo == src[b].logical.lo && src[a].logical.ext == src[b].logical.ext;
    };
    std::vector<Cell> cells;
    cells.reserve(src.size());
    std::vector<std::size_t> cell_of(src.size());  // the cell of each piece
    for (std::size_t k = 0; k < order.size();) {
        // order[k, end): the pieces with one box (replicas), which become one cell.
        std::size_t end = k + 1;
        while (end < order.size() && same_box(order[end], order[k])) ++end;
        Cell c{src[order[k]].logical, {}};
        c.holders.reserve(end - k);
        for (; k < end; ++k) {
            const std::size_t i = order[k];
            // AFF-REPLICA: holders ascend by rank: a cell's lowest holder is its first.
            if (c.holders.empty() || c.holders.back().first != src[i].rank)  // a rank holds a box once
                c.holders.emplace_back(src[i].rank, i);  // ranks ascend: `src` is sorted by rank
            cell_of[i] = cells.size();
        }
        cells.push_back(std::move(c));
    }
    // Groups of cells that still overlap (connected through overlapping pairs) are refined. Two
    // cells overlap exactly when pieces of theirs do (a cell's box is its pieces' box); pairs
    // within one cell are replicas of one box.
    if (std::all_of(overlaps.begin(), overlaps.end(), [&](const auto& o) { return cell_of[o.first] == cell_of[o.second]; }))
        return cells;
    std::vector<std::size_t> group(cells.size());
    for (std::size_t i = 0; i < group.size(); ++i) group[i] = i;
    auto root = [&](std::size_t x) {
        while (group[x] != x) x = group[x] = group[group[x]];
        return x;
    };
    for (auto [i, j] : overlaps) {
        std::size_t ra = root(cell_of[i]), rb = root(cell_of[j]);
        group[std::max(ra, rb)] = std::min(ra, rb);
    }
    std::map<std::size_t, std::vector<Cell>> groups;  // by lowest member, members in cell order
    for (std::size_t i = 0; i < cells.size(); ++i) groups[root(i)].push_back(cells[i]);
    std::vector<Cell> out;
    for (auto& [first, members] : groups)
        for (Cell& c : members.size() == 1 ? members : refine(members)) out.push_back(std::move(c));
    return out;
}

}  // namespace xmc::affine::detail
