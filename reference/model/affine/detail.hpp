// Helpers shared by the affine model's .cpp files and the planner (reference/affine), which builds
// on validate_map's placed pieces and cells (not public API).
#pragma once

#include <xmc/affine.hpp>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace xmc::affine::detail {

// A multi-index, corner or extents of at most kMaxDims axes, held inline: the planner makes millions
// of them, and a heap allocation each was most of its time. Converts to and from std::vector.
class Index {
public:
    using value_type = int64_t;
    Index() = default;
    explicit Index(std::size_t n, int64_t value = 0) : n_(checked(n)) {
        if (value != 0) std::fill(v_, v_ + n_, value);  // (every element starts at 0)
    }
    Index(std::initializer_list<int64_t> l) : n_(checked(l.size())) { std::copy(l.begin(), l.end(), v_); }
    Index(const std::vector<int64_t>& v) : n_(checked(v.size())) { std::copy(v.begin(), v.end(), v_); }
    template <class It>
    Index(It first, It last) : n_(checked(std::size_t(std::distance(first, last)))) { std::copy(first, last, v_); }
    operator std::vector<int64_t>() const { return {begin(), end()}; }

    std::size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    int64_t& operator[](std::size_t i) { return v_[i]; }
    int64_t operator[](std::size_t i) const { return v_[i]; }
    int64_t* begin() { return v_; }
    int64_t* end() { return v_ + n_; }
    const int64_t* begin() const { return v_; }
    const int64_t* end() const { return v_ + n_; }

    friend bool operator==(const Index& a, const Index& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
    friend std::strong_ordering operator<=>(const Index& a, const Index& b) {
        return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
    }

private:
    static uint8_t checked(std::size_t n) {
        if (n > kMaxDims) throw std::length_error("xmc::affine: more than 8 dims");
        return uint8_t(n);
    }
    uint8_t n_ = 0;
    int64_t v_[kMaxDims] = {};
};

// An n-D box: corner `lo` and extents `ext` (same length; 0-D boxes have both empty).
struct Box {
    Index lo;
    Index ext;
};

inline Refusal refuse(Reason r, std::string msg) { return Refusal{r, std::move(msg)}; }

std::string to_string(const Index& v);                          // "[1, 2, 3]"
std::string to_string(const std::vector<int64_t>& v);
std::string to_string(const std::vector<int>& v);
Index unravel(int64_t offset, const Index& shape);                // row-major multi-index
int64_t ravel(const Index& idx, const std::vector<int64_t>& shape);  // row-major offset
Index row_major(const Index& shape);                               // row_major_strides(), inline
bool is_empty(const Index& extents);                              // some extent is 0
int64_t numel(const Index& shape);                                 // affine::numel without a vector copy
bool intersect(const Box& a, const Box& b, Box* out);             // true when a and b share an element

// AFF-SCALAR: a 0-D box is one element, an empty box none.
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
// (i, j), i < j, within a; otherwise pairs (i in a, j in b), in no particular order. Sweeps along
// the axis on which the boxes are thinnest, so only boxes overlapping there are ever compared
// (never all pairs). A few boxes are compared pair by pair instead: two sets get their pairs so,
// one set is only checked for having none.
// The boxes are passed by pointer, so that callers need not copy them out of pieces and cells.
std::vector<std::pair<std::size_t, std::size_t>> overlapping_pairs(const std::vector<const Box*>& a,
                                                                   const std::vector<const Box*>* b);

// AFF-MAP-FLAT: the boxes of a row-major array of `shape` that cover its elements begin .. end - 1
// (0 <= begin <= end <= numel(shape)), in order: each is one run of the array (a partial row,
// whole rows, whole planes, ...), at most 2 * dims - 1 of them; none for an empty range.
std::vector<Box> range_boxes(const Index& shape, int64_t begin, int64_t end);

// Where the corners of a piece's parts lie in its shard: corner c is shard element
// base + ravel(c, *shape). A box of its shard: the shard's shape and base 0 (one frame for all the
// boxes of a rank; the corner is the box's corner in the shard). A run of a flat shard
// (AFF-MAP-FLAT): the piece's own extents and its shard_offset (one frame per run; the corner
// counts from the run's first element). `shape` points into the map, so it names the frame.
struct Frame {
    const std::vector<int64_t>* shape;
    int64_t base;
};

// A non-empty piece: its rank, its logical box, its locations (the piece's own list, in input
// order: distinct ranks, as validate_form checked), and where it sits in its shard: element
// (logical.lo + i) has the corner shard_corner + i in its frame.
struct Placed {
    int rank;
    Box logical;
    Index shard_corner;
    const std::vector<int>* locations;
    Frame frame;
};
// Sorts the non-empty pieces of a map (gathered by validate_map while it checks them) into a
// canonical order (rank, logical corner, extents, shard corner, frame base) that does not depend on the input's order.
void sort_placed(std::vector<Placed>& placed);

// A part of the logical tensor held whole by each rank in `holders`: (rank, index of the source
// piece holding it), ascending by rank, one piece per rank.
struct Cell {
    Box box;
    std::vector<std::pair<int, std::size_t>> holders;
};
// Disjoint cells covering exactly what `src` (canonical order) covers. Pieces with identical
// boxes (replicas) form one cell; boxes that still overlap (replicas cut into different pieces on
// different ranks) are refined, within each group of overlapping boxes, into parts with one holder
// set each. `overlaps` is every pair of pieces of `src` whose boxes share an element
// (overlapping_pairs over their logical boxes, which validate_map has computed already).
// Deterministic for a given `src`.
std::vector<Cell> source_cells(const std::vector<Placed>& src,
                               const std::vector<std::pair<std::size_t, std::size_t>>& overlaps);

// validate(), which computes a valid map's placed pieces and cells anyway: hands them back (each
// output may be null) so that the planner does not compute them again. The placed pieces point
// into the map.
std::optional<Refusal> validate_map(const Map& m, std::vector<Placed>* placed, std::vector<Cell>* cells);

}  // namespace xmc::affine::detail
