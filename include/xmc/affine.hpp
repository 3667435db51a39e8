// xmc affine transfer model (SPEC 5, AFF): maps, their validation, builders, the planner, and the
// plain oracle that executes plans element by element. Pure C++: no OS or driver calls.
//
// Conventions used throughout:
// - A logical tensor has a shape of 0..8 dims; a 0-D tensor (shape {}) holds one element.
// - Every shard is a dense row-major array of its shard_shape (same number of dims as the tensor).
// - Offsets and strides count elements, never bytes; byte buffers are indexed offset * elem_size.
// - Ranks are labels (any non-negative int, e.g. 3 and 9), not positions in a world.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace xmc::affine {

inline constexpr std::size_t kMaxDims = 8;

// One n-D box of the logical tensor held in one rank's shard. Element i (a multi-index with
// 0 <= i[d] < extents[d]) sits at logical_offset + sum(i[d] * logical_strides[d]) in the logical
// tensor and at shard_offset + sum(i[d] * shard_strides[d]) in the shard.
struct Piece {
    std::vector<int64_t> extents;
    int64_t logical_offset = 0;
    std::vector<int64_t> logical_strides;
    int64_t shard_offset = 0;
    std::vector<int64_t> shard_strides;
    std::vector<int> locations;  // every rank holding identical data for this box
    double scale = 1.0;
    bool operator==(const Piece&) const = default;
};

struct RankLayout {
    int rank = 0;
    std::vector<int64_t> shard_shape;
    std::vector<Piece> pieces;
    bool operator==(const RankLayout&) const = default;
};

struct Map {
    std::vector<int64_t> shape;
    std::vector<RankLayout> ranks;
    bool operator==(const Map&) const = default;
};

// Every refusal the model can give. Each case of a requirement has its own reason.
enum class Reason {
    // AFF-MAP-VALID, malformed input
    TooManyDims,         // the tensor has more than kMaxDims dims
    NegativeExtent,      // a negative size in shape, shard_shape or a piece's extents
    ArityMismatch,       // a shard_shape / extents / strides length differs from the tensor's dims
    SizeOverflow,        // an element count or offset does not fit in int64
    BadRankLabel,        // a negative or duplicate rank label
    BadLocations,        // locations empty, with duplicates, without the holding rank, or naming an undeclared rank
    // AFF-MAP-VALID, the cases the requirement names
    NotRowMajor,         // a stride differs from the row-major stride on an axis of extent > 1
    PieceOutsideTensor,  // a piece leaves the logical tensor
    PieceOutsideShard,   // a piece leaves its shard
    ShardOverlap,        // two pieces of one rank share a shard element
    ShardGap,            // a shard element no piece covers
    LocationsOverlap,    // pieces with different locations share a logical element
    LocationsNotHeld,    // a piece's locations differ from the ranks that actually hold its elements
    ShardWithoutPieces,  // a non-empty shard with no pieces (seed bug: silently never written)
    // JSON files
    MalformedJson,
    MalformedField,
    // AFF-PLAN-REFUSE
    ShapeMismatch,       // source and target logical shapes differ
    TargetNotHeld,       // a target element no source rank holds
    ScaleNotOne,         // a piece with scale != 1
    PiecesOverBudget,
    SegmentsOverBudget,
    DimsOverBudget,
    // AFF-REPLICA
    InvalidReplicaChoice,  // the selector answered a rank that is not a candidate
    // oracle and reference executor
    UnknownRank,         // a rank the map or plan does not declare, or a missing buffer
    BufferMismatch,      // a buffer whose size does not match its shard or tensor
    BadElementSize,      // element size 0
    SegmentOutOfBounds,  // a segment reaching outside a shard buffer
    ReplicaMismatch,     // replicas of one logical element hold different bytes
};
const char* reason_name(Reason r);

struct Refusal {
    Reason reason;
    std::string message;
};

// A value or the refusal that replaced it; never both, never a partial value.
template <class T>
struct Result {
    std::optional<T> value;
    Refusal refusal{Reason::MalformedField, ""};  // meaningful only when !ok()

    Result(T v) : value(std::move(v)) {}
    Result(Refusal r) : refusal(std::move(r)) {}
    bool ok() const { return value.has_value(); }
    explicit operator bool() const { return ok(); }
    const T& operator*() const { return *value; }
    T& operator*() { return *value; }
    const T* operator->() const { return &*value; }
};

// ---- shapes ----
int64_t numel(const std::vector<int64_t>& shape);  // 1 for a 0-D shape
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);

// ---- AFF-MAP-VALID ----
// nullopt for a valid map, else the first problem found, checked in this order: form (dims, sizes,
// vector lengths, rank labels, locations naming distinct declared ranks including the holder);
// then per rank: a non-empty shard without pieces, strides, pieces inside tensor and shard, shard
// tiled exactly (overlap, then gap); then across ranks: pieces with different locations sharing an
// element, and locations that differ from the ranks actually holding an element.
// Empty pieces hold nothing: only their strides and non-negative offsets are checked.
std::optional<Refusal> validate(const Map& map);

// ---- JSON files ----
// from_json parses only (call validate() for the map's meaning); it never throws.
Result<Map> from_json(const std::string& text);
std::string to_json(const Map& map);

// ---- builders (all produce valid maps) ----
// One piece on every rank: the whole tensor, replicated. Works for 0-D shapes.
Map replicated(const std::vector<int64_t>& shape, const std::vector<int>& ranks);
// General split along `axis`: part k (sizes[k] long; sizes sum to shape[axis]) is held by every
// rank in holders[k]. A rank's shard concatenates, along `axis` and in part order, the parts it
// holds. Parts of size 0 give empty pieces. An axis > 0 gives strided (column) pieces.
Map split(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int64_t>& sizes,
          const std::vector<std::vector<int>>& holders);
// One part per rank, sizes differing by at most one (the first shape[axis] % n ranks get one more).
Map split_even(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int>& ranks);
// One part per rank with explicit sizes (uneven, zeros allowed).
Map split_sizes(const std::vector<int64_t>& shape, std::size_t axis, const std::vector<int64_t>& sizes,
                const std::vector<int>& ranks);
// Blocks of `block` along `axis` dealt round robin to ranks (several pieces per rank).
Map block_cyclic(const std::vector<int64_t>& shape, std::size_t axis, int64_t block, const std::vector<int>& ranks);
// The first `replicated_rows` rows (axis 0) on every rank, the remaining rows split evenly.
Map block_rows(const std::vector<int64_t>& shape, int64_t replicated_rows, const std::vector<int>& ranks);

// ---- oracle (AFF-PLAN-EXACT) ----
using Bytes = std::vector<uint8_t>;
using Shards = std::map<int, Bytes>;  // rank -> its shard, row-major, numel(shard_shape) * elem_size bytes
// The shard `rank` holds, copied out of the full row-major logical tensor. The map must be valid.
Result<Bytes> extract_shard(const Map& map, int rank, std::span<const uint8_t> full, std::size_t elem_size);
// The full tensor rebuilt from shards; refuses an element no shard holds and replicas that disagree.
Result<Bytes> rebuild_full(const Map& map, const Shards& shards, std::size_t elem_size);

// ---- planner (AFF-PLAN-*, AFF-REPLICA, AFF-SCALAR) ----
// Copy the box `extents` from src_rank's shard (starting at element src_offset, strides src_strides)
// to tgt_rank's shard (tgt_offset, tgt_strides). Strides are the shards' row-major strides; a 0-D
// segment has empty vectors and moves one element.
struct Segment {
    int src_rank = 0;
    int64_t src_offset = 0;
    std::vector<int64_t> src_strides;
    int tgt_rank = 0;
    int64_t tgt_offset = 0;
    std::vector<int64_t> tgt_strides;
    std::vector<int64_t> extents;
    bool operator==(const Segment&) const = default;
};

struct Plan {
    std::vector<int64_t> shape;     // the logical shape both maps describe
    std::vector<Segment> segments;  // canonical order: (tgt_rank, tgt_offset, src_rank, src_offset)
    uint64_t digest = 0;            // plan_digest(shape, segments)
    bool operator==(const Plan&) const = default;
};

struct Budgets {
    std::size_t max_pieces = std::size_t(1) << 20;    // per map, summed over ranks
    std::size_t max_segments = std::size_t(1) << 22;  // in the returned plan
    std::size_t max_dims = kMaxDims;
};

// What the selector is told about one region of a target piece whose elements several source ranks
// hold (the same ranks for every element of the region). It is never asked about an element that
// only one rank holds; it may be asked about several adjacent regions of one target piece.
struct ReplicaQuery {
    int tgt_rank = 0;
    std::vector<int64_t> logical_corner;  // region start in the logical tensor (multi-index)
    std::vector<int64_t> extents;
};
// Returns the rank to read the region from; must be one of `candidates` (ascending, size >= 2).
using ReplicaSelector = std::function<int(const std::vector<int>& candidates, const ReplicaQuery& query)>;

// Refusal order: budgets (dims, pieces), source map, target map, shapes, scale, then while
// planning: target not held, invalid replica choice, segment budget. Never a partial plan.
Result<Plan> plan(const Map& source, const Map& target, const Budgets& budgets = {},
                  const ReplicaSelector& selector = nullptr);

// A 64-bit FNV-1a-style hash (a 64-bit word per step) over the shape and every segment field, in
// canonical order.
uint64_t plan_digest(const std::vector<int64_t>& shape, const std::vector<Segment>& segments);
// What ranks compare before a transfer (AFF-AGREE): the plan, the element size and the staging
// budget (seed bug: a digest that ignored the element type let ranks disagree silently).
uint64_t agreement_digest(const Plan& plan, std::size_t elem_size, uint64_t budget);

// ---- reference executor ----
// Checks every segment against the buffers first (nothing is written on a refusal), then copies
// element by element. Target ranks not named by any segment are left untouched.
std::optional<Refusal> execute_reference(const Plan& plan, const Shards& src, Shards& tgt, std::size_t elem_size);
// How many times the plan writes each element of each target shard (rank -> counts, row-major).
// AFF-PLAN-EXACT holds when every count is exactly 1.
Result<std::map<int, std::vector<uint32_t>>> coverage_count(const Plan& plan, const Map& target);

}  // namespace xmc::affine
