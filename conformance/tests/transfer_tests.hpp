// What the transfer test files (test_transfer*.cpp, one part of the AFF-* requirements each) share:
// the checks, each a few lines, that the tests combine; the fixed and random cases; and the bounds
// the refusal and no-hang tests hold every rank to. The buffers, the fixture and how a case runs on
// every rank: transfer_env.hpp.
#pragma once
#include "boundary.hpp"
#include "driver_control.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "transfer_env.hpp"
#include "transport_threads.hpp"
#include "transport_world.hpp"

#include <xmc/affine.hpp>

#include <dlfcn.h>

#include <rapidcheck.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace xmc::conformance {
namespace {

// ---------- checks, each a few lines, combined by the tests ----------

inline void status_ok(const RankResult &r, Failures &f) {
    if (r.status != XMC_OK)
        f.push_back(std::string("transfer_execute returned ") + xmc_status_string(r.status) + ": " + r.error.message);
}

// The target equals extraction from the full tensor bit for bit, its holes are still poisoned,
// and the source is unchanged.
inline void exact(const RankResult &r, Failures &f) {
    if (auto d = first_difference(r.tgt->store, r.tgt_expected, r.c->elem); !d.empty()) f.push_back("target: " + d);
    if (auto d = first_difference(r.src->store, r.src_before, r.c->elem); !d.empty()) f.push_back("source changed: " + d);
}

// Every element of the target shard holds what the plan moves there (the holes between them are
// exact()'s business): the bytes arrived.
inline void arrived(const RankResult &r, Failures &f) {
    const auto &got = r.tgt->store, &want = r.tgt_expected;
    if (got.size() != want.size()) return f.push_back("target storage size changed");
    for (size_t i = 0; i < got.size(); ++i)
        if (want[i] != kPoison && got[i] != want[i])
            return f.push_back("target: " + first_difference(got, want, r.c->elem) + ": not every byte arrived");
}

// Refused, with detail naming the call, and nothing written anywhere.
inline void refused_untouched(const RankResult &r, Failures &f) {
    if (r.status != XMC_ERR_REFUSED)
        f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status) + ": " + r.error.message);
    else if (r.error.status != XMC_ERR_REFUSED || std::strcmp(r.error.call, "transfer_execute") != 0 ||
             !r.error.message[0])
        f.push_back(std::string("the refusal's detail must carry its status and name transfer_execute; got call '") +
                    r.error.call + "': " + r.error.message);
    for (uint8_t b : r.tgt->store)
        if (b != kPoison) {
            f.push_back("a refused request wrote the target (" + first_difference(r.tgt->store,
                        std::vector<uint8_t>(r.tgt->store.size(), kPoison), r.c->elem) + ")");
            break;
        }
    if (auto d = first_difference(r.src->store, r.src_before, r.c->elem); !d.empty()) f.push_back("source changed: " + d);
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The paths reported (AFF-PATH): one for every peer this rank exchanges data with (the forced
// one, when the caller forced one), none (XMC_PATH_AUTO) for the others and for itself.
inline void paths_reported(const RankEnv &env, const RankResult &r, Failures &f) {
    for (size_t q = 0; q < r.paths.size(); ++q) {
        const bool data = r.out_bytes[q] + r.in_bytes[q] > 0;
        const xmc_path got = r.paths[q];
        const std::string who = "the path reported to peer " + std::to_string(q) + " (" +
                                TransferTest::path_str(got) + ")";
        if (q == size_t(env.index) || !data) {
            if (got != XMC_PATH_AUTO) f.push_back(who + " should be auto: no data goes either way");
        } else if (got <= XMC_PATH_AUTO || got >= XMC_PATH_COUNT_) {
            f.push_back(who + " names no path, though data goes to or from it");
        } else if (r.path != XMC_PATH_AUTO && got != r.path) {
            f.push_back(who + " is not the forced " + TransferTest::path_str(r.path));
        }
    }
}

// The statistics equal the plan's totals for this rank (AFF-RESULT).
inline void result_is_the_plan(const RankResult &r, Failures &f) {
    const uint64_t out = std::accumulate(r.out_bytes.begin(), r.out_bytes.end(), uint64_t{0});
    const uint64_t in = std::accumulate(r.in_bytes.begin(), r.in_bytes.end(), uint64_t{0});
    if (r.stats.bytes_sent != out || r.stats.bytes_received != in || r.stats.bytes_copied_locally != r.local_bytes)
        f.push_back("statistics: sent " + std::to_string(r.stats.bytes_sent) + ", received " +
                    std::to_string(r.stats.bytes_received) + ", copied locally " +
                    std::to_string(r.stats.bytes_copied_locally) + " B; the plan moves " + std::to_string(out) + ", " +
                    std::to_string(in) + " and " + std::to_string(r.local_bytes));
}

// Every message within the budget; per peer direction, messages within ceil(bytes / budget) +
// segments; the reported staging peak and rounds within the same bounds.
inline void staging_bounded(const RankResult &r, Failures &f) {
    const uint64_t budget = r.c->budget;
    uint64_t round_bound = 0;
    for (size_t p = 0; p < r.out_bytes.size(); ++p) {
        const auto &seen = r.rec->peers[p];
        const uint64_t out_bound = ceil_div(r.out_bytes[p], budget) + r.out_segs[p];
        const uint64_t in_bound = ceil_div(r.in_bytes[p], budget) + r.in_segs[p];
        round_bound += out_bound + in_bound;
        if (seen.largest > budget)
            f.push_back("a message to or from peer " + std::to_string(p) + " has " + std::to_string(seen.largest) +
                        " B, over the budget of " + std::to_string(budget) + " B");
        if (seen.sends > out_bound)
            f.push_back(std::to_string(seen.sends) + " messages to peer " + std::to_string(p) + " for " +
                        std::to_string(r.out_bytes[p]) + " B in " + std::to_string(r.out_segs[p]) +
                        " segments: over ceil(bytes / budget) + segments = " + std::to_string(out_bound));
        if (seen.recvs > in_bound)
            f.push_back(std::to_string(seen.recvs) + " messages from peer " + std::to_string(p) + ": over the bound " +
                        std::to_string(in_bound));
    }
    if (r.stats.staging_peak > budget)
        f.push_back("staging_peak " + std::to_string(r.stats.staging_peak) + " B is over the budget of " +
                    std::to_string(budget) + " B");
    if (r.stats.rounds > round_bound)
        f.push_back("rounds " + std::to_string(r.stats.rounds) + " over the bound " + std::to_string(round_bound));
}

// The bytes seen at the transport per peer follow the path reported for it: staged, every byte
// crosses the transport once; direct, IPC or NCCL, none does (a backend that reports one of
// them and stages anyway, or the reverse, is caught here).
inline void traffic_by_path(const RankResult &r, Failures &f) {
    for (size_t p = 0; p < r.out_bytes.size(); ++p) {
        const auto &seen = r.rec->peers[p];
        const bool staged = p < r.paths.size() && r.paths[p] == XMC_PATH_STAGED;
        const std::string how = " (path " + TransferTest::path_str(p < r.paths.size() ? r.paths[p] : -1) + ")";
        if (seen.bytes_sent != (staged ? r.out_bytes[p] : 0))
            f.push_back("bytes seen at the transport to peer " + std::to_string(p) + how + ": " +
                        std::to_string(seen.bytes_sent) + ", the plan moves " + std::to_string(r.out_bytes[p]));
        if (seen.bytes_received != (staged ? r.in_bytes[p] : 0))
            f.push_back("bytes seen at the transport from peer " + std::to_string(p) + how + ": " +
                        std::to_string(seen.bytes_received) + ", the plan moves " + std::to_string(r.in_bytes[p]));
    }
}

// Bytes sent, received and copied locally are what the plan says, as reported and as seen at the
// transport: every element crosses the transport once, and only when it must.
inline void accounted(const RankResult &r, Failures &f) {
    const uint64_t out = std::accumulate(r.out_bytes.begin(), r.out_bytes.end(), uint64_t{0});
    const uint64_t in = std::accumulate(r.in_bytes.begin(), r.in_bytes.end(), uint64_t{0});
    auto expect = [&](const char *what, uint64_t got, uint64_t want) {
        if (got != want)
            f.push_back(std::string(what) + " is " + std::to_string(got) + ", the plan says " + std::to_string(want));
    };
    expect("reported bytes_sent", r.stats.bytes_sent, out);
    expect("reported bytes_received", r.stats.bytes_received, in);
    expect("reported bytes_copied_locally", r.stats.bytes_copied_locally, r.local_bytes);
    traffic_by_path(r, f);
}

// ---------- deterministic maps over the world's labels ----------

inline std::vector<int> labels_of(int n, int first = 0) {
    std::vector<int> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), first);
    return v;
}

const Shape kShape{8, 6};

// Rows to columns over the world, every rank a source and a target, with strided holey buffers.
inline Case mixed_case_for_interior() {
    const std::vector<int> all = labels_of(world().size());
    Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    for (const auto &r : c.source.ranks) c.src_layout[r.rank] = holey_layout(r.shard_shape);
    return c;
}

// ---------- random cases (rapidcheck; identical on every rank) ----------

// pick(): transfer_env.hpp.

// A non-empty subset of the world's labels, in random order.
inline std::vector<int> gen_ranks(int world_size) {
    std::vector<int> pool = labels_of(world_size);
    std::mt19937_64 g(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(pool.begin(), pool.end(), g);
    pool.resize(size_t(pick(1, world_size + 1)));
    return pool;
}

inline Shape gen_shape(int min_dims, int max_dims, int64_t max_extent) {
    Shape s(size_t(pick(min_dims, max_dims + 1)));
    for (auto &d : s) d = pick(0, 15) == 0 ? 0 : pick<int64_t>(1, max_extent + 1);  // now and then empty
    return s;
}

inline std::vector<int64_t> gen_sizes(int64_t total, size_t n) {  // n sizes >= 0 summing to total
    std::vector<int64_t> cuts{0, total};
    for (size_t i = 1; i < n; ++i) cuts.push_back(pick<int64_t>(0, total + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    for (size_t i = 1; i < cuts.size(); ++i) sizes.push_back(cuts[i] - cuts[i - 1]);
    return sizes;
}

// A layout from the model's builders: replicated, even and uneven splits, block-cyclic, replicated
// head rows, and parts held by random groups of ranks.
inline aff::Map gen_map(const Shape &shape, int world_size) {
    const std::vector<int> ranks = gen_ranks(world_size);
    if (shape.empty()) return aff::replicated(shape, ranks);
    const size_t axis = pick<size_t>(0, shape.size());
    switch (pick(0, 6)) {
        case 0: return aff::replicated(shape, ranks);
        case 1: return aff::split_even(shape, axis, ranks);
        case 2: return aff::split_sizes(shape, axis, gen_sizes(shape[axis], ranks.size()), ranks);
        case 3: return aff::block_cyclic(shape, axis, pick<int64_t>(1, shape[axis] + 2), ranks);
        case 4: return aff::block_rows(shape, pick<int64_t>(0, shape[0] + 1), ranks);
        default: {
            auto sizes = gen_sizes(shape[axis], size_t(pick(1, 4)));
            std::vector<std::vector<int>> holders;
            for (size_t k = 0; k < sizes.size(); ++k) {
                std::vector<int> h;
                for (int r : ranks)
                    if (*rc::gen::arbitrary<bool>()) h.push_back(r);
                if (h.empty()) h.push_back(ranks[k % ranks.size()]);
                holders.push_back(h);
            }
            return aff::split(shape, axis, sizes, holders);
        }
    }
}

// Dense, offset, padded, gapped or axis-permuted: how real buffers hold shards.
inline Layout gen_layout(const Shape &shape) {
    if (pick(0, 3) == 0) return dense_layout(shape);
    std::vector<size_t> order = row_major_order(shape);
    if (*rc::gen::arbitrary<bool>()) std::shuffle(order.begin(), order.end(), std::mt19937_64(*rc::gen::arbitrary<uint64_t>()));
    return make_layout(shape, order, pick<int64_t>(1, 3), pick<int64_t>(0, 3), pick<int64_t>(0, 5), pick<int64_t>(0, 3));
}

// A random case: maps, element size, budget (now and then not a multiple of the element), layouts.
inline Case gen_case(int min_dims, int world_size) {
    const Shape shape = gen_shape(min_dims, 3, 7);
    const aff::Map src = gen_map(shape, world_size), tgt = gen_map(shape, world_size);
    const size_t elem = *rc::gen::elementOf(std::vector<size_t>{1, 2, 4, 8});
    const uint64_t budget = *rc::gen::elementOf(std::vector<uint64_t>{elem, elem + 1, 7 * elem + 3, 64, 1000, 1 << 20});
    Case c = make_case(src, tgt, elem, budget);
    c.data_seed = *rc::gen::arbitrary<uint64_t>();
    for (const auto &r : src.ranks) c.src_layout[r.rank] = gen_layout(r.shard_shape);
    for (const auto &r : tgt.ranks) c.tgt_layout[r.rank] = gen_layout(r.shard_shape);
    return c;
}

constexpr int kBadRank = 1;
// Refusals come from the agreement; a backend that goes on to move data meets this bound instead.
constexpr uint32_t kRefusalOpTimeoutMs = 2000;

// A refusal's run: every rank's operations bounded by kRefusalOpTimeoutMs.
inline RunSpec refusal_spec() {
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    return spec;
}
// A refusal's run in which world rank kBadRank runs `other` and every other rank `c` (both outlive
// the run).
inline RunSpec bad_rank_runs(const Case &c, const Case &other) {
    RunSpec spec = refusal_spec();
    spec.case_of = [&c, &other](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    return spec;
}

// Ranks that meet a failure must return an error within this bound: every rank may wait out one
// operation timeout in turn, plus a slack for a loaded machine.
constexpr uint32_t kOpTimeoutMs = 300;
inline uint32_t no_hang_bound_ms() { return kOpTimeoutMs * uint32_t(world().size() + 2) + 2000; }

// AFF-NO-HANG: a rank failed because of one rank's driver or library error, with that error's
// code (`code`, named `name`) as its native code, within the bound.
inline void failed_with_code_in_time(const RankResult &r, int64_t code, const std::string &name, Failures &f) {
    if (r.status == XMC_OK) return f.push_back("succeeded, though a call failed with " + name + " on a rank");
    if (r.error.native_code != code)
        f.push_back(std::string(xmc_status_string(r.status)) + " with native code " + std::to_string(r.error.native_code) +
                    ", not " + name + " (" + std::to_string(code) + "): " + r.error.message);
    if (r.ms > no_hang_bound_ms())
        f.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                    std::to_string(no_hang_bound_ms()) + " ms");
}
inline void failed_in_time(const RankResult &r, Failures &f) {
    if (!r.called) return;
    if (r.status != XMC_ERR_TIMEOUT && r.status != XMC_ERR_PEER_FAILED)
        f.push_back(std::string("expected timeout or peer_failed, got ") + xmc_status_string(r.status) + ": " +
                    r.error.message);
    if (r.ms > no_hang_bound_ms())
        f.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                    std::to_string(no_hang_bound_ms()) + " ms");
}

// The mixed case of the refusal tests (every rank exchanges data with every other).
inline Case mixed_case(uint64_t budget = 40) {
    const std::vector<int> all = labels_of(world().size());
    return make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, budget);
}

// Nothing crossed the transport but the votes, and nothing was written.
inline void refused_before_any_message(const RankResult &r, Failures &f) {
    refused_untouched(r, f);
    for (size_t q = 0; q < r.rec->peers.size(); ++q)
        if (r.rec->peers[q].sends + r.rec->peers[q].recvs > 0)
            f.push_back("messages to or from peer " + std::to_string(q) + " before the refusal");
}

// The fake NCCL's control API (fakes/nccl/fake_nccl_control.h), when the NCCL this process loaded
// is the fake that XMC_NCCL_LIBRARY names; null members otherwise.
struct FakeNcclControl {
    int (*set_faults)(const char *) = nullptr;
    uint64_t (*live_comms)() = nullptr;
    uint64_t (*calls)(const char *entry) = nullptr;  // calls of an entry since the library loaded
};
inline FakeNcclControl fake_nccl() {
    FakeNcclControl f;
    const char *lib = std::getenv("XMC_NCCL_LIBRARY");
    if (!lib || !*lib) return f;
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);  // the copy the backend loaded, if it did
    if (!h) return f;
    f.set_faults = reinterpret_cast<int (*)(const char *)>(dlsym(h, "xmc_fake_nccl_set_faults"));
    f.live_comms = reinterpret_cast<uint64_t (*)()>(dlsym(h, "xmc_fake_nccl_live_comms"));
    f.calls = reinterpret_cast<uint64_t (*)(const char *)>(dlsym(h, "xmc_fake_nccl_calls"));
    dlclose(h);  // (the backend's reference keeps it loaded)
    if (!f.set_faults || !f.live_comms || !f.calls) f = FakeNcclControl{};
    return f;
}
constexpr int64_t kNcclSystemError = 2, kNcclInternalError = 3;  // ncclResult_t (nccl.h)

// Skips unless NCCL is a path taken here and the NCCL loaded is the fake, whose faults and ledger
// the NCCL tests use.
#define XMC_NEEDS_FAKE_NCCL(fake)                                                                            \
    do {                                                                                                     \
        const PathsHere &h_ = paths_here();                                                                  \
        if (std::find(h_.taken.begin(), h_.taken.end(), XMC_PATH_NCCL) == h_.taken.end())                    \
            XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' takes no NCCL path over "           \
                                                        << world().name());                                   \
        fake = fake_nccl();                                                                                  \
        if (!fake.set_faults)                                                                                \
            XMC_SKIP(SkipKind::Unsupported, "the NCCL loaded is not the fake NCCL (XMC_NCCL_LIBRARY), whose "   \
                                            "faults and ledger this test reads");                             \
    } while (0)

} // namespace
} // namespace xmc::conformance
