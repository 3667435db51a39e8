// libFuzzer harness: the affine map JSON reader, validation and the planner
// (reference/model/affine, reference/affine, include/xmc/affine.hpp; SPEC 5 AFF-MAP-VALID, AFF-PLAN-*).
//
// Input: a source map's JSON, optionally followed by a line "---" and the target map's
// JSON (without one the source is planned onto itself). Properties, any breach traps:
//  - from_json never throws; a refusal is MalformedJson/MalformedField with a message;
//  - a parsed map survives to_json/from_json unchanged;
//  - validate() and plan() refuse with a non-empty message, or plan; plan() agrees with
//    validate() on both maps (a planned pair has valid maps, equal shapes, scale 1);
//  - a plan does not depend on the order of ranks and pieces (AFF-PLAN-DETERMINISTIC)
//    and its digest is plan_digest() of its segments;
//  - within bounds (elements, pieces), executing the plan writes every target element
//    exactly once and the result equals each target shard extracted from the full tensor
//    filled with distinct values (AFF-PLAN-EXACT), with and without a replica selector;
//    padding of a shard (AFF-MAP-FLAT) is never written.
#include <xmc/affine.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

using namespace xmc::affine;

namespace {

[[noreturn]] void finding(const char *what, const std::string &detail = "") {
    std::fprintf(stderr, "fuzz_affine_json: FINDING: %s %s\n", what, detail.c_str());
    std::fflush(stderr);
    __builtin_trap();
}
#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) finding("check failed: " #cond, ##__VA_ARGS__); \
    } while (0)

constexpr int64_t kMaxElements = 4096;  // full tensor and each shard, for the oracle
constexpr std::size_t kMaxPieces = 64;  // per map: the planner's budget here

bool is_parse_reason(Reason r) { return r == Reason::MalformedJson || r == Reason::MalformedField; }

// Element count if it fits in kMaxElements, else -1 (no overflow on the way).
int64_t small_numel(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t s : shape) {
        if (s < 0) return -1;
        if (s == 0) return 0;
    }
    for (int64_t s : shape)
        if (__builtin_mul_overflow(n, s, &n) || n > kMaxElements) return -1;
    return n;
}

bool within_oracle_bounds(const Map &m) {
    if (small_numel(m.shape) < 0) return false;
    for (const RankLayout &r : m.ranks)
        if (small_numel(r.shard_shape) < 0) return false;
    return true;
}

Result<Map> parse(std::string_view text, const char *side) {
    Result<Map> m = from_json(std::string(text));
    if (!m) {
        CHECK(is_parse_reason(m.refusal.reason), std::string(side) + " " + reason_name(m.refusal.reason));
        CHECK(!m.refusal.message.empty(), side);
        return m;
    }
    // Round trip: what to_json writes, from_json reads back as the same map.
    Result<Map> back = from_json(to_json(*m));
    CHECK(back.ok(), std::string(side) + " round trip refused: " + back.refusal.message + "\n" + to_json(*m));
    CHECK(*back == *m, std::string(side) + " round trip changed the map: " + to_json(*m));
    return m;
}

// The same map with ranks and pieces in reverse order.
Map reversed(Map m) {
    std::reverse(m.ranks.begin(), m.ranks.end());
    for (RankLayout &r : m.ranks) std::reverse(r.pieces.begin(), r.pieces.end());
    return m;
}

// Distinct element values: element i holds i+1 in elem_size little-endian bytes.
Bytes full_tensor(int64_t n, std::size_t elem_size) {
    Bytes b(std::size_t(n) * elem_size);
    for (int64_t i = 0; i < n; ++i) {
        uint64_t v = uint64_t(i) + 1;
        for (std::size_t k = 0; k < elem_size; ++k) b[std::size_t(i) * elem_size + k] = uint8_t(v >> (8 * k));
    }
    return b;
}

void check_refusal(const Refusal &r, const char *what) {
    CHECK(!r.message.empty(), std::string(what) + " refused with an empty message: " + reason_name(r.reason));
}

void check_plan(const Map &src, const Map &tgt, const Budgets &budgets, const ReplicaSelector &selector,
                bool selector_may_lie, std::size_t elem_size) {
    Result<Plan> p = plan(src, tgt, budgets, selector);
    const auto vs = validate(src), vt = validate(tgt);
    if (!p) {
        check_refusal(p.refusal, "plan");
        const Reason r = p.refusal.reason;
        if (r == Reason::InvalidReplicaChoice) CHECK(selector_may_lie, "InvalidReplicaChoice from an honest selector");
        // Refusal order: budgets, source map, target map, then the rest.
        if (r != Reason::DimsOverBudget && r != Reason::PiecesOverBudget) {
            if (vs) CHECK(r == vs->reason, std::string("source invalid (") + reason_name(vs->reason) + ") but plan says " + reason_name(r));
            else if (vt) CHECK(r == vt->reason, std::string("target invalid (") + reason_name(vt->reason) + ") but plan says " + reason_name(r));
        }
        return;
    }
    // A plan: both maps valid, same shape, scale 1 everywhere, within the budgets.
    CHECK(!vs && !vt, "planned an invalid map");
    CHECK(src.shape == tgt.shape, "planned different shapes");
    for (const Map *m : {&src, &tgt})
        for (const RankLayout &r : m->ranks)
            for (const Piece &pc : r.pieces) CHECK(pc.scale == 1.0, "planned a scale other than 1");
    CHECK(p->segments.size() <= budgets.max_segments, "segment budget exceeded");
    CHECK(p->digest == plan_digest(p->shape, p->segments), "stale digest");
    CHECK(p->shape == src.shape, "plan shape");

    // AFF-PLAN-DETERMINISTIC: the order of ranks and pieces does not matter.
    Result<Plan> q = plan(reversed(src), reversed(tgt), budgets, selector);
    CHECK(q.ok(), "the reversed input was refused: " + q.refusal.message);
    CHECK(*q == *p, "the plan depends on the order of ranks or pieces");

    if (!within_oracle_bounds(src) || !within_oracle_bounds(tgt)) return;

    // AFF-PLAN-EXACT: every target element written exactly once, padding never (AFF-MAP-FLAT) ...
    auto counts = coverage_count(*p, tgt);
    CHECK(counts.ok(), "coverage_count refused a plan: " + counts.refusal.message);
    for (const RankLayout &r : tgt.ranks) {
        const std::vector<bool> pad = padding_mask(r);
        const auto &c = counts->at(r.rank);
        for (std::size_t i = 0; i < c.size(); ++i)
            CHECK(c[i] == (pad[i] ? 0u : 1u), "target element " + std::to_string(i) + " of rank " + std::to_string(r.rank) +
                                                  (pad[i] ? " (padding)" : "") + " is written " + std::to_string(c[i]) + " times");
    }

    // ... and the executed plan equals extraction from the full tensor.
    const Bytes full = full_tensor(numel(src.shape), elem_size);
    Shards src_shards, tgt_shards;
    for (const RankLayout &r : src.ranks) {
        auto s = extract_shard(src, r.rank, full, elem_size);
        CHECK(s.ok(), "extract_shard(source) refused: " + s.refusal.message);
        src_shards[r.rank] = *s;
    }
    for (const RankLayout &r : tgt.ranks) tgt_shards[r.rank] = Bytes(std::size_t(numel(r.shard_shape)) * elem_size, 0xA5);
    auto err = execute_reference(*p, src_shards, tgt_shards, elem_size);
    CHECK(!err, "execute_reference refused a plan: " + (err ? err->message : std::string()));
    for (const RankLayout &r : tgt.ranks) {
        auto want = extract_shard(tgt, r.rank, full, elem_size);
        CHECK(want.ok(), "extract_shard(target) refused: " + want.refusal.message);
        Bytes expected = *want;
        const std::vector<bool> pad = padding_mask(r);  // padding: still what it was (0xA5)
        for (std::size_t i = 0; i < pad.size(); ++i)
            if (pad[i]) std::fill_n(expected.begin() + std::ptrdiff_t(i * elem_size), elem_size, uint8_t(0xA5));
        CHECK(expected == tgt_shards[r.rank], "target rank " + std::to_string(r.rank) + " differs from extraction");
    }
    // The shards rebuild the full tensor on both sides.
    auto back = rebuild_full(tgt, tgt_shards, elem_size);
    if (numel(tgt.shape) > 0 && back.ok()) CHECK(*back == full, "rebuild_full(target) differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, std::size_t size) {
    if (size > 64 * 1024) return 0;
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::string_view src_text = in, tgt_text;
    bool has_target = false;
    if (std::size_t sep = in.find("\n---\n"); sep != std::string_view::npos) {
        src_text = in.substr(0, sep);
        tgt_text = in.substr(sep + 5);
        has_target = true;
    }
    Result<Map> src = parse(src_text, "source");
    Result<Map> tgt = has_target ? parse(tgt_text, "target") : src;
    if (!src) return 0;
    if (auto v = validate(*src)) check_refusal(*v, "validate(source)");
    if (!tgt) return 0;
    if (auto v = validate(*tgt)) check_refusal(*v, "validate(target)");

    // Variations chosen from the input itself, so a crash input replays exactly.
    uint32_t h = 2166136261u;
    for (uint8_t c : in) h = (h ^ c) * 16777619u;
    std::size_t elem_size = std::size_t(1) << (h % 4);  // 1, 2, 4, 8
    const int64_t n = small_numel(src->shape);
    if (n > 250 && elem_size < 2) elem_size = 2;  // values must stay distinct
    if (n > 65000 && elem_size < 4) elem_size = 4;

    Budgets budgets;
    budgets.max_pieces = kMaxPieces;
    budgets.max_segments = 4096;
    // Without a selector: replicas come from the lowest rank.
    check_plan(*src, *tgt, budgets, nullptr, false, elem_size);
    // With an honest selector (asked only for >= 2 ascending candidates); the answer
    // depends on the query alone, so the plan stays order independent.
    ReplicaSelector honest = [](const std::vector<int> &c, const ReplicaQuery &q) {
        CHECK(c.size() >= 2 && std::is_sorted(c.begin(), c.end()) &&
                  std::adjacent_find(c.begin(), c.end()) == c.end(),
              "selector asked with fewer than two or unsorted candidates");
        int64_t k = q.tgt_rank;
        for (int64_t x : q.logical_corner) k = k * 31 + x;
        return c[std::size_t(uint64_t(k) % c.size())];
    };
    check_plan(*src, *tgt, budgets, honest, false, elem_size);
    if (h & 16) {
        // A selector that sometimes answers a rank that is no candidate: refused, never used.
        ReplicaSelector liar = [](const std::vector<int> &c, const ReplicaQuery &q) {
            int64_t k = 0;
            for (int64_t x : q.logical_corner) k += x;
            return k % 2 ? -1 : c.front();  // ranks are never negative
        };
        check_plan(*src, *tgt, budgets, liar, true, elem_size);
    }
    return 0;
}
