// Tests of the pure affine transfer model (SPEC 5, AFF): map validation, JSON files, the planner,
// replicas, scalars, and the reference executor. Each test name carries its requirement ID.
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

// Plans, executes on fresh data, and checks AFF-PLAN-EXACT: result equals extraction from the full
// tensor, every target element written exactly once. Returns the plan.
Plan plan_and_check(const Map& src, const Map& tgt, std::size_t elem, const ReplicaSelector& sel = nullptr) {
    auto p = plan(src, tgt, {}, sel);
    EXPECT_TRUE(p.ok()) << reason_name(p.refusal.reason) << ": " << p.refusal.message;
    if (!p.ok()) return {};
    Bytes full = tensor_bytes(src.shape, elem, 7);
    Shards in = shards_of(src, full, elem), out = zeroed_shards(tgt, elem);
    EXPECT_FALSE(execute_reference(*p, in, out, elem).has_value());
    for (const RankLayout& r : tgt.ranks) EXPECT_EQ(out[r.rank], *extract_shard(tgt, r.rank, full, elem)) << r.rank;
    auto counts = coverage_count(*p, tgt);
    EXPECT_TRUE(counts.ok());
    for (const auto& [rank, c] : *counts)
        EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](uint32_t x) { return x == 1; })) << "rank " << rank;
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
    m.ranks[1].shard_shape = {12};
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
