// Affine maps: geometry helpers, validation (AFF-MAP-VALID), builders and the extract/rebuild oracle.
#include "detail.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>

namespace xmc::affine {

const char* reason_name(Reason r) {
    switch (r) {
        case Reason::TooManyDims: return "TooManyDims";
        case Reason::NegativeExtent: return "NegativeExtent";
        case Reason::ArityMismatch: return "ArityMismatch";
        case Reason::SizeOverflow: return "SizeOverflow";
        case Reason::BadRankLabel: return "BadRankLabel";
        case Reason::BadLocations: return "BadLocations";
        case Reason::NotRowMajor: return "NotRowMajor";
        case Reason::PieceOutsideTensor: return "PieceOutsideTensor";
        case Reason::PieceOutsideShard: return "PieceOutsideShard";
        case Reason::ShardOverlap: return "ShardOverlap";
        case Reason::ShardGap: return "ShardGap";
        case Reason::LocationsOverlap: return "LocationsOverlap";
        case Reason::LocationsNotHeld: return "LocationsNotHeld";
        case Reason::ShardWithoutPieces: return "ShardWithoutPieces";
        case Reason::PaddingOutsideShard: return "PaddingOutsideShard";
        case Reason::PaddingOverlap: return "PaddingOverlap";
        case Reason::PaddingWritten: return "PaddingWritten";
        case Reason::MalformedJson: return "MalformedJson";
        case Reason::MalformedField: return "MalformedField";
        case Reason::ShapeMismatch: return "ShapeMismatch";
        case Reason::TargetNotHeld: return "TargetNotHeld";
        case Reason::ScaleNotOne: return "ScaleNotOne";
        case Reason::PiecesOverBudget: return "PiecesOverBudget";
        case Reason::SegmentsOverBudget: return "SegmentsOverBudget";
        case Reason::DimsOverBudget: return "DimsOverBudget";
        case Reason::InvalidReplicaChoice: return "InvalidReplicaChoice";
        case Reason::UnknownRank: return "UnknownRank";
        case Reason::BufferMismatch: return "BufferMismatch";
        case Reason::BadElementSize: return "BadElementSize";
        case Reason::SegmentOutOfBounds: return "SegmentOutOfBounds";
        case Reason::ReplicaMismatch: return "ReplicaMismatch";
    }
    return "?";
}

int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> st(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
    return st;
}

namespace detail {

namespace {
template <class V>
std::string list_string(const V& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}
}  // namespace

std::string to_string(const Index& v) { return list_string(v); }
std::string to_string(const std::vector<int64_t>& v) { return list_string(v); }
std::string to_string(const std::vector<int>& v) { return list_string(v); }

Index unravel(int64_t offset, const Index& shape) {
    Index idx(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
        if (shape[d] == 0) continue;
        idx[d] = offset % shape[d];
        offset /= shape[d];
    }
    return idx;
}

int64_t ravel(const Index& idx, const std::vector<int64_t>& shape) {
    int64_t off = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
    return off;
}

Index row_major(const Index& shape) {
    Index st(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
    return st;
}

int64_t numel(const Index& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

bool is_empty(const Index& extents) {
    return std::any_of(extents.begin(), extents.end(), [](int64_t e) { return e == 0; });
}

bool intersect(const Box& a, const Box& b, Box* out) {
    for (std::size_t d = 0; d < a.lo.size(); ++d)
        if (std::min(a.lo[d] + a.ext[d], b.lo[d] + b.ext[d]) <= std::max(a.lo[d], b.lo[d])) return false;
    if (!out) return true;  // only asked whether they meet
    Index lo(a.lo.size()), ext(a.lo.size());
    for (std::size_t d = 0; d < a.lo.size(); ++d) {
        lo[d] = std::max(a.lo[d], b.lo[d]);
        ext[d] = std::min(a.lo[d] + a.ext[d], b.lo[d] + b.ext[d]) - lo[d];
    }
    out->lo = lo;
    out->ext = ext;
    return true;
}

namespace {
// range_boxes() within the block of axes d.. whose corner on the axes before d is `corner`; begin
// and end count elements from that block's first. `inner[d]` is the row-major stride of axis d.
void range_boxes_from(const Index& shape, const Index& inner, std::size_t d, Index& corner, int64_t begin,
                      int64_t end, std::vector<Box>& out) {
    if (begin >= end) return;
    if (d == shape.size()) {  // one element (the whole block of no axes)
        out.push_back({corner, Index(shape.size(), 1)});
        return;
    }
    auto box = [&](int64_t first, int64_t count) {  // indices first .. first + count - 1 of axis d, all of the rest
        Box b{corner, shape};
        for (std::size_t k = 0; k < d; ++k) b.ext[k] = 1;
        b.lo[d] = first;
        b.ext[d] = count;
        for (std::size_t k = d + 1; k < shape.size(); ++k) b.lo[k] = 0;
        out.push_back(b);
    };
    const int64_t step = inner[d];
    int64_t first = begin / step, last = end / step;  // indices of axis d the range starts and ends in
    const int64_t head = begin % step, tail = end % step;
    if (first == last) {  // inside one index of axis d: a range of the next block
        corner[d] = first;
        range_boxes_from(shape, inner, d + 1, corner, head, tail, out);
        corner[d] = 0;
        return;
    }
    if (head != 0) {  // the partial block it starts in
        corner[d] = first;
        range_boxes_from(shape, inner, d + 1, corner, head, step, out);
        corner[d] = 0;
        ++first;
    }
    if (last > first) box(first, last - first);  // whole blocks
    if (tail != 0) {  // the partial block it ends in
        corner[d] = last;
        range_boxes_from(shape, inner, d + 1, corner, 0, tail, out);
        corner[d] = 0;
    }
}
}  // namespace

std::vector<Box> range_boxes(const Index& shape, int64_t begin, int64_t end) {
    std::vector<Box> out;
    Index corner(shape.size(), 0);
    range_boxes_from(shape, row_major(shape), 0, corner, begin, end, out);
    return out;
}

std::vector<std::pair<std::size_t, std::size_t>> overlapping_pairs(const std::vector<const Box*>& a,
                                                                   const std::vector<const Box*>* b) {
    const bool self = (b == nullptr);
    const std::vector<const Box*>* sets[2] = {&a, self ? &a : b};
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    // Few boxes (one tensor's pieces): every pair is compared, which costs less than setting up
    // the sweep. (An empty box meets nothing, so intersect() refuses it.) Two sets give all their
    // pairs so; one set only shows that there are none (else the sweep below finds them in its order).
    if (!self && a.size() * b->size() <= 256) {
        for (std::size_t i = 0; i < a.size(); ++i)
            for (std::size_t j = 0; j < b->size(); ++j)
                if (intersect(*a[i], *(*b)[j], nullptr)) pairs.emplace_back(i, j);
        return pairs;
    }
    if (self && a.size() <= 16) {
        bool any = false;
        for (std::size_t i = 0; i < a.size() && !any; ++i)
            for (std::size_t j = 0; j < i && !any; ++j) any = intersect(*a[i], *a[j], nullptr);
        if (!any) return pairs;
        pairs.reserve(a.size());  // some do (replicas, say): a few pairs each
    }
    std::size_t ndim = a.empty() ? (self || b->empty() ? 0 : b->front()->lo.size()) : a.front()->lo.size();

    // One item per non-empty box (empty boxes share no element); its interval along the sweep axis
    // is filled in once the axis is chosen.
    struct Item {
        int64_t start, end;
        int set;
        std::size_t idx;
        const Box* box;
    };
    std::vector<Item> items;
    items.reserve(a.size() + (self ? 0 : b->size()));
    for (int s = 0; s < (self ? 1 : 2); ++s)
        for (std::size_t i = 0; i < sets[s]->size(); ++i) {
            const Box* x = (*sets[s])[i];
            if (!is_empty(x->ext)) items.push_back({0, 0, s, i, x});
        }

    // Sweep axis: the one where an average point is covered by the fewest boxes
    // (sum of extents / span), so that the active lists stay short.
    std::size_t axis = 0;
    double best = -1;
    for (std::size_t d = 0; d < ndim; ++d) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        double sum = 0;
        for (const Item& it : items) {
            const Box& x = *it.box;
            lo = std::min(lo, x.lo[d]);
            hi = std::max(hi, x.lo[d] + x.ext[d]);
            sum += double(x.ext[d]);
        }
        double cost = hi > lo ? sum / double(hi - lo) : 0;
        if (best < 0 || cost < best) best = cost, axis = d;
    }
    for (Item& it : items) {
        // AFF-SCALAR: 0-D boxes take part like any other.
        // A 0-D box is the single element: every 0-D pair overlaps, so sweep a unit interval.
        it.start = ndim ? it.box->lo[axis] : 0;
        it.end = ndim ? it.box->lo[axis] + it.box->ext[axis] : 1;
    }
    auto by_start = [](const Item& x, const Item& y) { return std::tie(x.start, x.set, x.idx) < std::tie(y.start, y.set, y.idx); };
    if (!std::is_sorted(items.begin(), items.end(), by_start)) std::sort(items.begin(), items.end(), by_start);
    // An active list never holds more than its set's boxes; reserved once instead of growing.
    std::vector<const Item*> active[2];
    for (int s = 0; s < (self ? 1 : 2); ++s) active[s].reserve(sets[s]->size());
    // Two sets (target pieces against cells): usually each box of `a` meets at least one of `b`.
    if (!self) pairs.reserve(a.size());
    for (const Item& it : items) {
        // Boxes of the other set (or of the one set) that started earlier and still reach `start`.
        auto& act = active[self ? 0 : 1 - it.set];
        act.erase(std::remove_if(act.begin(), act.end(), [&](const Item* x) { return x->end <= it.start; }),
                  act.end());
        for (const Item* o : act) {
            if (!intersect(*it.box, *o->box, nullptr)) continue;
            if (self) pairs.emplace_back(std::min(o->idx, it.idx), std::max(o->idx, it.idx));
            else if (it.set == 0) pairs.emplace_back(it.idx, o->idx);
            else pairs.emplace_back(o->idx, it.idx);
        }
        active[self ? 0 : it.set].push_back(&it);
    }
    return pairs;
}

}  // namespace detail

using namespace detail;

namespace {

// Element count, or -1 on int64 overflow (sizes already checked non-negative).
int64_t checked_numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape)
        if (__builtin_mul_overflow(n, s, &n)) return -1;
    return n;
}

// Two lists of distinct ranks name the same ranks (in any order). Lists are short.
bool same_ranks(const std::vector<int>& a, const std::vector<int>& b) {
    if (a == b) return true;  // the usual case: replicas list their ranks alike
    if (a.size() != b.size()) return false;
    for (int x : a)
        if (std::find(b.begin(), b.end(), x) == b.end()) return false;
    return true;
}

std::string where(int rank, std::size_t piece) {
    return "rank " + std::to_string(rank) + " piece " + std::to_string(piece) + ": ";
}

// AFF-MAP-VALID: malformed maps, each refused with its own reason.
// Malformed input: dims, sizes, vector lengths, rank labels, locations.
std::optional<Refusal> validate_form(const Map& m) {
    const std::size_t n = m.shape.size();
    if (n > kMaxDims) return refuse(Reason::TooManyDims, "tensor has " + std::to_string(n) + " dims, at most 8");
    auto negative = [](const std::vector<int64_t>& v) { return std::any_of(v.begin(), v.end(), [](int64_t x) { return x < 0; }); };
    if (negative(m.shape)) return refuse(Reason::NegativeExtent, "shape " + to_string(m.shape) + " is negative");
    if (checked_numel(m.shape) < 0) return refuse(Reason::SizeOverflow, "shape " + to_string(m.shape) + " overflows");
    std::vector<int> labels;  // sorted, to look up declared ranks
    labels.reserve(m.ranks.size());
    for (const RankLayout& r : m.ranks) labels.push_back(r.rank);
    std::sort(labels.begin(), labels.end());
    for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] < 0 || (i > 0 && labels[i] == labels[i - 1])) {
            const int bad = labels[i] < 0 ? labels[i] : labels[i - 1];
            for (const RankLayout& r : m.ranks)  // the first bad label in input order, as before
                if (r.rank < 0 || std::count(labels.begin(), labels.end(), r.rank) > 1)
                    return refuse(Reason::BadRankLabel, "rank label " + std::to_string(r.rank) + " is negative or repeated");
            return refuse(Reason::BadRankLabel, "rank label " + std::to_string(bad) + " is negative or repeated");
        }
    const auto declared = [&](int x) { return std::binary_search(labels.begin(), labels.end(), x); };
    // The last locations list found to be distinct declared ranks: a list equal to it (replicas
    // list their ranks alike) is too, and needs only the holder check.
    const std::vector<int>* checked = nullptr;
    for (const RankLayout& r : m.ranks) {
        const auto rk = [&] { return "rank " + std::to_string(r.rank) + ": "; };
        // AFF-MAP-FLAT: a shard of any number of dims (other than the tensor's: a flat shard).
        if (r.shard_shape.size() > kMaxDims)
            return refuse(Reason::TooManyDims, rk() + "shard_shape has " + std::to_string(r.shard_shape.size()) +
                                                   " dims, at most 8");
        if (negative(r.shard_shape)) return refuse(Reason::NegativeExtent, rk() + "shard_shape is negative");
        if (checked_numel(r.shard_shape) < 0) return refuse(Reason::SizeOverflow, rk() + "shard_shape overflows");
        for (std::size_t i = 0; i < r.pieces.size(); ++i) {
            const Piece& p = r.pieces[i];
            if (p.extents.size() != n || p.logical_strides.size() != n || p.shard_strides.size() != n)
                return refuse(Reason::ArityMismatch, where(r.rank, i) + "extents/strides need " + std::to_string(n) + " dims");
            if (negative(p.extents)) return refuse(Reason::NegativeExtent, where(r.rank, i) + "negative extent");
            // Distinct declared ranks including the holder (pairwise: location lists are short).
            const auto& l = p.locations;
            bool bad = l.empty() || std::find(l.begin(), l.end(), r.rank) == l.end();
            // (A list of the holder alone, found just above, is one declared rank.)
            if (!bad && l.size() > 1 && (checked == nullptr || *checked != l)) {
                for (std::size_t a = 0; a < l.size() && !bad; ++a)
                    bad = !declared(l[a]) || std::find(l.begin(), l.begin() + a, l[a]) != l.begin() + a;
                checked = &l;  // (when bad, the refusal below ends the check)
            }
            if (bad)
                return refuse(Reason::BadLocations, where(r.rank, i) + "locations must be distinct declared ranks "
                                                                       "including the holding rank");
        }
    }
    return std::nullopt;
}

// Box of a non-empty piece inside `shape` (`total` elements), from its offset, into *out; refusal
// reason `outside` if it leaves. `what` names the piece (made only for a refusal).
template <class What>
std::optional<Refusal> piece_box(int64_t offset, const Index& extents, const Index& shape, int64_t total,
                                 Reason outside, const What& what, Box* out) {
    if (offset < 0 || offset >= total) return refuse(outside, what() + "offset " + std::to_string(offset) + " outside");
    out->lo = unravel(offset, shape);
    out->ext = extents;
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (extents[d] > shape[d] - out->lo[d])
            return refuse(outside, what() + "box at " + to_string(out->lo) + " extents " + to_string(extents) +
                                       " leaves " + to_string(shape));
    return std::nullopt;
}

// AFF-MAP-FLAT: the run of `count` elements from `offset` on inside a flat shard of `total`
// elements, as a 1-D box into *out; else PieceOutsideShard. `what` names the piece.
template <class What>
std::optional<Refusal> piece_run(int64_t offset, int64_t count, int64_t total, const What& what, Box* out) {
    int64_t end = 0;
    if (offset < 0 || __builtin_add_overflow(offset, count, &end) || end > total)
        return refuse(Reason::PieceOutsideShard, what() + "run of " + std::to_string(count) + " elements at shard element " +
                                                     std::to_string(offset) + " leaves its flat shard of " +
                                                     std::to_string(total) + " elements");
    out->lo = Index{offset};
    out->ext = Index{count};
    return std::nullopt;
}

// What check_rank() reuses from rank to rank (allocated once per map).
struct RankScratch {
    std::vector<Box> in_shard;      // one rank's pieces in its shard, then its padding
    std::vector<const Box*> boxes;  // pointers to them, for overlapping_pairs
    Index run_strides;              // a piece of a flat shard: the row-major strides of its extents
    Box lb, sb;                     // a piece's box in the tensor and in its shard
};

// AFF-MAP-FLAT: r's padding spans inside its shard of `shard_numel` elements; their element count
// (saturating: overlapping spans are refused with the tiling) into *padded.
std::optional<Refusal> padding_inside(const RankLayout& r, int64_t shard_numel, int64_t* padded) {
    *padded = 0;
    for (std::size_t k = 0; k < r.padding.size(); ++k) {
        const Span& sp = r.padding[k];
        int64_t end = 0;
        if (sp.offset < 0 || sp.count < 0 || __builtin_add_overflow(sp.offset, sp.count, &end) || end > shard_numel)
            return refuse(Reason::PaddingOutsideShard, "rank " + std::to_string(r.rank) + ": padding span " +
                                                           std::to_string(k) + " (offset " + std::to_string(sp.offset) +
                                                           ", count " + std::to_string(sp.count) +
                                                           ") leaves its shard of " + std::to_string(shard_numel) +
                                                           " elements");
        if (__builtin_add_overflow(*padded, sp.count, padded)) *padded = INT64_MAX;
    }
    return std::nullopt;
}

// AFF-MAP-FLAT: r's padding as boxes of its shard, appended to `out` (a flat shard's spans are
// runs of it, 1-D boxes; a box shard's are the boxes of range_boxes).
void add_padding_boxes(const RankLayout& r, bool flat, const Index& shard_shape, std::vector<Box>& out) {
    for (const Span& sp : r.padding) {
        if (sp.count == 0) continue;
        if (flat) out.push_back({Index{sp.offset}, Index{sp.count}});
        else for (Box& b : range_boxes(shard_shape, sp.offset, sp.offset + sp.count)) out.push_back(std::move(b));
    }
}

// The refusal for overlapping boxes of r's shard (`boxes`: its pieces, the first `piece_boxes`,
// then its padding; `pairs` those that overlap): the worst pair decides, two pieces
// (ShardOverlap), else a piece on padding (PaddingWritten), else two padding spans (PaddingOverlap).
Refusal shard_overlap(const RankLayout& r, const std::vector<Box>& boxes, std::size_t piece_boxes,
                      const std::vector<std::pair<std::size_t, std::size_t>>& pairs) {
    auto pieces_in = [&](const std::pair<std::size_t, std::size_t>& q) {
        return int(q.first < piece_boxes) + int(q.second < piece_boxes);
    };
    auto worst = pairs.front();
    for (const auto& q : pairs)
        if (pieces_in(q) > pieces_in(worst)) worst = q;
    const std::string rk = "rank " + std::to_string(r.rank) + ": ";
    const std::string at = to_string(boxes[std::max(worst.first, worst.second)].lo);
    if (pieces_in(worst) == 2) return refuse(Reason::ShardOverlap, rk + "pieces overlap in the shard at " + to_string(boxes[worst.first].lo));
    if (pieces_in(worst) == 1) return refuse(Reason::PaddingWritten, rk + "a piece covers padding of the shard at " + at);
    return refuse(Reason::PaddingOverlap, rk + "padding spans overlap at " + at);
}

// Per rank of a map of `shape` (`total` elements, row-major `strides`): padding inside the shard;
// every piece row-major and inside tensor and shard; the pieces and the padding tile the shard.
// Appends the rank's non-empty pieces, each with its frame, to `placed`. (The rare paths, padding
// and refusals, are functions of their own: this one runs for every rank of every map planned.)
std::optional<Refusal> check_rank(const RankLayout& r, const Index& shape, int64_t total, const Index& strides,
                                  std::vector<Placed>& placed, RankScratch& s) {
    const Index shard_shape = r.shard_shape;
    const int64_t shard_numel = numel(shard_shape);
    // AFF-MAP-FLAT: a shard with another number of dims than the tensor's is flat: its
    // elements are counted in row-major order and each piece is one run of them.
    const bool flat = shard_shape.size() != shape.size();
    // AFF-MAP-FLAT: padding spans inside the shard.
    int64_t padded = 0;  // padding elements declared
    if (!r.padding.empty())
        if (auto e = padding_inside(r, shard_numel, &padded)) return e;
    // AFF-MAP-VALID: a rank that declares a shard but no pieces (padding alone needs none).
    if (r.pieces.empty() && padded < shard_numel)
        return refuse(Reason::ShardWithoutPieces, "rank " + std::to_string(r.rank) + " declares shard " +
                                                      to_string(r.shard_shape) + " but no pieces");
    const Index shard_strides = row_major(shard_shape);
    const bool pairs_possible = r.pieces.size() + r.padding.size() > 1;  // (a single piece overlaps nothing)
    s.in_shard.clear();
    int64_t covered = 0;
    for (std::size_t i = 0; i < r.pieces.size(); ++i) {
        const Piece& p = r.pieces[i];
        const Index extents = p.extents;
        const auto w = [&] { return where(r.rank, i); };
        if (flat) {
            // AFF-MAP-VALID: extents whose row-major strides overflow int64 lie in no tensor (the
            // fuzzer's piece of extents [1, 8888888888888888881, 2] overflowed row_major here).
            int64_t inner = 1;
            for (std::size_t d = extents.size(); d-- > 1;)
                if (__builtin_mul_overflow(inner, extents[d], &inner))
                    return refuse(Reason::PieceOutsideTensor, w() + "extents " + to_string(extents) +
                                                                  " hold more elements than int64 counts");
            s.run_strides = row_major(extents);
        }
        const Index& want = flat ? s.run_strides : shard_strides;  // the shard strides it must have
        // AFF-MAP-VALID: strides not row-major along an axis of extent above one.
        // Strides matter only along axes the piece walks (extent > 1).
        for (std::size_t d = 0; d < extents.size(); ++d)
            if (extents[d] > 1 && (p.logical_strides[d] != strides[d] || p.shard_strides[d] != want[d]))
                return refuse(Reason::NotRowMajor,
                              w() + "strides on axis " + std::to_string(d) + " are not row-major" +
                                  (flat ? " (a piece of a flat shard is one run: its shard strides are the "
                                          "row-major strides of its extents)"
                                        : ""));
        // AFF-SCALAR: an empty piece is valid and places nothing.
        if (is_empty(extents)) {  // holds nothing: only its offsets must be sane
            if (p.logical_offset < 0) return refuse(Reason::PieceOutsideTensor, w() + "negative logical_offset");
            if (p.shard_offset < 0) return refuse(Reason::PieceOutsideShard, w() + "negative shard_offset");
            continue;
        }
        // AFF-MAP-VALID: a piece that leaves the logical tensor or its shard.
        if (auto e = piece_box(p.logical_offset, extents, shape, total, Reason::PieceOutsideTensor,
                               [&] { return w() + "logical "; }, &s.lb))
            return e;
        // AFF-MAP-FLAT: a piece of a flat shard is the run shard_offset .. + numel(extents) - 1.
        if (auto e = flat ? piece_run(p.shard_offset, numel(extents), shard_numel, [&] { return w(); }, &s.sb)
                          : piece_box(p.shard_offset, extents, shard_shape, shard_numel, Reason::PieceOutsideShard,
                                      [&] { return w() + "shard "; }, &s.sb))
            return e;
        // A box of the shard is placed in the shard's frame, a run of a flat shard in its own.
        placed.push_back({r.rank, s.lb, s.sb.lo, &p.locations, {&r.shard_shape, 0}});
        if (flat) {
            placed.back().shard_corner = Index(shape.size(), 0);
            placed.back().frame = {&p.extents, p.shard_offset};
        }
        // Each piece fits in the shard, but their sum may not fit in int64 (pieces of
        // a huge shard that overlap): saturate; more than the shard holds means the
        // pairs below overlap, and that is the refusal.
        if (__builtin_add_overflow(covered, numel(extents), &covered)) covered = INT64_MAX;
        if (pairs_possible) s.in_shard.push_back(s.sb);
    }
    // AFF-MAP-VALID: a rank's pieces must tile its shard exactly.
    // Exact tiling = no two pieces share a shard element, no piece is on padding (AFF-MAP-FLAT),
    // and pieces and padding together cover all of it.
    const std::size_t piece_boxes = s.in_shard.size();  // s.in_shard[0, piece_boxes): pieces; then padding
    if (pairs_possible) add_padding_boxes(r, flat, shard_shape, s.in_shard);
    s.boxes.clear();
    if (s.in_shard.size() > 1)
        for (const Box& b : s.in_shard) s.boxes.push_back(&b);
    const auto pairs = s.in_shard.size() > 1 ? overlapping_pairs(s.boxes, nullptr)
                                            : std::vector<std::pair<std::size_t, std::size_t>>{};
    if (!pairs.empty()) return shard_overlap(r, s.in_shard, piece_boxes, pairs);
    if (covered != shard_numel - padded) {
        std::string what = "pieces cover " + std::to_string(covered);
        if (!r.padding.empty()) what += " and padding " + std::to_string(padded);
        return refuse(Reason::ShardGap, "rank " + std::to_string(r.rank) + ": " + what + " of " + std::to_string(shard_numel) + " shard elements");
    }
    return std::nullopt;
}

}  // namespace

std::optional<Refusal> validate(const Map& m) { return validate_map(m, nullptr, nullptr); }

std::optional<Refusal> detail::validate_map(const Map& m, std::vector<Placed>* placed_out,
                                            std::vector<Cell>* cells_out) {
    if (auto r = validate_form(m)) return r;
    const Index shape = m.shape;  // converted once, not once per piece
    const int64_t total = numel(shape);
    const Index strides = row_major(shape);

    // The non-empty pieces, gathered while they are checked below (their boxes are computed once,
    // here): rank, logical box, shard corner, locations and shard shape.
    std::vector<Placed> placed;
    {
        std::size_t n = 0;
        for (const RankLayout& r : m.ranks) n += r.pieces.size();
        placed.reserve(n);
    }
    RankScratch scratch;
    for (const RankLayout& r : m.ranks)
        if (auto e = check_rank(r, shape, total, strides, placed, scratch)) return e;
    // AFF-MAP-VALID: pieces with different locations overlap.
    // Pieces that share a logical element must agree on who holds it.
    sort_placed(placed);
    std::vector<std::pair<std::size_t, std::size_t>> overlaps;  // pairs of placed pieces sharing an element
    {
        std::vector<const Box*> logical;
        logical.reserve(placed.size());
        for (const Placed& p : placed) logical.push_back(&p.logical);
        overlaps = overlapping_pairs(logical, nullptr);
        for (auto [i, j] : overlaps)
            if (!same_ranks(*placed[i].locations, *placed[j].locations))
                return refuse(Reason::LocationsOverlap, "pieces with different locations overlap at logical " +
                                                            to_string(placed[i].logical.lo) + " / " +
                                                            to_string(placed[j].logical.lo));
    }
    // `locations` must name exactly the ranks that hold each element. The cells cut the tensor into
    // boxes with one holder set each; every piece covering a cell has the same locations (checked
    // just above), so comparing with the first holder's piece suffices.
    std::vector<Cell> cells = source_cells(placed, overlaps);
    for (const Cell& c : cells) {
        const std::vector<int>& named = *placed[c.holders[0].second].locations;
        // Both lists are distinct ranks: they agree when they have the same size and every holder is named.
        const bool same = c.holders.size() == named.size() &&
                          std::all_of(c.holders.begin(), c.holders.end(), [&](const auto& h) {
                              return std::find(named.begin(), named.end(), h.first) != named.end();
                          });
        if (!same) {
            std::vector<int> holders;
            for (const auto& h : c.holders) holders.push_back(h.first);
            std::vector<int> sorted = named;
            std::sort(sorted.begin(), sorted.end());
            return refuse(Reason::LocationsNotHeld, "logical box at " + to_string(c.box.lo) + " extents " +
                                                        to_string(c.box.ext) + " is held by ranks " +
                                                        to_string(holders) +
                                                        " but its pieces name locations " +
                                                        to_string(sorted));
        }
    }
    if (placed_out) *placed_out = std::move(placed);
    if (cells_out) *cells_out = std::move(cells);
    return std::nullopt;
}

// ---- builders ----

Map split(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int64_t>& sizes,
          const std::vector<std::vector<int>>& holders) {
    if (axis >= shape.size() || sizes.size() != holders.size() ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != shape[axis])
        throw std::invalid_argument("split: sizes must sum to shape[axis]");
    std::set<int> ranks;
    for (const auto& h : holders) ranks.insert(h.begin(), h.end());
    Map m{shape, {}};
    const Index strides = row_major_strides(shape);
    for (int rank : ranks) {
        RankLayout r{rank, shape, {}};
        r.shard_shape[axis] = 0;
        for (std::size_t k = 0; k < sizes.size(); ++k)
            if (std::count(holders[k].begin(), holders[k].end(), rank)) r.shard_shape[axis] += sizes[k];
        const Index shard_strides = row_major_strides(r.shard_shape);
        int64_t start = 0, in_shard = 0;  // part k's start along axis, in the tensor and in this shard
        for (std::size_t k = 0; k < sizes.size(); start += sizes[k], ++k) {
            if (!std::count(holders[k].begin(), holders[k].end(), rank)) continue;
            Piece p;
            p.extents = shape;
            p.extents[axis] = sizes[k];
            Index corner(shape.size(), 0);
            corner[axis] = start;
            p.logical_offset = ravel(corner, shape);
            corner[axis] = in_shard;
            p.shard_offset = ravel(corner, r.shard_shape);
            p.logical_strides = strides;
            p.shard_strides = shard_strides;
            std::set<int> l(holders[k].begin(), holders[k].end());
            p.locations.assign(l.begin(), l.end());
            r.pieces.push_back(std::move(p));
            in_shard += sizes[k];
        }
        m.ranks.push_back(std::move(r));
    }
    return m;
}

Map replicated(const std::vector<int64_t>& shape, const std::vector<int>& ranks) {
    std::set<int> l(ranks.begin(), ranks.end());
    Map m{shape, {}};
    Piece p{shape, 0, row_major_strides(shape), 0, row_major_strides(shape), {l.begin(), l.end()}, 1.0};
    for (int rank : l) m.ranks.push_back(RankLayout{rank, shape, {p}});
    return m;
}

Map split_sizes(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int64_t>& sizes,
                const std::vector<int>& ranks) {
    std::vector<std::vector<int>> holders;
    for (int r : ranks) holders.push_back({r});
    return split(shape, axis, sizes, holders);
}

Map split_even(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int>& ranks) {
    if (axis >= shape.size() || ranks.empty()) throw std::invalid_argument("split_even: bad axis or no ranks");
    const int64_t n = int64_t(ranks.size());
    std::vector<int64_t> sizes;
    for (int64_t k = 0; k < n; ++k) sizes.push_back(shape[axis] / n + (k < shape[axis] % n ? 1 : 0));
    return split_sizes(shape, axis, sizes, ranks);
}

Map block_cyclic(const std::vector<int64_t>& shape, std::size_t axis, int64_t block, const std::vector<int>& ranks) {
    if (axis >= shape.size() || block <= 0 || ranks.empty()) throw std::invalid_argument("block_cyclic: bad arguments");
    std::vector<int64_t> sizes;
    std::vector<std::vector<int>> holders;
    for (int64_t start = 0; start < shape[axis]; start += block) {
        sizes.push_back(std::min(block, shape[axis] - start));
        holders.push_back({ranks[holders.size() % ranks.size()]});
    }
    for (int r : ranks)  // a rank dealt no block still declares its (empty) shard
        if (std::none_of(holders.begin(), holders.end(), [&](const auto& h) { return h[0] == r; }))
            sizes.push_back(0), holders.push_back({r});
    return split(shape, axis, sizes, holders);
}

Map block_rows(const std::vector<int64_t>& shape, int64_t replicated_rows, const std::vector<int>& ranks) {
    if (shape.empty() || replicated_rows < 0 || replicated_rows > shape[0] || ranks.empty())
        throw std::invalid_argument("block_rows: bad arguments");
    const int64_t rest = shape[0] - replicated_rows, n = int64_t(ranks.size());
    std::vector<int64_t> sizes{replicated_rows};
    std::vector<std::vector<int>> holders{ranks};
    for (int64_t k = 0; k < n; ++k) {
        sizes.push_back(rest / n + (k < rest % n ? 1 : 0));
        holders.push_back({ranks[std::size_t(k)]});
    }
    return split(shape, 0, sizes, holders);
}

// AFF-MAP-FLAT: a ZeRO-3 slice of a parameter as boxes of it, each one run of the flat shard.
// Several boxes rather than one piece per row: a slice is then at most 2 * dims - 1 pieces
// whatever its length, each a box of the tensor (the planner's sort and sweep over logical boxes
// is unchanged) and a run of the shard (tiling the shard is a sweep over intervals).
std::vector<Piece> flat_pieces(const std::vector<int64_t>& shape, int64_t begin, int64_t end, int64_t shard_offset,
                               int rank) {
    if (begin < 0 || begin > end || end > numel(shape)) throw std::invalid_argument("flat_pieces: bad range");
    std::vector<Piece> out;
    const std::vector<int64_t> strides = row_major_strides(shape);
    int64_t at = shard_offset;  // where the next box starts in the shard
    for (const Box& b : range_boxes(shape, begin, end)) {
        Piece p;
        p.extents = b.ext;
        p.logical_offset = ravel(b.lo, shape);
        p.logical_strides = strides;
        p.shard_offset = at;
        p.shard_strides = row_major_strides(p.extents);
        p.locations = {rank};
        at += numel(p.extents);
        out.push_back(std::move(p));
    }
    return out;
}

FlatPartition zero3_flat(const std::vector<std::vector<int64_t>>& shapes, const std::vector<int>& ranks,
                         int64_t alignment) {
    if (ranks.empty() || alignment <= 0) throw std::invalid_argument("zero3_flat: no ranks or alignment < 1");
    const auto align_up = [](int64_t x, int64_t a) { return (x + a - 1) / a * a; };
    FlatPartition f;
    int64_t end = 0;  // the end of the parameters placed so far
    for (const auto& shape : shapes) {
        f.starts.push_back(align_up(end, alignment));
        end = f.starts.back() + numel(shape);
    }
    const int64_t world = int64_t(ranks.size());
    const int64_t total = align_up(end, world * alignment);
    f.partition = total / world;
    for (std::size_t p = 0; p < shapes.size(); ++p) {
        const int64_t first = f.starts[p], last = first + numel(shapes[p]);  // its elements
        const int64_t owned_end = p + 1 < shapes.size() ? f.starts[p + 1] : total;  // and the padding after them
        // A 1-D parameter's shard has its dims: a box of it, like the runs of a flat shard.
        Map m{shapes[p], {}};
        std::vector<int64_t> offsets;
        for (int64_t k = 0; k < world; ++k) {
            const int64_t lo = std::max(first, k * f.partition), hi = std::min(owned_end, (k + 1) * f.partition);
            RankLayout r{ranks[std::size_t(k)], {std::max<int64_t>(hi - lo, 0)}, {}, {}};
            if (hi > lo) {
                const int64_t data_end = std::min(hi, last);  // past it: padding
                if (data_end > lo) r.pieces = flat_pieces(shapes[p], lo - first, data_end - first, 0, r.rank);
                if (hi > std::max(data_end, lo)) r.padding.push_back({std::max(data_end, lo) - lo, hi - std::max(data_end, lo)});
            }
            offsets.push_back(hi > lo ? lo - k * f.partition : 0);
            m.ranks.push_back(std::move(r));
        }
        f.maps.push_back(std::move(m));
        f.offsets.push_back(std::move(offsets));
    }
    return f;
}

std::vector<bool> padding_mask(const RankLayout& r) {
    std::vector<bool> mask(std::size_t(std::max<int64_t>(numel(r.shard_shape), 0)), false);
    for (const Span& sp : r.padding)
        for (int64_t i = sp.offset; i < sp.offset + sp.count; ++i) mask[std::size_t(i)] = true;
    return mask;
}

// ---- oracle ----

namespace {
// Calls f(logical element offset, shard element offset) for every element of a piece.
template <class F>
void for_each_element(const Piece& p, F&& f) {
    for_each_index(p.extents, [&](const Index& i) {
        int64_t l = p.logical_offset, s = p.shard_offset;
        for (std::size_t d = 0; d < i.size(); ++d) l += i[d] * p.logical_strides[d], s += i[d] * p.shard_strides[d];
        f(l, s);
    });
}

// Bytes of n elements; nullopt when elem_size is 0 or the size overflows.
std::optional<std::size_t> byte_size(int64_t n, std::size_t elem_size) {
    std::size_t bytes = 0;
    if (elem_size == 0 || __builtin_mul_overflow(std::size_t(n), elem_size, &bytes)) return std::nullopt;
    return bytes;
}

// The byte sizes of the tensor and of every shard, or BadElementSize.
std::optional<Refusal> check_elem_size(const Map& map, std::size_t elem_size) {
    bool ok = bool(byte_size(numel(map.shape), elem_size));
    for (const RankLayout& r : map.ranks) ok = ok && byte_size(numel(r.shard_shape), elem_size);
    if (ok) return std::nullopt;
    return refuse(Reason::BadElementSize, "element size " + std::to_string(elem_size) + " is 0 or too large");
}
}  // namespace

// AFF-PLAN-EXACT: the oracle: what an executed plan must leave in each target shard.
Result<Bytes> extract_shard(const Map& map, int rank, std::span<const uint8_t> full, std::size_t elem_size) {
    if (auto r = validate(map)) return *r;
    if (auto r = check_elem_size(map, elem_size)) return *r;
    if (full.size() != *byte_size(numel(map.shape), elem_size))
        return refuse(Reason::BufferMismatch, "full tensor buffer has " + std::to_string(full.size()) + " bytes");
    for (const RankLayout& r : map.ranks) {
        if (r.rank != rank) continue;
        Bytes out(*byte_size(numel(r.shard_shape), elem_size), 0);
        for (const Piece& p : r.pieces)
            for_each_element(p, [&](int64_t l, int64_t s) {
                std::memcpy(&out[std::size_t(s) * elem_size], &full[std::size_t(l) * elem_size], elem_size);
            });
        return out;
    }
    return refuse(Reason::UnknownRank, "map declares no rank " + std::to_string(rank));
}

Result<Bytes> rebuild_full(const Map& map, const Shards& shards, std::size_t elem_size) {
    if (auto r = validate(map)) return *r;
    if (auto r = check_elem_size(map, elem_size)) return *r;
    Bytes full(*byte_size(numel(map.shape), elem_size), 0);
    std::vector<bool> written(std::size_t(numel(map.shape)), false);
    for (const RankLayout& r : map.ranks) {
        const std::size_t bytes = *byte_size(numel(r.shard_shape), elem_size);
        auto it = shards.find(r.rank);
        if (it == shards.end()) {
            if (bytes == 0) continue;
            return refuse(Reason::UnknownRank, "no shard buffer for rank " + std::to_string(r.rank));
        }
        if (it->second.size() != bytes)
            return refuse(Reason::BufferMismatch, "rank " + std::to_string(r.rank) + " shard buffer has " +
                                                      std::to_string(it->second.size()) + " bytes");
        std::optional<Refusal> bad;
        for (const Piece& p : r.pieces)
            for_each_element(p, [&](int64_t l, int64_t s) {
                const uint8_t* src = &it->second[std::size_t(s) * elem_size];
                uint8_t* dst = &full[std::size_t(l) * elem_size];
                if (written[std::size_t(l)] && std::memcmp(dst, src, elem_size) != 0 && !bad)
                    bad = refuse(Reason::ReplicaMismatch, "replicas disagree at logical element " + std::to_string(l));
                std::memcpy(dst, src, elem_size);
                written[std::size_t(l)] = true;
            });
        if (bad) return *bad;
    }
    auto hole = std::find(written.begin(), written.end(), false);
    if (hole != written.end())
        return refuse(Reason::TargetNotHeld, "logical element " + std::to_string(hole - written.begin()) +
                                                 " is held by no rank");
    return full;
}

}  // namespace xmc::affine
