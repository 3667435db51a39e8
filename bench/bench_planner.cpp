// Planner speed: how long aff::plan() takes on maps of realistic size.
//
//  (a) A transformer's parameters (the 399 tensors of a Qwen3-8B-like model: 36 layers of q, k, v,
//      o, gate, up, down and four norms, plus embedding, final norm and lm_head) moved from TP=8
//      (ranks 0..7: column-parallel weights split on axis 0, row-parallel on axis 1, norms
//      replicated) to TP=4 x 2 replicas (ranks 8..15: each quarter held by two ranks, norms
//      replicated). 8 pieces per tensor on each side: 3,192 pieces per side. Target: all 399 plans
//      in under 5 ms.
//  (b) One large parameter stored row by row: a [2,360,000 x 64] tensor made of 4,000 experts of
//      590 rows. Source: 8 ranks of 500 experts each, every expert stored as groups of 4 rows (147
//      groups of 4 and one of 2): 592,000 pieces. Target: 4 ranks, one piece per row: 2,360,000
//      pieces. Target: one plan in under 10 s (the seed project took 207 s for maps of this size).
//  (c) AFF-MAP-FLAT: the transformer of (a) as DeepSpeed ZeRO-3 flat partitions (world 8: the 399
//      parameters concatenated, each start aligned to 16 elements, the buffer padded and cut into 8
//      equal 1-D partitions; each parameter's slice of a partition is at most 3 pieces) resharded to
//      TP=4 (ranks 0..3: column-parallel split on axis 0, row-parallel on axis 1, norms replicated).
//      Target: all 399 plans in under 50 ms.
//
// Run: xmc_bench_planner [--check-targets] [--benchmark_*]
//   --check-targets  exits 1 when a case misses its target (the ctest bench.planner does this).
// Without --benchmark_filter only the two timed cases run; with it, Google Benchmark runs too.
// XMC_BENCH_PLANNER_SKIP_B=1 skips case (b), to measure (a) and (c) alone (e.g. under perf stat).
#include <xmc/affine.hpp>

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace aff = xmc::affine;

namespace {

using Shape = std::vector<int64_t>;
using Clock = std::chrono::steady_clock;

struct Pair {
    aff::Map source, target;
};

size_t pieces(const aff::Map &m) {
    size_t n = 0;
    for (const auto &r : m.ranks) n += r.pieces.size();
    return n;
}

// ---- (a) a transformer, TP=8 -> TP=4 x 2 replicas ----

std::vector<int> range(int first, int n) {
    std::vector<int> v;
    for (int i = 0; i < n; ++i) v.push_back(first + i);
    return v;
}

// `parts` equal parts of `axis`, part k held by holders[k].
aff::Map split_parts(const Shape &shape, size_t axis, const std::vector<std::vector<int>> &holders) {
    const int64_t n = int64_t(holders.size());
    std::vector<int64_t> sizes;
    for (int64_t k = 0; k < n; ++k) sizes.push_back(shape[axis] / n + (k < shape[axis] % n ? 1 : 0));
    return aff::split(shape, axis, sizes, holders);
}

enum Kind { Column, Row, Norm };

// The 399 parameters, in checkpoint order, and how tensor parallelism splits each.
std::vector<std::pair<Shape, Kind>> transformer_params() {
    constexpr int64_t hidden = 4096, inter = 12288, kv = 1024, head = 128, vocab = 151936, layers = 36;
    std::vector<std::pair<Shape, Kind>> params;
    params.push_back({{vocab, hidden}, Column});  // embedding, split by vocabulary
    for (int64_t l = 0; l < layers; ++l) {
        params.push_back({{hidden, hidden}, Column});  // q
        params.push_back({{kv, hidden}, Column});      // k
        params.push_back({{kv, hidden}, Column});      // v
        params.push_back({{hidden, hidden}, Row});     // o
        params.push_back({{inter, hidden}, Column});   // gate
        params.push_back({{inter, hidden}, Column});   // up
        params.push_back({{hidden, inter}, Row});      // down
        params.push_back({{hidden}, Norm});            // input norm
        params.push_back({{hidden}, Norm});            // post-attention norm
        params.push_back({{head}, Norm});              // q norm
        params.push_back({{head}, Norm});              // k norm
    }
    params.push_back({{hidden}, Norm});            // final norm
    params.push_back({{vocab, hidden}, Column});   // lm_head
    return params;
}

std::vector<Pair> transformer() {
    const std::vector<std::pair<Shape, Kind>> params = transformer_params();
    std::vector<std::vector<int>> tp8, tp4x2;
    for (int k = 0; k < 8; ++k) tp8.push_back({k});
    for (int k = 0; k < 4; ++k) tp4x2.push_back({8 + k, 12 + k});
    std::vector<Pair> out;
    for (const auto &[shape, kind] : params) {
        if (kind == Norm) {
            out.push_back({aff::replicated(shape, range(0, 8)), aff::replicated(shape, range(8, 8))});
        } else {
            const size_t axis = kind == Column ? 0 : 1;
            out.push_back({split_parts(shape, axis, tp8), split_parts(shape, axis, tp4x2)});
        }
    }
    return out;
}

// ---- (c) the same transformer as ZeRO-3 flat partitions, world 8 -> TP=4 ----

constexpr int64_t kZeroAlignment = 16;  // elements each parameter's start is aligned to

std::vector<Pair> zero3_to_tp4() {
    const std::vector<std::pair<Shape, Kind>> params = transformer_params();
    std::vector<Shape> shapes;
    for (const auto &[shape, kind] : params) shapes.push_back(shape);
    aff::FlatPartition flat = aff::zero3_flat(shapes, range(0, 8), kZeroAlignment);
    std::vector<std::vector<int>> tp4;
    for (int k = 0; k < 4; ++k) tp4.push_back({k});
    std::vector<Pair> out;
    for (size_t p = 0; p < params.size(); ++p) {
        const auto &[shape, kind] = params[p];
        aff::Map target = kind == Norm ? aff::replicated(shape, range(0, 4))
                                       : split_parts(shape, kind == Column ? 0 : 1, tp4);
        out.push_back({std::move(flat.maps[p]), std::move(target)});
    }
    return out;
}

// ---- (b) a [2,360,000 x 64] parameter stored row by row ----

constexpr int64_t kExperts = 4000, kRowsPerExpert = 590, kCols = 64, kGroup = 4;
constexpr int kSourceRanks = 8, kTargetRanks = 4;

aff::Piece row_piece(int64_t rows, int64_t logical_row, int64_t shard_row, int rank) {
    aff::Piece p;
    p.extents = {rows, kCols};
    p.logical_offset = logical_row * kCols;
    p.logical_strides = {kCols, 1};
    p.shard_offset = shard_row * kCols;
    p.shard_strides = {kCols, 1};
    p.locations = {rank};
    return p;
}

Pair row_by_row() {
    const int64_t rows = kExperts * kRowsPerExpert;
    Pair m;
    m.source.shape = m.target.shape = {rows, kCols};
    const int64_t src_rows = rows / kSourceRanks, tgt_rows = rows / kTargetRanks;
    for (int r = 0; r < kSourceRanks; ++r) {
        aff::RankLayout l{r, {src_rows, kCols}, {}};
        l.pieces.reserve(size_t(src_rows / kGroup + kExperts / kSourceRanks));
        for (int64_t e = 0; e < kExperts / kSourceRanks; ++e)
            for (int64_t at = 0; at < kRowsPerExpert; at += kGroup) {
                const int64_t shard_row = e * kRowsPerExpert + at;
                l.pieces.push_back(row_piece(std::min(kGroup, kRowsPerExpert - at), r * src_rows + shard_row, shard_row, r));
            }
        m.source.ranks.push_back(std::move(l));
    }
    for (int r = 0; r < kTargetRanks; ++r) {
        aff::RankLayout l{r, {tgt_rows, kCols}, {}};
        l.pieces.reserve(size_t(tgt_rows));
        for (int64_t row = 0; row < tgt_rows; ++row) l.pieces.push_back(row_piece(1, r * tgt_rows + row, row, r));
        m.target.ranks.push_back(std::move(l));
    }
    return m;
}

aff::Budgets big_budgets() {
    aff::Budgets b;
    b.max_pieces = size_t(1) << 22;
    return b;
}

long peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// CPU time of this process (user + system), in ms. The targets are checked on CPU time: the 2-core
// machines that run this are shared, and wall time there measures the neighbours too.
double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

// Three attempts, each on freshly built maps, of the best of 50 rounds of every plan of `make()`.
// Attempts differ by up to 30% on this virtual machine (allocation layout, neighbours); the figure
// is the best attempt, and every attempt is printed. *line says what was planned, the figures,
// and "met" or "MISSED" against target_ms of CPU time (at its end). False when a plan is refused.
bool time_plans(std::vector<Pair> (*make)(), double target_ms, std::string *line) {
    double best = 1e300, best_wall = 1e300;
    size_t src = 0, tgt = 0, segments = 0, tensors = 0;
    std::string attempts;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::vector<Pair> maps = make();
        tensors = maps.size(), src = tgt = 0;
        for (const Pair &p : maps) src += pieces(p.source), tgt += pieces(p.target);
        double mine = 1e300;
        for (int round = 0; round < 50; ++round) {
            segments = 0;
            const auto t0 = Clock::now();
            const double c0 = cpu_ms();
            for (const Pair &p : maps) {
                auto plan = aff::plan(p.source, p.target);
                if (!plan) {
                    std::printf("planner: refused: %s\n", plan.refusal.message.c_str());
                    return false;
                }
                segments += plan->segments.size();
            }
            mine = std::min(mine, cpu_ms() - c0);
            best_wall = std::min(best_wall, ms_since(t0));
        }
        best = std::min(best, mine);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.3f", attempt ? ", " : "", mine);
        attempts += buf;
    }
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%zu tensors, %zu source pieces, %zu target pieces, %zu segments: %.3f ms CPU, %.3f ms wall (best "
                  "of 3 attempts x 50 rounds: %s ms; target < %g ms CPU) %s",
                  tensors, src, tgt, segments, best, best_wall, attempts.c_str(), target_ms,
                  best < target_ms ? "met" : "MISSED");
    *line = buf;
    return true;
}

// ---- Google Benchmark entries (with --benchmark_filter) ----

void BM_PlanTransformer(benchmark::State &state) {
    const std::vector<Pair> maps = transformer();
    for (auto _ : state)
        for (const Pair &p : maps) benchmark::DoNotOptimize(aff::plan(p.source, p.target));
}
BENCHMARK(BM_PlanTransformer)->Unit(benchmark::kMillisecond);

void BM_PlanZero3ToTp4(benchmark::State &state) {
    const std::vector<Pair> maps = zero3_to_tp4();
    for (auto _ : state)
        for (const Pair &p : maps) benchmark::DoNotOptimize(aff::plan(p.source, p.target));
}
BENCHMARK(BM_PlanZero3ToTp4)->Unit(benchmark::kMillisecond);

void BM_PlanRowByRow(benchmark::State &state) {
    const Pair m = row_by_row();
    for (auto _ : state) benchmark::DoNotOptimize(aff::plan(m.source, m.target, big_budgets()));
}
BENCHMARK(BM_PlanRowByRow)->Unit(benchmark::kMillisecond)->Iterations(1);

} // namespace

int main(int argc, char **argv) {
    bool check = false, run_benchmarks = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--check-targets") == 0) {
            check = true;
            for (int j = i; j + 1 <= argc; ++j) argv[j] = argv[j + 1];
            --argc, --i;
        } else if (std::strncmp(argv[i], "--benchmark_filter", 18) == 0) {
            run_benchmarks = true;
        }
    }
    if (run_benchmarks) {
        benchmark::Initialize(&argc, argv);
        benchmark::RunSpecifiedBenchmarks();
        return 0;
    }
    bool ok = true;

    // (a) and (c): the model's 399 plans, timed by time_plans().
    std::string line;
    if (!time_plans(transformer, 5.0, &line)) return 1;
    std::printf("planner: (a) transformer TP=8 -> TP=4x2: %s\n", line.c_str());
    ok = ok && line.ends_with(" met");
    if (!time_plans(zero3_to_tp4, 50.0, &line)) return 1;
    std::printf("planner: (c) transformer ZeRO-3 flat (world 8, alignment %lld) -> TP=4: %s\n",
                (long long)kZeroAlignment, line.c_str());
    ok = ok && line.ends_with(" met");
    const char *skip_b = std::getenv("XMC_BENCH_PLANNER_SKIP_B");
    if (!(skip_b && std::strcmp(skip_b, "1") == 0)) {  // (b): one plan
        const auto b0 = Clock::now();
        const Pair m = row_by_row();
        const double build_ms = ms_since(b0);
        const auto t0 = Clock::now();
        const double c0 = cpu_ms();
        auto plan = aff::plan(m.source, m.target, big_budgets());
        const double ms = cpu_ms() - c0, wall = ms_since(t0);
        if (!plan) {
            std::printf("planner: row by row: refused: %s\n", plan.refusal.message.c_str());
            return 1;
        }
        const bool met = ms < 10000.0;
        std::printf("planner: (b) [%lld x %lld] row by row: %zu source pieces on %d ranks, %zu target pieces on %d "
                    "ranks, %zu segments: %.0f ms CPU, %.0f ms wall (maps built in %.0f ms; peak RSS %ld MiB; target < 10 s "
                    "CPU) %s\n",
                    (long long)m.source.shape[0], (long long)m.source.shape[1], pieces(m.source), kSourceRanks,
                    pieces(m.target), kTargetRanks, plan->segments.size(), ms, wall, build_ms, peak_rss_mib(),
                    met ? "met" : "MISSED");
        ok = ok && met;
    }
    if (check && !ok) {
        std::printf("planner: a target was missed\n");
        return 1;
    }
    return 0;
}
