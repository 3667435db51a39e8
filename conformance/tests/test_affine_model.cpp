// Tests of the pure affine transfer model (SPEC 5, AFF): map validation, JSON files, the planner,
// replicas, scalars, and the reference executor. Each test name carries its requirement ID.
#include "transfer_env.hpp"  // gen_flat_map (AFF-MAP-FLAT)

#include <xmc/affine.hpp>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <random>
#include <set>

using namespace xmc::affine;
using Shape = std::vector<int64_t>;

namespace {

// ---------- helpers ----------

void expect_refused(const Map& m, Reason want) {
    auto r = validate(m);
    ASSERT_TRUE(r.has_value()) << "map was accepted, expected " << reason_name(want);
    EXPECT_EQ(r->reason, want) << reason_name(r->reason) << ": " << r->message;
    EXPECT_FALSE(r->message.empty());
}

void expect_plan_refused(const Result<Plan>& p, Reason want) {
    ASSERT_FALSE(p.ok()) << "plan was produced, expected " << reason_name(want);
    EXPECT_FALSE(p.value.has_value());  // never a partial plan
    EXPECT_EQ(p.refusal.reason, want) << reason_name(p.refusal.reason) << ": " << p.refusal.message;
}

// A valid 4x6 map: rows 0-1 on rank 0, rows 2-3 on rank 1.
Map rows2() { return split_even({4, 6}, 0, {0, 1}); }

// Non-zero bytes that differ from element to element (for any element size > 1).
Bytes tensor_bytes(const Shape& shape, std::size_t elem, uint64_t seed) {
    Bytes b(std::size_t(numel(shape)) * elem);
    for (std::size_t i = 0; i < b.size(); ++i) {
        uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 31;
        b[i] = uint8_t(x % 255 + 1);
    }
    return b;
}

Shards shards_of(const Map& m, const Bytes& full, std::size_t elem) {
    Shards s;
    for (const RankLayout& r : m.ranks) s[r.rank] = *extract_shard(m, r.rank, full, elem);
    return s;
}

Shards zeroed_shards(const Map& m, std::size_t elem) {
    Shards s;
    for (const RankLayout& r : m.ranks) s[r.rank] = Bytes(std::size_t(numel(r.shard_shape)) * elem, 0);
    return s;
}

constexpr uint8_t kUnwritten = 0xEE;  // what target shards hold before a plan runs (never a data byte)

Shards poisoned_shards(const Map& m, std::size_t elem) {
    Shards s;
    for (const RankLayout& r : m.ranks) s[r.rank] = Bytes(std::size_t(numel(r.shard_shape)) * elem, kUnwritten);
    return s;
}

// What a target shard holds after an exact plan ran on poisoned shards: the extraction, its padding
// (AFF-MAP-FLAT) still poisoned.
Bytes expected_shard(const Map& m, const RankLayout& r, const Bytes& full, std::size_t elem) {
    Bytes want = *extract_shard(m, r.rank, full, elem);
    const std::vector<bool> pad = padding_mask(r);
    for (std::size_t i = 0; i < pad.size(); ++i)
        if (pad[i]) std::fill_n(want.begin() + std::ptrdiff_t(i * elem), elem, kUnwritten);
    return want;
}

// AFF-PLAN-EXACT: every element of every target shard written once, its padding never.
bool written_exactly_once(const Plan& p, const Map& tgt) {
    auto counts = coverage_count(p, tgt);
    if (!counts.ok()) return false;
    for (const RankLayout& r : tgt.ranks) {
        const std::vector<bool> pad = padding_mask(r);
        const auto& c = counts->at(r.rank);
        for (std::size_t i = 0; i < c.size(); ++i)
            if (c[i] != (pad[i] ? 0u : 1u)) return false;
    }
    return true;
}

// Plans, executes on fresh data, and checks AFF-PLAN-EXACT: result equals extraction from the full
// tensor, every target element written exactly once (padding never). Returns the plan.
Plan plan_and_check(const Map& src, const Map& tgt, std::size_t elem, const ReplicaSelector& sel = nullptr) {
    auto p = plan(src, tgt, {}, sel);
    EXPECT_TRUE(p.ok()) << reason_name(p.refusal.reason) << ": " << p.refusal.message;
    if (!p.ok()) return {};
    Bytes full = tensor_bytes(src.shape, elem, 7);
    Shards in = shards_of(src, full, elem), out = poisoned_shards(tgt, elem);
    EXPECT_FALSE(execute_reference(*p, in, out, elem).has_value());
    for (const RankLayout& r : tgt.ranks) EXPECT_EQ(out[r.rank], expected_shard(tgt, r, full, elem)) << r.rank;
    EXPECT_TRUE(written_exactly_once(*p, tgt));
    return *p;
}

// ---------- random layouts (rapidcheck) ----------

// Uniform in [lo, hi) whatever rapidcheck's current size (plain inRange favours small values early).
template <class T>
T pick(T lo, T hi) {
    return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

std::vector<int> gen_ranks() {
    std::vector<int> pool{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::mt19937_64 g(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(pool.begin(), pool.end(), g);
    pool.resize(std::size_t(pick(1, 5)));
    return pool;
}

Shape gen_shape(int max_dims) {
    Shape s(std::size_t(pick(0, max_dims + 1)));
    for (auto& d : s) d = pick(0, 13) == 0 ? 0 : pick<int64_t>(1, 6);  // now and then an empty axis
    return s;
}

// n sizes >= 0 summing to total.
std::vector<int64_t> gen_sizes(int64_t total, std::size_t n) {
    std::vector<int64_t> cuts{0, total};
    for (std::size_t i = 1; i < n; ++i) cuts.push_back(pick<int64_t>(0, total + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    for (std::size_t i = 1; i < cuts.size(); ++i) sizes.push_back(cuts[i] - cuts[i - 1]);
    return sizes;
}

// A random layout from the builders: replicated, even split, uneven split, block-cyclic, block rows
// (replicated head, split tail), and split parts replicated over random groups of ranks.
Map gen_builder_layout(const Shape& shape) {
    const std::vector<int> ranks = gen_ranks();
    if (shape.empty()) return replicated(shape, ranks);
    const std::size_t axis = pick<std::size_t>(0, shape.size());
    switch (pick(0, 6)) {
        case 0: return replicated(shape, ranks);
        case 1: return split_even(shape, axis, ranks);
        case 2: return split_sizes(shape, axis, gen_sizes(shape[axis], ranks.size()), ranks);
        case 3: return block_cyclic(shape, axis, pick<int64_t>(1, shape[axis] + 2), ranks);
        case 4: return block_rows(shape, pick<int64_t>(0, shape[0] + 1), ranks);
        default: {
            auto sizes = gen_sizes(shape[axis], std::size_t(pick(1, 4)));
            std::vector<std::vector<int>> holders;
            for (std::size_t k = 0; k < sizes.size(); ++k) {
                std::vector<int> h;
                for (int r : ranks)
                    if (*rc::gen::arbitrary<bool>()) h.push_back(r);
                if (h.empty()) h.push_back(ranks[k % ranks.size()]);
                holders.push_back(h);
            }
            return split(shape, axis, sizes, holders);
        }
    }
}

Map gen_builder_layout(const Shape& shape);
Map gen_recuts(Map m);
// A builder layout, with now and then some of its pieces cut in two.
Map gen_layout(const Shape& shape) { return gen_recuts(gen_builder_layout(shape)); }

// The same map with one piece cut in two along `axis` (at `at`, inside the piece): replicas of it
// on other ranks are now cut differently.
Map recut(Map m, std::size_t rank_idx, std::size_t piece_idx, std::size_t axis, int64_t at) {
    RankLayout& r = m.ranks[rank_idx];
    Piece a = r.pieces[piece_idx], b = a;
    a.extents[axis] = at;
    b.extents[axis] -= at;
    b.logical_offset += at * row_major_strides(m.shape)[axis];
    b.shard_offset += at * row_major_strides(r.shard_shape)[axis];
    a.logical_strides = b.logical_strides = row_major_strides(m.shape);  // axis may now walk
    a.shard_strides = b.shard_strides = row_major_strides(r.shard_shape);
    r.pieces[piece_idx] = a;
    r.pieces.push_back(b);
    return m;
}

// Cuts random pieces of a map a few times.
Map gen_recuts(Map m) {
    for (int n = pick(0, 4); n > 0 && !m.shape.empty(); --n) {
        const std::size_t ri = pick<std::size_t>(0, m.ranks.size());
        if (m.ranks[ri].pieces.empty()) continue;
        const std::size_t pi = pick<std::size_t>(0, m.ranks[ri].pieces.size()), axis = pick<std::size_t>(0, m.shape.size());
        const int64_t ext = m.ranks[ri].pieces[pi].extents[axis];
        if (ext >= 2) m = recut(m, ri, pi, axis, pick<int64_t>(1, ext));
    }
    return m;
}

// The same map with ranks and pieces listed in another order.
Map shuffled(Map m, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::shuffle(m.ranks.begin(), m.ranks.end(), g);
    for (auto& r : m.ranks) std::shuffle(r.pieces.begin(), r.pieces.end(), g);
    return m;
}

Map relabeled(Map m, const std::function<int(int)>& f) {
    for (auto& r : m.ranks) {
        r.rank = f(r.rank);
        for (auto& p : r.pieces)
            for (int& l : p.locations) l = f(l);
    }
    return m;
}

}  // namespace

// ===================== AFF-MAP-VALID =====================

TEST(AffineModel, AFF_MAP_VALID_AcceptsBuilderLayouts) {
    for (const Map& m : {replicated({4, 6}, {3, 9}), replicated({}, {0}), rows2(), split_even({5, 3}, 1, {0, 1, 2}),
                         split_sizes({6, 2}, 0, {0, 4, 2}, {2, 0, 1}), block_cyclic({7, 3, 2}, 1, 1, {0, 1}),
                         block_rows({6, 4}, 2, {1, 4}), split({4, 4}, 0, {1, 3}, {{0, 1}, {2, 3}}),
                         replicated({0, 3}, {0, 1})})
        EXPECT_FALSE(validate(m).has_value()) << validate(m)->message << "\n" << to_json(m);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesGapInShard) {
    Map m = rows2();
    m.ranks[0].pieces[0].extents = {1, 6};  // shard row 1 covered by nothing
    expect_refused(m, Reason::ShardGap);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesOverlapInShard) {
    Map m = rows2();
    Piece p = m.ranks[0].pieces[0];
    p.extents = {1, 6};
    Piece q = p;
    q.logical_offset = 6;  // logical row 1, but written to shard row 0 again
    m.ranks[0].pieces = {p, q, p};
    m.ranks[0].pieces[2].extents = {2, 6};  // and a whole-shard piece on top of both
    expect_refused(m, Reason::ShardOverlap);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesPieceLeavingLogicalTensor) {
    Map m = rows2();
    m.ranks[1].pieces[0].logical_offset = 18;  // rows 3-4 of a 4-row tensor
    expect_refused(m, Reason::PieceOutsideTensor);
    m.ranks[1].pieces[0].logical_offset = 24;  // starts past the end
    expect_refused(m, Reason::PieceOutsideTensor);
    Map c = split_even({2, 6}, 1, {0, 1});  // columns 3-5 on rank 1; move them to column 4
    c.ranks[1].pieces[0].logical_offset = 4;
    expect_refused(c, Reason::PieceOutsideTensor);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesPieceLeavingShard) {
    Map m = rows2();
    m.ranks[0].pieces[0].shard_offset = 6;
    expect_refused(m, Reason::PieceOutsideShard);
    m.ranks[0].pieces[0].shard_offset = -1;
    expect_refused(m, Reason::PieceOutsideShard);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesNonRowMajorLogicalStrides) {
    Map m = rows2();
    m.ranks[0].pieces[0].logical_strides = {1, 4};  // a transposed view
    expect_refused(m, Reason::NotRowMajor);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesNonRowMajorShardStrides) {
    Map m = split_even({2, 6}, 1, {0, 1});
    m.ranks[1].pieces[0].shard_strides = {6, 1};  // the tensor's strides, not the 2x3 shard's
    expect_refused(m, Reason::NotRowMajor);
}

TEST(AffineModel, AFF_MAP_VALID_IgnoresStridesOnAxesOfExtentOne) {
    Map m = split_even({2, 6}, 0, {0, 1});  // pieces of extent 1 along axis 0
    m.ranks[0].pieces[0].logical_strides[0] = 12345;
    m.ranks[0].pieces[0].shard_strides[0] = -7;
    EXPECT_FALSE(validate(m).has_value());
}

TEST(AffineModel, AFF_MAP_VALID_RefusesOverlapWithDifferentLocations) {
    Map m = replicated({4, 6}, {0, 1});
    m.ranks[0].pieces[0].locations = {0};  // rank 0 claims sole ownership of what rank 1 also holds
    m.ranks[1].pieces[0].locations = {1};
    expect_refused(m, Reason::LocationsOverlap);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesLocationsNotHoldingThePiece) {
    Map m = rows2();
    m.ranks[0].pieces[0].locations = {0, 1};  // rank 1 is named but holds rows 2-3, not rows 0-1
    expect_refused(m, Reason::LocationsNotHeld);
    m = replicated({4, 6}, {0, 1, 2});
    m.ranks[2].pieces[0].locations = {2};  // ...and pieces naming too few holders: different locations overlap
    expect_refused(m, Reason::LocationsOverlap);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesShardWithoutPieces) {
    Map m = rows2();
    m.ranks[1].pieces.clear();
    expect_refused(m, Reason::ShardWithoutPieces);
    m.ranks[1].shard_shape = {0, 6};  // an empty shard needs no pieces
    EXPECT_FALSE(validate(m).has_value());
}

TEST(AffineModel, AFF_MAP_VALID_RefusesTooManyDims) {
    expect_refused(replicated(Shape(9, 1), {0}), Reason::TooManyDims);
    EXPECT_FALSE(validate(replicated(Shape(8, 1), {0})).has_value());
}

TEST(AffineModel, AFF_MAP_VALID_RefusesNegativeExtent) {
    Map m = rows2();
    m.shape[1] = -6;
    expect_refused(m, Reason::NegativeExtent);
    m = rows2();
    m.ranks[0].pieces[0].extents[0] = -2;
    expect_refused(m, Reason::NegativeExtent);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesArityMismatch) {
    Map m = rows2();
    m.ranks[0].pieces[0].shard_strides = {1};
    expect_refused(m, Reason::ArityMismatch);
    m = rows2();
    m.ranks[1].pieces[0].extents = {12};  // (a shard_shape of another arity is a flat shard: AFF-MAP-FLAT)
    expect_refused(m, Reason::ArityMismatch);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesSizeOverflow) {
    expect_refused(Map{{int64_t(1) << 40, int64_t(1) << 40}, {}}, Reason::SizeOverflow);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesBadRankLabels) {
    Map m = rows2();
    m.ranks[1].rank = 0;
    expect_refused(m, Reason::BadRankLabel);
    expect_refused(replicated({2}, {-1}), Reason::BadRankLabel);
}

TEST(AffineModel, AFF_MAP_VALID_RefusesBadLocations) {
    Map m = rows2();
    m.ranks[0].pieces[0].locations = {1};  // not the holding rank
    expect_refused(m, Reason::BadLocations);
    m.ranks[0].pieces[0].locations = {0, 5};  // rank 5 is not declared
    expect_refused(m, Reason::BadLocations);
    m.ranks[0].pieces[0].locations = {};
    expect_refused(m, Reason::BadLocations);
    m.ranks[0].pieces[0].locations = {0, 0};
    expect_refused(m, Reason::BadLocations);
}

TEST(AffineModel, AFF_MAP_VALID_ReasonsHaveDistinctNames) {
    std::set<std::string> names;
    for (int r = 0; r <= int(Reason::ReplicaMismatch); ++r) names.insert(reason_name(Reason(r)));
    EXPECT_EQ(names.size(), std::size_t(int(Reason::ReplicaMismatch) + 1));
    EXPECT_EQ(names.count("?"), 0u);
}

TEST(AffineModel, AFF_MAP_VALID_JsonRoundTrip) {
    for (const Map& m : {replicated({}, {3, 9}), split_even({5, 3}, 1, {0, 1, 2}), block_rows({6, 4}, 2, {1, 4}),
                         split_sizes({6, 2}, 0, {0, 4, 2}, {2, 0, 1})}) {
        auto back = from_json(to_json(m));
        ASSERT_TRUE(back.ok()) << back.refusal.message;
        EXPECT_EQ(*back, m);
    }
    auto m = from_json(R"({"shape":[2],"ranks":[{"rank":4,"shard_shape":[2],"pieces":[{"extents":[2],
        "logical_offset":0,"logical_strides":[1],"shard_offset":0,"shard_strides":[1],"locations":[4]}]}]})");
    ASSERT_TRUE(m.ok()) << m.refusal.message;  // scale defaults to 1
    EXPECT_EQ(*m, replicated({2}, {4}));
}

RC_GTEST_PROP(AffineModel, AFF_MAP_VALID_JsonRoundTripRandomLayouts, ()) {
    Map m = gen_layout(gen_shape(4));
    RC_ASSERT(!validate(m).has_value());
    auto back = from_json(to_json(m));
    RC_ASSERT(back.ok());
    RC_ASSERT(*back == m);
}

TEST(AffineModel, AFF_MAP_VALID_JsonRefusesMalformed) {
    const std::string piece = R"("extents":[2],"logical_offset":0,"logical_strides":[1],"shard_offset":0,"shard_strides":[1])";
    struct Case {
        std::string text;
        Reason want;
    } cases[] = {
        {"", Reason::MalformedJson},
        {"{", Reason::MalformedJson},
        {R"({"shape":[2],})", Reason::MalformedJson},
        {std::string(100000, '[') + std::string(100000, ']'), Reason::MalformedField},  // deep, but valid JSON
        {std::string(100000, '['), Reason::MalformedJson},
        {"null", Reason::MalformedField},
        {"[]", Reason::MalformedField},
        {R"({"ranks":[]})", Reason::MalformedField},
        {R"({"shape":[2]})", Reason::MalformedField},
        {R"({"shape":2,"ranks":[]})", Reason::MalformedField},
        {R"({"shape":[2.5],"ranks":[]})", Reason::MalformedField},
        {R"({"shape":["2"],"ranks":[]})", Reason::MalformedField},
        {R"({"shape":[18446744073709551615],"ranks":[]})", Reason::MalformedField},
        {R"({"shape":[1e30],"ranks":[]})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":{}})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":[7]})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":[{"rank":4294967296,"shard_shape":[2],"pieces":[]}]})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":[{"rank":0,"shard_shape":[2]}]})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":[{"rank":0,"shard_shape":[2],"pieces":[{"extents":[2]}]}]})", Reason::MalformedField},
        {R"({"shape":[2],"ranks":[{"rank":0,"shard_shape":[2],"pieces":[{)" + piece + R"(,"locations":[0],"scale":"x"}]}]})",
         Reason::MalformedField},
        {R"({"shape":[2],"ranks":[{"rank":0,"shard_shape":[2],"pieces":[{)" + piece + R"(,"locations":0}]}]})",
         Reason::MalformedField},
    };
    for (const Case& c : cases) {
        Result<Map> r = Map{};
        EXPECT_NO_THROW(r = from_json(c.text)) << c.text.substr(0, 80);
        ASSERT_FALSE(r.ok()) << c.text.substr(0, 80);
        EXPECT_EQ(r.refusal.reason, c.want) << c.text.substr(0, 80) << " -> " << r.refusal.message;
    }
}

// ===================== AFF-PLAN-EXACT =====================

TEST(AffineModel, AFF_PLAN_EXACT_RowsToColumns) {
    Plan p = plan_and_check(split_even({4, 6}, 0, {0, 1}), split_even({4, 6}, 1, {0, 1, 2}), 4);
    EXPECT_EQ(p.segments.size(), 6u);  // each (row half, column third) box is one segment
}

TEST(AffineModel, AFF_PLAN_EXACT_IdentityIsOneSegmentPerRank) {
    Plan p = plan_and_check(block_cyclic({8, 3}, 0, 2, {0, 1}), block_cyclic({8, 3}, 0, 2, {0, 1}), 2);
    ASSERT_EQ(p.segments.size(), 2u);  // adjacent blocks in both shards coalesce
    for (const Segment& s : p.segments) EXPECT_EQ(s.src_rank, s.tgt_rank);
}

RC_GTEST_PROP(AffineModel, AFF_PLAN_EXACT_RandomLayouts, ()) {
    const Shape shape = gen_shape(4);
    const Map src = gen_layout(shape), tgt = gen_layout(shape);
    const std::size_t elem = *rc::gen::element<std::size_t>(1, 2, 4, 8);
    const Bytes full = tensor_bytes(shape, elem, *rc::gen::arbitrary<uint64_t>());
    // Half of the cases read replicas through a selector that picks pseudo-randomly.
    ReplicaSelector sel;
    if (*rc::gen::arbitrary<bool>())
        sel = [salt = *rc::gen::arbitrary<uint64_t>()](const std::vector<int>& c, const ReplicaQuery& q) {
            RC_ASSERT(c.size() >= 2u);
            RC_ASSERT(std::is_sorted(c.begin(), c.end()));
            return c[std::size_t(salt + uint64_t(q.tgt_rank) + uint64_t(q.logical_corner.empty() ? 0 : q.logical_corner[0])) % c.size()];
        };
    auto p = plan(src, tgt, {}, sel);
    RC_ASSERT(p.ok());
    Shards in = shards_of(src, full, elem), out = zeroed_shards(tgt, elem);
    RC_ASSERT(!execute_reference(*p, in, out, elem).has_value());
    for (const RankLayout& r : tgt.ranks) RC_ASSERT(out[r.rank] == *extract_shard(tgt, r.rank, full, elem));
    auto counts = coverage_count(*p, tgt);
    RC_ASSERT(counts.ok());
    for (const auto& [rank, c] : *counts) RC_ASSERT(std::all_of(c.begin(), c.end(), [](uint32_t x) { return x == 1; }));
    // Every segment reads from a declared source rank, and the oracle round trip holds.
    for (const Segment& s : p->segments) RC_ASSERT(in.count(s.src_rank) == 1u);
    RC_ASSERT(*rebuild_full(src, in, elem) == full);
}

TEST(AffineModel, AFF_PLAN_EXACT_ExecutorRefusesBeforeWriting) {
    const Map src = rows2(), tgt = split_even({4, 6}, 1, {0, 1});
    Plan p = *plan(src, tgt);
    const Bytes full = tensor_bytes({4, 6}, 4, 1);
    const Shards in = shards_of(src, full, 4);
    Plan bad = p;
    bad.segments.back().tgt_offset = 10;  // runs past the end of its 12-element target shard
    Shards out = zeroed_shards(tgt, 4);
    const Shards before = out;
    auto r = execute_reference(bad, in, out, 4);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->reason, Reason::SegmentOutOfBounds);
    EXPECT_EQ(out, before);  // the good segments listed first were not written either
    EXPECT_EQ(coverage_count(bad, tgt).refusal.reason, Reason::SegmentOutOfBounds);
    EXPECT_EQ(execute_reference(p, in, out, 0)->reason, Reason::BadElementSize);
    Shards missing = out;
    missing.erase(1);
    EXPECT_EQ(execute_reference(p, in, missing, 4)->reason, Reason::UnknownRank);
}

TEST(AffineModel, AFF_PLAN_EXACT_OracleRefusesBadShards) {
    const Map m = replicated({3}, {0, 1});
    Shards s{{0, {1, 2, 3}}, {1, {1, 2, 4}}};
    EXPECT_EQ(rebuild_full(m, s, 1).refusal.reason, Reason::ReplicaMismatch);
    s[1] = {1, 2};
    EXPECT_EQ(rebuild_full(m, s, 1).refusal.reason, Reason::BufferMismatch);
    EXPECT_EQ(extract_shard(m, 5, Bytes(3), 1).refusal.reason, Reason::UnknownRank);
    EXPECT_EQ(extract_shard(m, 0, Bytes(2), 1).refusal.reason, Reason::BufferMismatch);
    Map holed = rows2();
    holed.ranks.pop_back();  // rows 2-3 held by no one
    EXPECT_EQ(rebuild_full(holed, {{0, Bytes(12)}}, 1).refusal.reason, Reason::TargetNotHeld);
}

// ===================== AFF-PLAN-REFUSE =====================

TEST(AffineModel, AFF_PLAN_REFUSE_DifferentShapes) {
    expect_plan_refused(plan(rows2(), split_even({4, 5}, 0, {0, 1})), Reason::ShapeMismatch);
    expect_plan_refused(plan(replicated({}, {0}), replicated({1}, {0})), Reason::ShapeMismatch);
}

TEST(AffineModel, AFF_PLAN_REFUSE_TargetElementNoSourceHolds) {
    Map src = rows2();
    src.ranks.pop_back();  // a valid map that holds only rows 0-1
    expect_plan_refused(plan(src, replicated({4, 6}, {0})), Reason::TargetNotHeld);
    Map head = rows2();
    head.ranks.pop_back();  // a target that needs only rows 0-1 is fine
    plan_and_check(src, head, 4);
}

TEST(AffineModel, AFF_PLAN_REFUSE_ScaleNotOne) {
    Map src = rows2(), tgt = replicated({4, 6}, {2});
    src.ranks[1].pieces[0].scale = 0.5;
    expect_plan_refused(plan(src, tgt), Reason::ScaleNotOne);
    tgt.ranks[0].pieces[0].scale = 2.0;
    expect_plan_refused(plan(rows2(), tgt), Reason::ScaleNotOne);
}

TEST(AffineModel, AFF_PLAN_REFUSE_PiecesOverBudget) {
    const Map src = block_cyclic({8, 2}, 0, 1, {0, 1}), tgt = replicated({8, 2}, {0});  // 8 source pieces
    expect_plan_refused(plan(src, tgt, Budgets{.max_pieces = 7}), Reason::PiecesOverBudget);
    EXPECT_TRUE(plan(src, tgt, Budgets{.max_pieces = 8}).ok());
}

TEST(AffineModel, AFF_PLAN_REFUSE_SegmentsOverBudget) {
    const Map src = rows2(), tgt = split_even({4, 6}, 1, {0, 1, 2});  // needs 6 segments
    expect_plan_refused(plan(src, tgt, Budgets{.max_segments = 5}), Reason::SegmentsOverBudget);
    EXPECT_TRUE(plan(src, tgt, Budgets{.max_segments = 6}).ok());
}

TEST(AffineModel, AFF_PLAN_REFUSE_DimsOverBudget) {
    const Map m = split_even({2, 2, 2}, 2, {0, 1});
    expect_plan_refused(plan(m, m, Budgets{.max_dims = 2}), Reason::DimsOverBudget);
    EXPECT_TRUE(plan(m, m, Budgets{.max_dims = 3}).ok());
}

TEST(AffineModel, AFF_PLAN_REFUSE_InvalidMaps) {
    Map tgt = split_even({4, 6}, 0, {0, 1});
    tgt.ranks[1].pieces.clear();  // seed bug: a declared target shard that is silently never written
    auto p = plan(rows2(), tgt);
    expect_plan_refused(p, Reason::ShardWithoutPieces);
    EXPECT_NE(p.refusal.message.find("target map"), std::string::npos);
    Map src = rows2();
    src.ranks[0].pieces[0].extents = {1, 6};
    expect_plan_refused(plan(src, rows2()), Reason::ShardGap);
}

// ===================== AFF-PLAN-DETERMINISTIC =====================

RC_GTEST_PROP(AffineModel, AFF_PLAN_DETERMINISTIC_ShuffledInput, ()) {
    const Shape shape = gen_shape(3);
    const Map src = gen_layout(shape), tgt = gen_layout(shape);
    auto a = plan(src, tgt);
    auto b = plan(shuffled(src, *rc::gen::arbitrary<uint64_t>()), shuffled(tgt, *rc::gen::arbitrary<uint64_t>()));
    RC_ASSERT(a.ok() && b.ok());
    RC_ASSERT(*a == *b);
    RC_ASSERT(a->digest == plan_digest(a->shape, a->segments));
}

RC_GTEST_PROP(AffineModel, AFF_PLAN_DETERMINISTIC_RanksAreLabels, ()) {
    // An order-preserving relabeling (0..9 -> 3, 9, 15, ...) gives the same plan, relabeled.
    const Shape shape = gen_shape(3);
    const Map src = gen_layout(shape), tgt = gen_layout(shape);
    auto f = [](int r) { return 3 + 6 * r; };
    auto a = plan(src, tgt);
    auto b = plan(relabeled(src, f), relabeled(tgt, f));
    RC_ASSERT(a.ok() && b.ok());
    RC_ASSERT(a->segments.size() == b->segments.size());
    for (std::size_t i = 0; i < a->segments.size(); ++i) {
        Segment s = a->segments[i];
        s.src_rank = f(s.src_rank);
        s.tgt_rank = f(s.tgt_rank);
        RC_ASSERT(s == b->segments[i]);
    }
}

TEST(AffineModel, AFF_PLAN_DETERMINISTIC_Ranks3And9) {
    Plan p = plan_and_check(split_even({4, 6}, 0, {9, 3}), split_even({4, 6}, 1, {3, 9}), 8);
    std::set<int> used;
    for (const Segment& s : p.segments) used.insert(s.src_rank), used.insert(s.tgt_rank);
    EXPECT_EQ(used, (std::set<int>{3, 9}));
}

TEST(AffineModel, AFF_PLAN_DETERMINISTIC_DigestCoversSegmentsShapeElementSizeAndBudget) {
    Plan p = *plan(rows2(), split_even({4, 6}, 1, {0, 1}));
    Plan q = p;
    q.segments[0].extents[0] -= 1;
    EXPECT_NE(plan_digest(p.shape, p.segments), plan_digest(q.shape, q.segments));
    EXPECT_NE(plan_digest(p.shape, p.segments), plan_digest({24}, p.segments));
    // Seed bug: a digest that ignores the element type lets ranks disagree silently.
    EXPECT_NE(agreement_digest(p, 2, 1024), agreement_digest(p, 4, 1024));
    EXPECT_NE(agreement_digest(p, 4, 1024), agreement_digest(p, 4, 2048));
    EXPECT_NE(agreement_digest(p, 4, 1024), agreement_digest(q, 4, 1024));
    EXPECT_EQ(agreement_digest(p, 4, 1024), agreement_digest(*plan(rows2(), split_even({4, 6}, 1, {0, 1})), 4, 1024));
}

// ===================== AFF-REPLICA =====================

TEST(AffineModel, AFF_REPLICA_DefaultLowestHoldingRank) {
    Plan p = plan_and_check(replicated({4, 6}, {7, 2, 5}), split_even({4, 6}, 0, {0, 1}), 4);
    for (const Segment& s : p.segments) EXPECT_EQ(s.src_rank, 2);
    // Rows 0-1 are on ranks 4 and 1, rows 2-3 only on 4, rows 4-5 only on 1.
    p = plan_and_check(block_rows({6, 4}, 2, {4, 1}), replicated({6, 4}, {0}), 4);
    for (const Segment& s : p.segments)
        if (s.tgt_offset < 8) { EXPECT_EQ(s.src_rank, 1); }
}

TEST(AffineModel, AFF_REPLICA_SelectorAskedOnlyForReplicatedElements) {
    int calls = 0;
    ReplicaSelector pick4 = [&](const std::vector<int>& c, const ReplicaQuery& q) {
        ++calls;
        EXPECT_EQ(c, (std::vector<int>{1, 4}));
        EXPECT_EQ(q.tgt_rank, 0);
        EXPECT_LE(q.logical_corner[0] + q.extents[0], 2);  // only the replicated head rows
        return 4;
    };
    Plan p = plan_and_check(block_rows({6, 4}, 2, {1, 4}), replicated({6, 4}, {0}), 2, pick4);
    EXPECT_GE(calls, 1);
    for (const Segment& s : p.segments)
        if (s.tgt_offset < 8) { EXPECT_EQ(s.src_rank, 4); }
    calls = 0;
    plan_and_check(split_even({6, 4}, 1, {1, 4}), replicated({6, 4}, {0}), 2, pick4);
    EXPECT_EQ(calls, 0);  // nothing replicated: never asked
}

TEST(AffineModel, AFF_REPLICA_ReplicasCutDifferently) {
    // Rank 1 holds the replica as rows 0-2 and 3-5, rank 6 as columns 0-1 and 2-3: every element
    // still has holders {1, 6}, and the default reads it all from rank 1.
    Map src = recut(recut(replicated({6, 4}, {6, 1}), 0, 0, 0, 3), 1, 0, 1, 2);
    ASSERT_FALSE(validate(src).has_value());
    int calls = 0;
    ReplicaSelector pick6 = [&](const std::vector<int>& c, const ReplicaQuery&) {
        ++calls;
        EXPECT_EQ(c, (std::vector<int>{1, 6}));
        return 6;
    };
    for (const Segment& s : plan_and_check(src, replicated({6, 4}, {0}), 4).segments) EXPECT_EQ(s.src_rank, 1);
    for (const Segment& s : plan_and_check(src, replicated({6, 4}, {0}), 4, pick6).segments) EXPECT_EQ(s.src_rank, 6);
    EXPECT_GE(calls, 1);
}

TEST(AffineModel, AFF_REPLICA_AnswerNotACandidateRefused) {
    const Map src = block_rows({6, 4}, 2, {1, 4, 6}), tgt = replicated({6, 4}, {0});
    for (int answer : {99, 0, -1}) {
        auto p = plan(src, tgt, {}, [&](const std::vector<int>&, const ReplicaQuery&) { return answer; });
        expect_plan_refused(p, Reason::InvalidReplicaChoice);
    }
    // A declared rank that holds other rows but not these is not a candidate either.
    Map part = split({6, 4}, 0, {2, 4}, {{1, 4}, {6}});
    auto p = plan(part, tgt, {}, [](const std::vector<int>&, const ReplicaQuery&) { return 6; });
    expect_plan_refused(p, Reason::InvalidReplicaChoice);
}

// ===================== AFF-SCALAR =====================

TEST(AffineModel, AFF_SCALAR_ZeroDimTensorPlansAndExecutes) {
    for (std::size_t elem : {1u, 2u, 4u, 8u}) {
        Plan p = plan_and_check(replicated({}, {3, 9}), replicated({}, {9, 1}), elem);
        ASSERT_EQ(p.segments.size(), 2u);
        for (const Segment& s : p.segments) {
            EXPECT_TRUE(s.extents.empty());  // a 0-D segment: one element, no axes
            EXPECT_EQ(s.src_rank, 3);
        }
    }
}

TEST(AffineModel, AFF_SCALAR_EmptyPiecesPlanAndExecute) {
    plan_and_check(split_sizes({4, 3}, 0, {0, 4, 0}, {0, 1, 2}), split_sizes({4, 3}, 1, {3, 0}, {5, 6}), 4);
    Plan p = plan_and_check(replicated({0, 3}, {0}), split_even({0, 3}, 1, {1, 2}), 4);  // an empty tensor
    EXPECT_TRUE(p.segments.empty());
}

// ===================== AFF-MAP-FLAT =====================

namespace {

// A flat rank layout: a 1-D shard of `size` elements holding elements begin .. end - 1 of the
// tensor's flattening from shard element `at` on, the rest padding.
RankLayout flat_rank(int rank, const Shape& shape, int64_t size, int64_t begin, int64_t end, int64_t at = 0) {
    RankLayout r{rank, {size}, flat_pieces(shape, begin, end, at, rank), {}};
    if (at > 0) r.padding.push_back({0, at});
    if (at + end - begin < size) r.padding.push_back({at + end - begin, size - (at + end - begin)});
    return r;
}

// [4, 6] over ranks 0 and 1 as ZeRO-3 does it with a world of 2 and 14-element partitions: rank 0
// holds elements 0..13 (rows 0-1 and row 2's first two), rank 1 elements 14..23 and 4 of padding.
Map flat_4x6() { return Map{{4, 6}, {flat_rank(0, {4, 6}, 14, 0, 14), flat_rank(1, {4, 6}, 14, 14, 24)}}; }

// A random map of `shape`: a ZeRO-3 flat layout (gen_flat_map) or a builder layout.
Map gen_flat_or_builder(const Shape& shape) {
    if (*rc::gen::arbitrary<bool>()) return gen_layout(shape);
    return xmc::conformance::gen_flat_map(shape, gen_ranks());
}

}  // namespace

TEST(AffineModel, AFF_MAP_FLAT_OneDimensionalShardHoldsRowsOfATwoDimensionalParameter) {
    const Map m = flat_4x6();
    ASSERT_FALSE(validate(m).has_value()) << validate(m)->message << "\n" << to_json(m);
    // Rank 1's slice starts mid-row: the rest of row 2, then row 3; no piece per row.
    const auto& p = m.ranks[1].pieces;
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].extents, (Shape{1, 4}));
    EXPECT_EQ(p[0].logical_offset, 14);
    EXPECT_EQ(p[1].extents, (Shape{1, 6}));
    EXPECT_EQ(p[1].shard_offset, 4);
    EXPECT_EQ(m.ranks[1].padding, (std::vector<Span>{{10, 4}}));
    // To rows, to columns, to a replica, and from each of them back: exact, padding never written.
    for (const Map& other : {split_even({4, 6}, 0, {0, 1}), split_even({4, 6}, 1, {0, 1, 2}), replicated({4, 6}, {5})}) {
        plan_and_check(m, other, 4);
        plan_and_check(other, m, 2);
    }
    plan_and_check(m, m, 8);
    // The old way of bending it, a [1, 14] shard with one piece per partial row, is still valid; the
    // shard of 14 elements as one dim is now a flat shard, no longer an arity mismatch.
    Map rows = rows2();
    rows.ranks[1].shard_shape = {12};
    EXPECT_FALSE(validate(rows).has_value());
}

TEST(AffineModel, AFF_MAP_FLAT_SliceStartingMidRowIsAFewBoxes) {
    // [5, 7], elements 3 .. 29: the end of row 0, rows 1-3, the start of row 4.
    std::vector<Piece> p = flat_pieces({5, 7}, 3, 30, 0, 0);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[0].extents, (Shape{1, 4}));
    EXPECT_EQ(p[1].extents, (Shape{3, 7}));
    EXPECT_EQ(p[2].extents, (Shape{1, 2}));
    EXPECT_EQ(p[2].shard_offset, 25);
    EXPECT_EQ(p[1].shard_strides, (Shape{7, 1}));
    // 3-D: at most 2 * 3 - 1 boxes, covering the range exactly once, in order.
    for (int64_t begin = 0; begin <= 60; ++begin)
        for (int64_t end = begin; end <= 60; end += 7) {
            p = flat_pieces({3, 4, 5}, begin, end, 100, 2);
            EXPECT_LE(p.size(), 5u);
            int64_t at = begin;
            for (const Piece& q : p) {
                EXPECT_EQ(q.logical_offset, at);
                at += numel(q.extents);
            }
            EXPECT_EQ(at, end);
            Map m{{3, 4, 5}, {RankLayout{2, {100 + end - begin}, p, {{0, 100}}}}};
            EXPECT_FALSE(validate(m).has_value()) << begin << ".." << end << ": " << validate(m)->message;
        }
    EXPECT_EQ(flat_pieces({}, 0, 1, 0, 0).size(), 1u);  // a scalar in a flat shard
    EXPECT_TRUE(flat_pieces({4, 6}, 5, 5, 0, 0).empty());
    EXPECT_THROW(flat_pieces({4, 6}, 5, 25, 0, 0), std::invalid_argument);
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesOverlappingPiecesInTheFlatShard) {
    Map m = flat_4x6();
    m.ranks[1].pieces[1].shard_offset = 3;  // row 3 starts on the last element of row 2's part
    m.ranks[1].padding = {{9, 5}};
    expect_refused(m, Reason::ShardOverlap);
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesPieceLeavingTheFlatShard) {
    Map m = flat_4x6();
    m.ranks[1].pieces[1].shard_offset = 9;  // 6 elements from 9 on: past the 14-element shard
    m.ranks[1].padding = {{4, 5}};
    expect_refused(m, Reason::PieceOutsideShard);
    m = flat_4x6();
    m.ranks[0].pieces[0].shard_offset = -1;
    expect_refused(m, Reason::PieceOutsideShard);
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesPaddingWritten) {
    Map m = flat_4x6();
    m.ranks[1].padding = {{9, 5}};  // padding over the last element of row 3
    expect_refused(m, Reason::PaddingWritten);
    // In a shard with the tensor's dims too: padding is counted in the shard's row-major order.
    Map rows = split_even({4, 6}, 0, {0, 1});
    rows.ranks[0].shard_shape = {3, 6};
    rows.ranks[0].padding = {{11, 7}};  // row 1's last element and row 2
    expect_refused(rows, Reason::PaddingWritten);
    rows.ranks[0].padding = {{12, 6}};
    EXPECT_FALSE(validate(rows).has_value()) << validate(rows)->message;
    plan_and_check(rows, flat_4x6(), 4);
    plan_and_check(flat_4x6(), rows, 4);
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesNonPaddingLeftUntiled) {
    Map m = flat_4x6();
    m.ranks[1].padding = {{11, 3}};  // element 10: neither a piece's nor padding
    expect_refused(m, Reason::ShardGap);
    m.ranks[1].padding.clear();
    expect_refused(m, Reason::ShardGap);  // padding not declared
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesPaddingOutsideTheShardOrOverlapping) {
    for (Span bad : {Span{10, 5}, Span{-1, 2}, Span{10, -1}, Span{INT64_MAX, 2}}) {
        Map m = flat_4x6();
        m.ranks[1].padding = {bad};
        expect_refused(m, Reason::PaddingOutsideShard);
    }
    Map m = flat_4x6();
    m.ranks[1].padding = {{10, 3}, {12, 2}};
    expect_refused(m, Reason::PaddingOverlap);
}

TEST(AffineModel, AFF_MAP_FLAT_RefusesPieceThatIsNotOneRunOfTheFlatShard) {
    Map m = flat_4x6();
    m.ranks[0].pieces[0].shard_strides = {7, 1};  // rows 0-1 with a gap between them in the shard
    expect_refused(m, Reason::NotRowMajor);
}

TEST(AffineModel, AFF_MAP_FLAT_ShardOfPaddingOnlyNeedsNoPieces) {
    Map m = flat_4x6();
    m.ranks.push_back(RankLayout{7, {5}, {}, {{0, 5}}});
    EXPECT_FALSE(validate(m).has_value()) << validate(m)->message;
    plan_and_check(split_even({4, 6}, 1, {0, 1}), m, 4);
    m.ranks.back().padding = {{0, 4}};  // one element left: it needs a piece
    expect_refused(m, Reason::ShardWithoutPieces);
}

TEST(AffineModel, AFF_MAP_FLAT_ShardsOfAnyArity) {
    // A 3-D tensor in 2-D flat shards, a 1-D tensor in a 2-D one, a scalar in a 1-D one.
    Map m3{{2, 3, 4}, {RankLayout{0, {2, 7}, flat_pieces({2, 3, 4}, 0, 14, 0, 0), {}},
                       RankLayout{1, {2, 6}, flat_pieces({2, 3, 4}, 14, 24, 1, 1), {{0, 1}, {11, 1}}}}};
    ASSERT_FALSE(validate(m3).has_value()) << validate(m3)->message;
    plan_and_check(m3, split_even({2, 3, 4}, 2, {0, 1, 2}), 2);
    plan_and_check(block_cyclic({2, 3, 4}, 1, 1, {4, 5}), m3, 8);
    Map m1{{5}, {RankLayout{3, {2, 3}, flat_pieces({5}, 0, 5, 0, 3), {{5, 1}}}}};
    ASSERT_FALSE(validate(m1).has_value()) << validate(m1)->message;
    plan_and_check(m1, split_even({5}, 0, {0, 1}), 1);
    Map m0{{}, {RankLayout{0, {3}, flat_pieces({}, 0, 1, 2, 0), {{0, 2}}}}};
    ASSERT_FALSE(validate(m0).has_value()) << validate(m0)->message;
    plan_and_check(m0, replicated({}, {1, 2}), 4);
    plan_and_check(replicated({}, {1, 2}), m0, 4);
}

TEST(AffineModel, AFF_MAP_FLAT_Zero3FlatIsTheConcatenatedAlignedPaddedBufferPartitioned) {
    // Three parameters, alignment 4, world 3: starts 0, 8, 32; 35 elements padded to 36 = 3 x 12.
    const std::vector<Shape> shapes{{2, 3}, {4, 6}, {3}};
    const std::vector<int> ranks{5, 2, 9};
    const FlatPartition f = zero3_flat(shapes, ranks, 4);
    EXPECT_EQ(f.starts, (std::vector<int64_t>{0, 8, 32}));
    EXPECT_EQ(f.partition, 12);
    ASSERT_EQ(f.maps.size(), 3u);
    // The flat buffer DeepSpeed makes: each parameter's elements at its start, zeros between.
    const std::size_t elem = 2;
    std::vector<Bytes> fulls;
    Bytes flat(std::size_t(3 * f.partition) * elem, 0);
    for (std::size_t p = 0; p < shapes.size(); ++p) {
        fulls.push_back(tensor_bytes(shapes[p], elem, 11 + p));
        std::copy(fulls[p].begin(), fulls[p].end(), flat.begin() + std::ptrdiff_t(std::size_t(f.starts[p]) * elem));
    }
    // Each rank's partition, assembled from the parameters' shards at their offsets, is its run of
    // that buffer; every element of it lies in exactly one parameter's shard.
    for (std::size_t k = 0; k < ranks.size(); ++k) {
        Bytes partition(std::size_t(f.partition) * elem, 0);
        std::vector<int> owners(std::size_t(f.partition), 0);
        for (std::size_t p = 0; p < shapes.size(); ++p) {
            const Map& m = f.maps[p];
            ASSERT_FALSE(validate(m).has_value()) << validate(m)->message << "\n" << to_json(m);
            ASSERT_EQ(m.ranks[k].rank, ranks[k]);
            const Bytes shard = *extract_shard(m, ranks[k], fulls[p], elem);
            const int64_t at = f.offsets[p][k];
            std::copy(shard.begin(), shard.end(), partition.begin() + std::ptrdiff_t(std::size_t(at) * elem));
            for (int64_t i = 0; i < numel(m.ranks[k].shard_shape); ++i) ++owners[std::size_t(at + i)];
        }
        EXPECT_TRUE(std::equal(partition.begin(), partition.end(),
                               flat.begin() + std::ptrdiff_t(k * std::size_t(f.partition) * elem)))
            << "rank " << ranks[k];
        EXPECT_TRUE(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; })) << "rank " << ranks[k];
    }
    // [4, 6] starts at 8: rank 5 holds its first 4 elements, rank 2 the next 12, rank 9 the last 8
    // and the alignment padding after it (elements 32..35 of the buffer belong to [3]).
    EXPECT_EQ(f.maps[1].ranks[0].shard_shape, Shape{4});
    EXPECT_EQ(f.maps[1].ranks[2].shard_shape, Shape{8});
    EXPECT_TRUE(f.maps[1].ranks[2].padding.empty());
    EXPECT_EQ(f.maps[0].ranks[0].padding, (std::vector<Span>{{6, 2}}));  // [2, 3]: 6 elements, then 2 of padding
    EXPECT_EQ(f.maps[2].ranks[2].padding, (std::vector<Span>{{3, 1}}));  // the buffer's tail
    EXPECT_EQ(f.maps[2].ranks[0].shard_shape, Shape{0});
    // Resharded to TP and back, each parameter is what it was; padding is never written.
    for (std::size_t p = 0; p < shapes.size(); ++p) {
        const Map tp = split_even(shapes[p], 0, {0, 1});
        plan_and_check(f.maps[p], tp, elem);
        plan_and_check(tp, f.maps[p], elem);
    }
    EXPECT_THROW(zero3_flat(shapes, {}, 4), std::invalid_argument);
    EXPECT_THROW(zero3_flat(shapes, ranks, 0), std::invalid_argument);
}

TEST(AffineModel, AFF_MAP_FLAT_PlanIsAFewSegmentsPerSlice) {
    // ZeRO-3 over 8 ranks to TP 4 by rows: each (slice box, row block) meeting is one segment.
    const Shape shape{64, 48};
    const Map src = zero3_flat({shape}, {0, 1, 2, 3, 4, 5, 6, 7}, 16).maps[0];
    const Plan p = plan_and_check(src, split_even(shape, 0, {0, 1, 2, 3}), 4);
    EXPECT_LE(p.segments.size(), 8u);  // 384 elements = 8 whole rows per partition: one box each
    const Plan q = plan_and_check(src, split_even(shape, 1, {0, 1, 2, 3}), 4);
    EXPECT_LE(q.segments.size(), 32u);  // each partition's rows, one column block per target
}

TEST(AffineModel, AFF_MAP_FLAT_JsonRoundTripWithPadding) {
    const Map m = flat_4x6();
    const std::string text = to_json(m);
    EXPECT_NE(text.find("\"padding\":[[10,4]]"), std::string::npos) << text;
    EXPECT_EQ(to_json(rows2()).find("padding"), std::string::npos);  // none declared: none written
    auto back = from_json(text);
    ASSERT_TRUE(back.ok()) << back.refusal.message;
    EXPECT_EQ(*back, m);
    const std::string rank = R"({"shape":[2],"ranks":[{"rank":0,"shard_shape":[3],"pieces":[{"extents":[2],)"
                             R"("logical_offset":0,"logical_strides":[1],"shard_offset":0,"shard_strides":[1],)"
                             R"("locations":[0]}],"padding":)";
    auto ok = from_json(rank + "[[2,1]]}]}");
    ASSERT_TRUE(ok.ok()) << ok.refusal.message;
    EXPECT_FALSE(validate(*ok).has_value());
    for (const char* bad : {"{}", "[2,1]", "[[2]]", "[[2,1,0]]", "[[2.5,1]]", "[[\"2\",1]]"}) {
        auto r = from_json(rank + bad + "}]}");
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.refusal.reason, Reason::MalformedField) << bad << ": " << r.refusal.message;
    }
}

RC_GTEST_PROP(AffineModel, AFF_MAP_FLAT_RandomFlatLayoutsValidatePlanAndExecuteExactly, ()) {
    const Shape shape = gen_shape(3);
    const Map src = gen_flat_or_builder(shape), tgt = xmc::conformance::gen_flat_map(shape, gen_ranks());
    const bool flat_source = *rc::gen::arbitrary<bool>();
    const Map& from = flat_source ? tgt : src;  // a flat map on one side or both
    const Map& to = flat_source ? src : tgt;
    RC_ASSERT(!validate(from).has_value());
    RC_ASSERT(!validate(to).has_value());
    auto back = from_json(to_json(tgt));
    RC_ASSERT(back.ok());
    RC_ASSERT(*back == tgt);
    const std::size_t elem = *rc::gen::element<std::size_t>(1, 2, 4, 8);
    const Bytes full = tensor_bytes(shape, elem, *rc::gen::arbitrary<uint64_t>());
    auto p = plan(from, to);
    RC_ASSERT(p.ok());
    Shards in = shards_of(from, full, elem), out = poisoned_shards(to, elem);
    RC_ASSERT(!execute_reference(*p, in, out, elem).has_value());
    for (const RankLayout& r : to.ranks) RC_ASSERT(out[r.rank] == expected_shard(to, r, full, elem));
    RC_ASSERT(written_exactly_once(*p, to));
    RC_ASSERT(*rebuild_full(from, in, elem) == full);
    // AFF-PLAN-DETERMINISTIC holds for flat maps too.
    auto q = plan(shuffled(from, *rc::gen::arbitrary<uint64_t>()), shuffled(to, *rc::gen::arbitrary<uint64_t>()));
    RC_ASSERT(q.ok());
    RC_ASSERT(*q == *p);
}

RC_GTEST_PROP(AffineModel, AFF_MAP_FLAT_BrokenFlatLayoutsRefusedWithTheirReason, ()) {
    // A random flat layout with one thing broken: each refused with its own reason.
    const Shape shape = gen_shape(3);
    Map m = xmc::conformance::gen_flat_map(shape, gen_ranks());
    RC_ASSERT(!validate(m).has_value());
    std::vector<std::size_t> with_pieces;
    for (std::size_t k = 0; k < m.ranks.size(); ++k) {
        if (!m.ranks[k].pieces.empty() && numel(m.ranks[k].pieces[0].extents) > 0) with_pieces.push_back(k);
    }
    RC_PRE(!with_pieces.empty());
    RankLayout& r = m.ranks[*rc::gen::elementOf(with_pieces)];
    Piece& piece = r.pieces[0];
    const int64_t size = numel(r.shard_shape);
    switch (pick(0, 4)) {
        case 0: {  // the piece's run moved past the shard's end
            piece.shard_offset = size - numel(piece.extents) + 1;
            RC_ASSERT(validate(m)->reason == Reason::PieceOutsideShard);
            break;
        }
        case 1: {  // one of its elements declared padding too
            r.padding.push_back({piece.shard_offset, 1});
            RC_ASSERT(validate(m)->reason == Reason::PaddingWritten);
            break;
        }
        case 2: {  // an element of it no longer held: neither a piece's nor padding
            if (piece.extents.empty() || numel(piece.extents) < 2) {
                r.pieces.erase(r.pieces.begin());
                const Reason want = r.pieces.empty() ? Reason::ShardWithoutPieces : Reason::ShardGap;
                RC_ASSERT(validate(m)->reason == want);
                break;
            }
            std::size_t axis = 0;
            while (piece.extents[axis] < 2) ++axis;
            piece.extents[axis] -= 1;
            if (r.shard_shape.size() != shape.size()) piece.shard_strides = row_major_strides(piece.extents);  // flat
            const auto v = validate(m);
            RC_ASSERT(v.has_value());
            RC_ASSERT(v->reason == Reason::ShardGap || v->reason == Reason::NotRowMajor);
            break;
        }
        default: {  // its run overlapping another piece's, or the padding after it
            RC_PRE(r.pieces.size() + r.padding.size() >= 2);
            piece.shard_offset += 1;
            const auto v = validate(m);
            RC_ASSERT(v.has_value());
            RC_ASSERT(v->reason == Reason::ShardOverlap || v->reason == Reason::PaddingWritten ||
                      v->reason == Reason::PieceOutsideShard);
        }
    }
}
