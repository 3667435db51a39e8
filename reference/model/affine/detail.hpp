// Helpers shared by the affine model's .cpp files (not public API).
#pragma once

#include <xmc/affine.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xmc::affine::detail {

using Index = std::vector<int64_t>;

// An n-D box: corner `lo` and extents `ext` (same length; 0-D boxes have both empty).
struct Box {
    Index lo;
    Index ext;
};

inline Refusal refuse(Reason r, std::string msg) { return Refusal{r, std::move(msg)}; }

std::string to_string(const Index& v);                          // "[1, 2, 3]"
Index unravel(int64_t offset, const Index& shape);                // row-major multi-index
int64_t ravel(const Index& idx, const Index& shape);              // row-major offset
bool is_empty(const Index& extents);                              // some extent is 0
bool intersect(const Box& a, const Box& b, Box* out);             // true when a and b share an element

// Calls f(idx) for every multi-index 0 <= idx < ext in row-major order; once for 0-D, never if empty.
template <class F>
void for_each_index(const Index& ext, F&& f) {
    if (is_empty(ext)) return;
    Index idx(ext.size(), 0);
    for (;;) {
        f(idx);
        std::size_t d = ext.size();
        while (d > 0 && ++idx[d - 1] == ext[d - 1]) idx[--d] = 0;  // odometer step
        if (d == 0) return;
    }
}

// Sort and sweep: every pair of non-empty boxes that share an element. With b == nullptr, pairs
// (i, j), i < j, within a; otherwise pairs (i in a, j in b). Sweeps along the axis on which the
// boxes are thinnest, so only boxes overlapping there are ever compared (never all pairs).
std::vector<std::pair<std::size_t, std::size_t>> overlapping_pairs(const std::vector<Box>& a,
                                                                   const std::vector<Box>* b);

// A non-empty piece: its rank, its logical box, where that box starts in the shard, and its sorted
// locations.
struct Placed {
    int rank;
    Box logical;
    Index shard_corner;
    std::vector<int> locations;
};
// The non-empty pieces of a map whose pieces lie inside tensor and shards, in a canonical order
// (rank, logical corner, extents, shard corner) that does not depend on the input's order.
std::vector<Placed> placed_pieces(const Map& m);

// A part of the logical tensor held whole by each rank in `holders`: (rank, index of the source
// piece holding it), ascending by rank, one piece per rank.
struct Cell {
    Box box;
    std::vector<std::pair<int, std::size_t>> holders;
};
// Disjoint cells covering exactly what `src` (canonical order) covers. Pieces with identical
// boxes (replicas) form one cell; boxes that still overlap (replicas cut into different pieces on
// different ranks) are refined, within each group of overlapping boxes, into parts with one holder
// set each. Deterministic for a given `src`.
std::vector<Cell> source_cells(const std::vector<Placed>& src);

}  // namespace xmc::affine::detail
