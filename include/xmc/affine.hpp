// xmc affine transfer model (SPEC 5, AFF): maps, their validation, builders, the planner, and the
// plain oracle that executes plans element by element. Pure C++: no OS or driver calls.
// Two libraries implement it: xmc_affine_model (reference/model/affine: everything but the planner,
// written as the oracle) and xmc_affine (reference/affine: plan() and the digests, the tuned
// planner under test; it links xmc_affine_model, so users link xmc_affine alone).
//
// Conventions used throughout:
// - A logical tensor has a shape of 0..8 dims; a 0-D tensor (shape {}) holds one element.
// - Every shard is a dense row-major array of its shard_shape (0..8 dims). A shard with as many
//   dims as the tensor holds each piece as a box of the shard. A shard with any other number of
//   dims is flat (AFF-MAP-FLAT; a ZeRO-3 partition is a 1-D shard of a 2-D parameter): its
//   elements are counted 0 .. numel(shard_shape) - 1 in row-major order, and each piece is one run
//   of them, in the piece's own row-major order.
// - A shard may declare padding: elements that hold no logical element and that no plan writes.
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
// tensor and at shard_offset + sum(i[d] * shard_strides[d]) in the shard (its row-major element
// index). extents and both strides have the tensor's number of dims. logical_strides are the
// tensor's row-major strides; shard_strides are the shard's row-major strides when the shard has
// the tensor's number of dims (the piece is a box of the shard), else the row-major strides of the
// piece's own extents (the piece is one run of a flat shard). Only axes of extent > 1 are checked.
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

// Elements offset .. offset + count - 1 of a shard, counted in the shard's row-major order.
struct Span {
    int64_t offset = 0;
    int64_t count = 0;
    bool operator==(const Span&) const = default;
};

struct RankLayout {
    int rank = 0;
    std::vector<int64_t> shard_shape;
    std::vector<Piece> pieces;
    // AFF-MAP-FLAT: the shard's padding (disjoint spans, any order): elements that hold no logical
    // element; no piece covers them and no plan writes them. The pieces tile the other elements.
    std::vector<Span> padding;
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
    ShardWithoutPieces,  // a shard with elements other than padding but no pieces (seed bug: silently never written)
    // AFF-MAP-FLAT: padding
    PaddingOutsideShard,  // a padding span with a negative offset or count, or leaving its shard
    PaddingOverlap,       // two padding spans share an element
    PaddingWritten,       // a piece covers a padding element
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

// ---- AFF-MAP-VALID, AFF-MAP-FLAT ----
// nullopt for a valid map, else the first problem found, checked in this order: form (dims, sizes,
// vector lengths, rank labels, locations naming distinct declared ranks including the holder);
// then per rank: padding inside the shard, a shard with elements other than padding but no pieces,
// strides, pieces inside tensor and shard, shard tiled exactly (pieces overlapping, a piece on
// padding, padding spans overlapping, then a gap); then across ranks: pieces with different
// locations sharing an element, and locations that differ from the ranks actually holding an element.
// Empty pieces hold nothing: only their strides and non-negative offsets are checked.
std::optional<Refusal> validate(const Map& map);
// Which elements of a valid rank layout's shard are padding (numel(shard_shape) flags, row-major).
std::vector<bool> padding_mask(const RankLayout& rank);

// ---- JSON files ----
// from_json parses only (call validate() for the map's meaning); it never throws. A rank's padding
// is "padding": [[offset, count], ...], optional (none by default) and written only when declared.
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

// AFF-MAP-FLAT: the pieces of `rank` holding elements begin .. end - 1 of the tensor's row-major
// flattening, stored from element `shard_offset` of a flat shard on: as few boxes as cover the
// range (a range that starts or ends inside a row gives partial rows, then whole rows, planes, ...:
// at most 2 * dims - 1), each one run of the shard. Empty for an empty range.
std::vector<Piece> flat_pieces(const std::vector<int64_t>& shape, int64_t begin, int64_t end, int64_t shard_offset,
                               int rank);

// AFF-MAP-FLAT: several parameters in DeepSpeed ZeRO's flat layout. The parameters are
// concatenated, each starting at a multiple of `alignment` elements, into one flat buffer padded
// at its end to a multiple of ranks.size() * alignment; rank ranks[k] holds partition k, the k-th
// of ranks.size() equal runs. One map per parameter: its shard on a rank is the part of that
// rank's partition from the parameter's start (or the partition's) to the next parameter's start
// (or the buffer's end), a 1-D shard (1-D parameters: the same, a box of it) whose elements
// past the parameter's last one are padding. A rank that holds none of it declares an empty shard.
// Every element of a partition thus belongs to exactly one parameter's shard. A parameter's
// shard on ranks[k] starts at element offsets[p][k] of that rank's partition.
struct FlatPartition {
    int64_t partition = 0;                      // elements per rank
    std::vector<int64_t> starts;                // each parameter's first element in the flat buffer
    std::vector<Map> maps;                      // one per parameter, ranks in the order given
    std::vector<std::vector<int64_t>> offsets;  // [parameter][rank position]: the shard's start in the partition
};
FlatPartition zero3_flat(const std::vector<std::vector<int64_t>>& shapes, const std::vector<int>& ranks,
                         int64_t alignment);

// ---- oracle (AFF-PLAN-EXACT) ----
using Bytes = std::vector<uint8_t>;
using Shards = std::map<int, Bytes>;  // rank -> its shard, row-major, numel(shard_shape) * elem_size bytes
// The shard `rank` holds, copied out of the full row-major logical tensor. The map must be valid.
// Its padding is zeros (no plan writes it: compare it with padding_mask()).
Result<Bytes> extract_shard(const Map& map, int rank, std::span<const uint8_t> full, std::size_t elem_size);
// The full tensor rebuilt from shards; refuses an element no shard holds and replicas that disagree.
Result<Bytes> rebuild_full(const Map& map, const Shards& shards, std::size_t elem_size);

// ---- planner (AFF-PLAN-*, AFF-REPLICA, AFF-SCALAR; reference/affine) ----
// Copy the box `extents` from src_rank's shard (starting at element src_offset, strides src_strides)
// to tgt_rank's shard (tgt_offset, tgt_strides). Offsets are shard element indices (row-major);
// the strides are the piece's: the shard's row-major strides for a box of the shard, the row-major
// strides of the piece's extents for a run of a flat shard (AFF-MAP-FLAT). A 0-D segment has empty
// vectors and moves one element.
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

// ---- reference executor (oracle; reference/model/affine) ----
// Checks every segment against the buffers first (nothing is written on a refusal), then copies
// element by element. Target ranks not named by any segment are left untouched.
std::optional<Refusal> execute_reference(const Plan& plan, const Shards& src, Shards& tgt, std::size_t elem_size);
// How many times the plan writes each element of each target shard (rank -> counts, row-major).
// AFF-PLAN-EXACT holds when every count is exactly 1, and 0 on padding (AFF-MAP-FLAT).
Result<std::map<int, std::vector<uint32_t>>> coverage_count(const Plan& plan, const Map& target);

}  // namespace xmc::affine
