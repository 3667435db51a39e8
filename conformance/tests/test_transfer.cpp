// AFF-EXEC-EXACT .. AFF-NO-HANG: the affine transfer executor (SPEC 5). Every test body of a
// transfer requirement, run on every selected backend and on every rank of a world: the checks
// (each a few lines, combined by the tests), the fixed and random cases, and the hostile
// arguments of one call (HostileTest). Expected contents come from the model's oracle
// (extract_shard of the full tensor). Traffic is recorded at the transport. Nothing is taken on
// the backend's word. The buffers, the fixture and how a case runs on every rank:
// transfer_env.hpp. This file is also compiled, alone, into `xmc_multirank`.
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

void status_ok(const RankResult &r, Failures &f) {
    if (r.status != XMC_OK)
        f.push_back(std::string("transfer_execute returned ") + xmc_status_string(r.status) + ": " + r.error.message);
}

// The target equals extraction from the full tensor bit for bit, its holes are still poisoned,
// and the source is unchanged.
void exact(const RankResult &r, Failures &f) {
    if (auto d = first_difference(r.tgt->store, r.tgt_expected, r.c->elem); !d.empty()) f.push_back("target: " + d);
    if (auto d = first_difference(r.src->store, r.src_before, r.c->elem); !d.empty()) f.push_back("source changed: " + d);
}

// Every element of the target shard holds what the plan moves there (the holes between them are
// exact()'s business): the bytes arrived.
void arrived(const RankResult &r, Failures &f) {
    const auto &got = r.tgt->store, &want = r.tgt_expected;
    if (got.size() != want.size()) return f.push_back("target storage size changed");
    for (size_t i = 0; i < got.size(); ++i)
        if (want[i] != kPoison && got[i] != want[i])
            return f.push_back("target: " + first_difference(got, want, r.c->elem) + ": not every byte arrived");
}

// Refused, with detail naming the call, and nothing written anywhere.
void refused_untouched(const RankResult &r, Failures &f) {
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

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The paths reported (AFF-PATH): one for every peer this rank exchanges data with (the forced
// one, when the caller forced one), none (XMC_PATH_AUTO) for the others and for itself.
void paths_reported(const RankEnv &env, const RankResult &r, Failures &f) {
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
void result_is_the_plan(const RankResult &r, Failures &f) {
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
void staging_bounded(const RankResult &r, Failures &f) {
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
void traffic_by_path(const RankResult &r, Failures &f) {
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
void accounted(const RankResult &r, Failures &f) {
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

std::vector<int> labels_of(int n, int first = 0) {
    std::vector<int> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), first);
    return v;
}

const Shape kShape{8, 6};

// Rows to columns over the world, every rank a source and a target, with strided holey buffers.
Case mixed_case_for_interior() {
    const std::vector<int> all = labels_of(world().size());
    Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    for (const auto &r : c.source.ranks) c.src_layout[r.rank] = holey_layout(r.shard_shape);
    return c;
}

// ---------- random cases (rapidcheck; identical on every rank) ----------

// pick(): transfer_env.hpp.

// A non-empty subset of the world's labels, in random order.
std::vector<int> gen_ranks(int world_size) {
    std::vector<int> pool = labels_of(world_size);
    std::mt19937_64 g(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(pool.begin(), pool.end(), g);
    pool.resize(size_t(pick(1, world_size + 1)));
    return pool;
}

Shape gen_shape(int min_dims, int max_dims, int64_t max_extent) {
    Shape s(size_t(pick(min_dims, max_dims + 1)));
    for (auto &d : s) d = pick(0, 15) == 0 ? 0 : pick<int64_t>(1, max_extent + 1);  // now and then empty
    return s;
}

std::vector<int64_t> gen_sizes(int64_t total, size_t n) {  // n sizes >= 0 summing to total
    std::vector<int64_t> cuts{0, total};
    for (size_t i = 1; i < n; ++i) cuts.push_back(pick<int64_t>(0, total + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    for (size_t i = 1; i < cuts.size(); ++i) sizes.push_back(cuts[i] - cuts[i - 1]);
    return sizes;
}

// A layout from the model's builders: replicated, even and uneven splits, block-cyclic, replicated
// head rows, and parts held by random groups of ranks.
aff::Map gen_map(const Shape &shape, int world_size) {
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
Layout gen_layout(const Shape &shape) {
    if (pick(0, 3) == 0) return dense_layout(shape);
    std::vector<size_t> order = row_major_order(shape);
    if (*rc::gen::arbitrary<bool>()) std::shuffle(order.begin(), order.end(), std::mt19937_64(*rc::gen::arbitrary<uint64_t>()));
    return make_layout(shape, order, pick<int64_t>(1, 3), pick<int64_t>(0, 3), pick<int64_t>(0, 5), pick<int64_t>(0, 3));
}

// A random case: maps, element size, budget (now and then not a multiple of the element), layouts.
Case gen_case(int min_dims, int world_size) {
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

// ===================== AFF-EXEC-EXACT =====================

TEST_P(TransferTest, AFF_EXEC_EXACT_RandomMapsElementSizesAndLayouts) {
    check_property([] { return gen_case(0, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       exact(r, f);
                   });
}

TEST_P(TransferTest, AFF_EXEC_EXACT_ScalarTensor) {
    const int w = world().size();
    for (size_t elem : {size_t{1}, size_t{8}}) {
        const Case c = make_case(aff::replicated({}, {0}), aff::replicated({}, labels_of(w)), elem, elem);
        EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            exact(r, f);
        })));
    }
}

TEST_P(TransferTest, AFF_EXEC_EXACT_NonContiguousTargetWrittenInPlace) {
    const std::vector<int> all = labels_of(world().size());
    for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
        Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), elem, 3 * elem + 1);
        for (const auto &r : c.target.ranks) c.tgt_layout[r.rank] = holey_layout(r.shard_shape);
        for (xmc_path p : paths_to_test()) {
            RunSpec spec;
            spec.path = p;
            EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
                status_ok(r, f);
                exact(r, f);
            }))) << "element size " << elem << ", path " << path_str(p);
        }
    }
}

// Every rank's source lies inside a larger allocation, 4160 bytes after its start (a tensor inside
// a caching allocator's block): the bytes read are the source's, not the allocation's first ones.
// (Path IPC shares whole allocations: cuIpcGetMemHandle of an interior pointer names the
// allocation, and the opener gets its base; the source's offset in it must travel too.)
TEST_P(TransferTest, AFF_EXEC_EXACT_SourcesInsideLargerAllocations) {
    constexpr size_t kLead = 4096 + 64;  // a multiple of every element size
    const Case c = mixed_case_for_interior();
    std::mutex mu;
    std::map<int, void *> blocks;  // world rank -> its larger allocation (device memory)
    std::map<int, std::vector<uint8_t>> host_blocks;
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.tweak = [&](const RankEnv &env, Side &src, Side &, xmc_transfer_args &args, xmc_group &) {
            if (!args.source.ptr) return;
            const size_t bytes = src.store.size();
            std::lock_guard<std::mutex> lock(mu);
            if (!src.mem.device) {  // host memory: a larger vector, the source copied into it
                std::vector<uint8_t> &b = host_blocks[env.world_rank];
                b.assign(kLead + bytes + 64, kPoison);
                std::memcpy(b.data() + kLead, src.store.data(), bytes);
                args.source.ptr = b.data() + kLead;
                return;
            }
            void *block = nullptr;
            const Memory &m = src.mem;
            if (m.api->dev_alloc(m.inst, m.ordinal, kLead + bytes + 64, &block) != XMC_OK)
                throw std::runtime_error("test setup: dev_alloc of a larger block failed");
            blocks[env.world_rank] = block;
            xmc_copy_desc d{};
            char *at = static_cast<char *>(block) + kLead;
            d.src = xmc_copy_side{src.dev, XMC_MEM_DEVICE, m.ordinal, 0, 0, 0, bytes, bytes};
            d.dst = xmc_copy_side{at, XMC_MEM_DEVICE, m.ordinal, 0, 0, 0, bytes, bytes};
            d.width_bytes = bytes;
            d.height = d.depth = 1;
            if (m.api->copy(m.inst, &d, m.stream) != XMC_OK || m.api->stream_synchronize(m.inst, m.stream) != XMC_OK)
                throw std::runtime_error("test setup: copying the source into a larger block failed");
            args.source.ptr = at;
        };
        const Failures f = run(c, spec, [&](const RankEnv &, const RankResult &r, Failures &out) {
            status_ok(r, out);
            exact(r, out);
        });
        // Once every rank is done (as run() keeps the buffers it made).
        for (auto &[rank, block] : blocks) api->dev_free(inst, block);
        blocks.clear();
        host_blocks.clear();
        EXPECT_TRUE(all_ranks_passed(f)) << "path " << path_str(p);
    }
}

// ===================== AFF-REFUSE-BEFORE-WRITE =====================

// Each bad request is tried on two plans: all-local (every rank keeps its rows) and mixed (rows to
// columns), on world rank 1. Every rank must refuse and nothing may be written anywhere.
std::vector<std::pair<const char *, Case>> refuse_cases() {
    const std::vector<int> all = labels_of(world().size());
    return {{"all-local plan", make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 0, all), 4, 4096)},
            {"mixed plan", make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096)}};
}

constexpr int kBadRank = 1;
// Refusals come from the agreement; a backend that goes on to move data meets this bound instead.
constexpr uint32_t kRefusalOpTimeoutMs = 2000;

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_BufferTooSmallOnOneRank) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &, Side &, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank == kBadRank) a.target.capacity -= 1;  // dense: one element short
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_SourceAndTargetOverlap) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &src, Side &tgt, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank != kBadRank) return;
            // The target now lies in the source's storage (grown to hold it).
            if (src.store.size() < tgt.store.size()) src.grow(tgt.store.size());
            a.source.ptr = src.buf.ptr;
            a.target.ptr = src.buf.ptr;
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_ElementSizeMismatchBetweenRanks) {
    for (const auto &[name, c] : refuse_cases()) {
        Case other = c;
        other.elem = 2;
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_MissingBinding) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &, Side &, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank == kBadRank) a.source.ptr = nullptr;  // the plan reads this rank
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

// A rank that declares a target shard the plan never writes (seed bug: silently never written).
TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_TargetShardThePlanNeverWrites) {
    std::vector<int> others;
    for (int r : labels_of(world().size()))
        if (r != kBadRank) others.push_back(r);
    const Case c = make_case(aff::split_even(kShape, 0, labels_of(world().size())), aff::split_even(kShape, 1, others), 4, 4096);
    const Case declared = make_case(c.source, aff::split_even(kShape, 1, labels_of(world().size())), 4, 4096);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.tweak = [&](const RankEnv &env, Side &, Side &tgt, xmc_transfer_args &a, xmc_group &) {
        if (env.world_rank != kBadRank) return;
        const Memory mem = tgt.mem;
        tgt = make_side(declared.target, kBadRank, {}, 4, nullptr);  // a shard the plan has no segment for
        tgt.put(mem);
        a.target = tgt.buf;
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_untouched(r, f);
    })));
}

// A group that cannot be used is refused at once by every rank given it, with its own status:
// there is no peer to agree with.
TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_MalformedGroupIsInvalidArgument) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 0, all), 4, 4096);
    const std::vector<std::pair<const char *, std::function<void(xmc_transfer_args &, xmc_group &)>>> breaks = {
        {"timeout 0", [](xmc_transfer_args &, xmc_group &g) { g.timeout_ms = 0; }},
        {"my_index out of range", [](xmc_transfer_args &, xmc_group &g) { g.my_index = g.size; }},
        {"no transport", [](xmc_transfer_args &, xmc_group &g) { g.transport = nullptr; }},
        {"no group", [](xmc_transfer_args &a, xmc_group &) { a.group = nullptr; }},
    };
    for (const auto &[name, breaker] : breaks) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [&breaker = breaker](const RankEnv &, Side &, Side &, xmc_transfer_args &a, xmc_group &g) {
            breaker(a, g);
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            if (r.status != XMC_ERR_INVALID_ARGUMENT || std::strcmp(r.error.call, "transfer_execute") != 0)
                f.push_back(std::string("expected invalid_argument naming transfer_execute, got ") +
                            xmc_status_string(r.status) + " from '" + r.error.call + "': " + r.error.message);
            if (std::any_of(r.tgt->store.begin(), r.tgt->store.end(), [](uint8_t b) { return b != kPoison; }))
                f.push_back("the target was written");
        }))) << name;
    }
}

// A group of one: every collective is a copy.
int solo_send(void *, int32_t, const void *, size_t, uint64_t) { return XMC_ERR_INVALID_ARGUMENT; }
int solo_recv(void *, int32_t, void *, size_t, uint64_t) { return XMC_ERR_INVALID_ARGUMENT; }
int solo_all_gather(void *, const void *in, void *out, size_t bytes, uint32_t) {
    std::memcpy(out, in, bytes);
    return 0;
}

TEST_P(HostileTest, AFF_REFUSE_BEFORE_WRITE_HostileArgumentsRefusedNothingWritten) {
    constexpr int64_t kN = 16;
    std::vector<int32_t> src(kN), tgt(kN, -1);
    for (int64_t i = 0; i < kN; ++i) src[size_t(i)] = int32_t(i);
    const std::vector<int32_t> tgt_before = tgt;
    xmc_segment seg{};
    seg.src_rank = seg.tgt_rank = 0;
    seg.ndim = 1;
    seg.extents[0] = kN;
    seg.src_strides[0] = seg.tgt_strides[0] = 1;
    auto buffer = [&](void *p) {
        xmc_shard_buffer b{};
        b.ptr = p;
        b.kind = XMC_MEM_HOST;
        b.capacity = kN;
        b.ndim = 1;
        b.shape[0] = kN;
        b.strides[0] = 1;
        return b;
    };
    const int32_t ranks[] = {0};
    const xmc_transport tp{nullptr, solo_send, solo_recv, solo_all_gather, "solo"};
    const xmc_group group{0, 1, ranks, &tp, 5000};
    xmc_transfer_args good{};
    good.struct_size = sizeof good;
    good.plan = xmc_plan_view{&seg, 1, 0};
    good.source = buffer(src.data());
    good.target = buffer(tgt.data());
    good.elem_size = sizeof(int32_t);
    good.staging_budget = 1 << 20;
    good.group = &group;

    xmc_transfer_stats stats{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, nullptr, &stats), "transfer_execute")
        << "NULL args";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, &good, nullptr), "transfer_execute")
        << "NULL stats";
    const int32_t dup_ranks[] = {0, 0};
    const int32_t neg_ranks[] = {-1};
    const xmc_transport no_gather{nullptr, solo_send, solo_recv, nullptr, "no-gather"};
    struct Case { const char *what; std::function<void(xmc_transfer_args &, xmc_group &)> edit; };
    const Case cases[] = {
        {"struct_size 0", [](xmc_transfer_args &a, xmc_group &) { a.struct_size = 0; }},
        {"struct_size one byte short",
         [](xmc_transfer_args &a, xmc_group &) { a.struct_size = sizeof(xmc_transfer_args) - 1; }},
        {"struct_size of the first member only",
         [](xmc_transfer_args &a, xmc_group &) { a.struct_size = sizeof(uint32_t); }},
        {"NULL group", [](xmc_transfer_args &a, xmc_group &) { a.group = nullptr; }},
        {"group size 0", [](xmc_transfer_args &, xmc_group &g) { g.size = 0; }},
        {"group size -1", [](xmc_transfer_args &, xmc_group &g) { g.size = -1; }},
        {"my_index -1", [](xmc_transfer_args &, xmc_group &g) { g.my_index = -1; }},
        {"my_index == size", [](xmc_transfer_args &, xmc_group &g) { g.my_index = 1; }},
        {"NULL ranks", [](xmc_transfer_args &, xmc_group &g) { g.ranks = nullptr; }},
        {"negative rank label", [&](xmc_transfer_args &, xmc_group &g) { g.ranks = neg_ranks; }},
        {"duplicate rank labels", [&](xmc_transfer_args &, xmc_group &g) { g.ranks = dup_ranks; g.size = 2; }},
        {"NULL transport", [](xmc_transfer_args &, xmc_group &g) { g.transport = nullptr; }},
        {"transport without all_gather", [&](xmc_transfer_args &, xmc_group &g) { g.transport = &no_gather; }},
        {"timeout 0", [](xmc_transfer_args &, xmc_group &g) { g.timeout_ms = 0; }},
    };
    for (const Case &c : cases) {
        xmc_transfer_args a = good;
        xmc_group g = group;
        a.group = &g;
        c.edit(a, g);
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, &a, &stats), "transfer_execute")
            << c.what;
        EXPECT_TRUE(tgt == tgt_before) << c.what << ": a refused transfer wrote the target";
    }
    // Requests a group of one can agree on, but that are invalid: refused, nothing written.
    const Case refused_cases[] = {
        {"element size 0", [](xmc_transfer_args &a, xmc_group &) { a.elem_size = 0; }},
        {"NULL plan with segments", [](xmc_transfer_args &a, xmc_group &) { a.plan.segments = nullptr; }},
        {"target capacity too small", [](xmc_transfer_args &a, xmc_group &) { a.target.capacity = kN - 1; }},
        {"segment extent past the source", [](xmc_transfer_args &a, xmc_group &) { a.source.shape[0] = kN / 2; }},
        {"NULL target buffer", [](xmc_transfer_args &a, xmc_group &) { a.target.ptr = nullptr; }},
        {"ndim above XMC_MAX_DIMS", [](xmc_transfer_args &a, xmc_group &) { a.target.ndim = XMC_MAX_DIMS + 1; }},
    };
    for (const Case &c : refused_cases) {
        xmc_transfer_args a = good;
        xmc_group g = group;
        a.group = &g;
        c.edit(a, g);
        const xmc_status st = api->transfer_execute(inst, &a, &stats);
        EXPECT_TRUE(st == XMC_ERR_REFUSED || st == XMC_ERR_INVALID_ARGUMENT)
            << c.what << ": expected refused, got " << xmc_status_string(st) << " " << last_error();
        if (st != XMC_OK) { EXPECT_TRUE(refused(st, st, "transfer_execute")) << c.what; }
        EXPECT_TRUE(tgt == tgt_before) << c.what << ": a refused transfer wrote the target";
    }
    expect_dead_instances_refused("transfer_execute", [&](xmc_instance *i) {
        return api->transfer_execute(i, &good, &stats);
    });
    EXPECT_TRUE(tgt == tgt_before);
    // The good request is taken (where the backend has a device to run it on:
    // a device backend without its driver refuses every transfer).
    int32_t devices = 0;
    const bool runs = api->device_count(inst, &devices) == XMC_OK && (devices > 0 || !has(XMC_CAP_STREAM));
    if (runs) {
        XMC_EXPECT_STATUS(XMC_OK, api->transfer_execute(inst, &good, &stats));
        EXPECT_TRUE(tgt == src);
    }
}

// A rank's target buffer at every boundary class (boundary.hpp) of its
// elements against its capacity and against the source's memory, on a group
// of one: the shard's elements inside the capacity, its last element the
// capacity's last, one element past it, reaching memory the buffer does not
// own (strides past the capacity, an offset before the buffer), the target
// touching the source (taken) or reaching one element into it, the target's
// extent spanning the source across a gap (interleaved: refused, as the
// extents overlap) or a gap apart (taken), and zero elements. Each is taken,
// or refused with nothing written, as the rules of AFF-REFUSE-BEFORE-WRITE say
// (what a taken one writes is AFF-EXEC-EXACT's).
TEST_P(HostileTest, AFF_REFUSE_BEFORE_WRITE_TargetBufferAtEveryBoundaryClass) {
    int32_t devices = 0;
    const bool runs = api->device_count(inst, &devices) == XMC_OK && (devices > 0 || !has(XMC_CAP_STREAM));
    if (!runs) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' has no device to run a transfer on");
    constexpr int64_t kN = 16;
    const int32_t ranks[] = {0};
    const xmc_transport tp{nullptr, solo_send, solo_recv, solo_all_gather, "solo"};
    const xmc_group group{0, 1, ranks, &tp, 5000};
    struct Geometry {
        Boundary cls;
        const char *what;
        int64_t tgt_at;      // where the target's pointer is, in elements from the source's
        uint64_t capacity;   // the target's
        int64_t offset, stride;
        int64_t n;           // elements of the shard and of the plan's one segment
        bool taken;
    };
    const Geometry cases[] = {
        {Boundary::Inside, "inside the capacity", 2 * kN, kN + 4, 1, 1, kN, true},
        {Boundary::EndsAtEnd, "the last element the capacity's last", 2 * kN, kN, 0, 1, kN, true},
        {Boundary::EndsAtEnd, "offset, the last element the capacity's last", 2 * kN, kN + 3, 3, 1, kN, true},
        {Boundary::OnePastEnd, "one element past the capacity", 2 * kN, kN - 1, 0, 1, kN, false},
        {Boundary::OnePastEnd, "offset, one element past the capacity", 2 * kN, kN + 2, 3, 1, kN, false},
        {Boundary::IntoUnowned, "strides reaching past the capacity", 2 * kN, kN + 1, 0, 2, kN, false},
        {Boundary::IntoUnowned, "an offset before the buffer", 2 * kN, kN, -1, 1, kN, false},
        {Boundary::SpansAdjacent, "the target right after the source", kN, kN, 0, 1, kN, true},
        {Boundary::SpansAdjacent, "the target one element into the source's end", kN - 1, kN, 0, 1, kN, false},
        // Four elements, one before the source and three after it: none in it, its extent across it.
        {Boundary::SpansGap, "the target's extent spanning the source", -1, 52, 0, 17, 4, false},
        {Boundary::SpansGap, "the target a gap after the source", kN + 5, kN, 0, 1, kN, true},
        {Boundary::ZeroLength, "a capacity of zero", 2 * kN, 0, 0, 1, kN, false},
        {Boundary::ZeroLength, "an empty shard in a buffer of zero capacity", 2 * kN, 0, 0, 1, 0, true},
    };
    for (const Geometry &g : cases) {
        SCOPED_TRACE(std::string(boundary_name(g.cls)) + ": " + g.what);
        // One allocation holds both sides: the source at kN*6, the target where the case puts it.
        std::vector<int32_t> mem(size_t(12 * kN), -1);
        const int64_t src_at = 6 * kN;
        for (int64_t i = 0; i < kN; ++i) mem[size_t(src_at + i)] = int32_t(100 + i);
        const std::vector<int32_t> before = mem;
        xmc_segment seg{};
        seg.src_rank = seg.tgt_rank = 0;
        seg.ndim = 1;
        seg.extents[0] = g.n;
        seg.src_strides[0] = seg.tgt_strides[0] = 1;
        xmc_shard_buffer src{}, tgt{};
        src.ptr = mem.data() + src_at;
        src.kind = tgt.kind = XMC_MEM_HOST;
        src.capacity = uint64_t(g.n);
        src.ndim = tgt.ndim = 1;
        src.shape[0] = tgt.shape[0] = g.n;
        src.strides[0] = 1;
        tgt.ptr = mem.data() + src_at + g.tgt_at;
        tgt.capacity = g.capacity;
        tgt.offset = g.offset;
        tgt.strides[0] = g.stride;
        xmc_transfer_args a{};
        a.struct_size = sizeof a;
        a.plan = xmc_plan_view{&seg, 1, 0};
        a.source = src;
        a.target = tgt;
        a.elem_size = sizeof(int32_t);
        a.staging_budget = 1 << 20;
        a.group = &group;
        xmc_transfer_stats stats{};
        const xmc_status st = api->transfer_execute(inst, &a, &stats);
        // What a taken request writes is AFF-EXEC-EXACT's to check; here: taken, or refused unwritten.
        if (g.taken) {
            XMC_EXPECT_STATUS(XMC_OK, st) << "a valid request was not taken";
            continue;
        }
        EXPECT_TRUE(st == XMC_ERR_REFUSED || st == XMC_ERR_INVALID_ARGUMENT)
            << "expected refused, got " << xmc_status_string(st) << " " << last_error();
        if (st != XMC_OK) { EXPECT_TRUE(refused(st, st, "transfer_execute")); }
        EXPECT_TRUE(mem == before) << "the request wrote memory";
    }
}

// ===================== AFF-AGREE =====================

// World rank 1 runs another request than the others, valid on its own. All must refuse.
TEST_P(TransferTest, AFF_AGREE_DifferentPlansAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    const Case other = make_case(aff::block_cyclic(kShape, 0, 1, all), aff::split_even(kShape, 1, all), 4, 4096);
    ASSERT_NE(c.plan.digest, other.plan.digest);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

TEST_P(TransferTest, AFF_AGREE_DifferentElementSizesAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.elem = 2;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

TEST_P(TransferTest, AFF_AGREE_DifferentBudgetsAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.budget = 64;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

// ===================== AFF-STAGING =====================

TEST_P(TransferTest, AFF_STAGING_BudgetSmallerThanOneElementRefusedUpFront) {
    const std::vector<int> all = labels_of(world().size());
    for (uint64_t budget : {uint64_t{0}, uint64_t{3}}) {
        const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, budget);
        EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
            if (r.rec->peers.size() > 1 && std::any_of(r.rec->peers.begin(), r.rec->peers.end(),
                                                       [](const auto &p) { return p.sends + p.recvs > 0; }))
                f.push_back("data crossed the transport before the refusal");
        }))) << "budget " << budget;
    }
}

// A large 1-D segment moves in whole budget-sized chunks (seed bug: one element per round).
TEST_P(TransferTest, AFF_STAGING_LargeOneDimensionalSegmentMovesInWholeChunks) {
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 4096;
    const Case c = make_case(aff::split_sizes({4096}, 0, on_first, labels_of(w)),
                             aff::split_sizes({4096}, 0, on_second, labels_of(w)), 4, 1000);
    for (xmc_path p : paths_to_test()) {  // the staged path's messages, and the others' staging
        RunSpec spec;
        spec.path = p;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            staging_bounded(r, f);
        }))) << "path " << path_str(p);
    }
}

TEST_P(TransferTest, AFF_STAGING_WithinBudgetAndRoundsBounded) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       staging_bounded(r, f);
                   });
}

// ===================== AFF-ACCOUNT =====================

TEST_P(TransferTest, AFF_ACCOUNT_BytesSentReceivedAndLocalMatchThePlan) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       accounted(r, f);
                   });
}

TEST_P(TransferTest, AFF_ACCOUNT_DisjointSourceAndTargetRanksCopyNothingLocally) {
    const int w = world().size();
    const std::vector<int> low = labels_of(w / 2), high = labels_of(w - w / 2, w / 2);
    const Case c = make_case(aff::split_even(kShape, 0, low), aff::split_even(kShape, 1, high), 8, 100);
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            accounted(r, f);
            if (r.stats.bytes_copied_locally != 0)
                f.push_back("copied " + std::to_string(r.stats.bytes_copied_locally) +
                            " B locally, though no rank is both source and target");
        }))) << "path " << path_str(p);
    }
}

// ===================== AFF-GROUP =====================

auto ok_and_exact = [](const RankEnv &, const RankResult &r, Failures &f) {
    status_ok(r, f);
    exact(r, f);
};

TEST_P(TransferTest, AFF_GROUP_RankLabels3And9) {
    const Case c = make_case(aff::split_even(kShape, 0, {3, 9}), aff::split_even(kShape, 1, {9, 3}), 4, 40);
    RunSpec spec;
    spec.groups = {GroupSpec{{0, 1}, {3, 9}}};
    EXPECT_TRUE(all_ranks_passed(run(c, spec, ok_and_exact)));
}

// Group order (and so each rank's position) differs from the world's: labels are world ranks.
TEST_P(TransferTest, AFF_GROUP_GroupOrderDiffersFromTheWorld) {
    GroupSpec reversed = whole_world(world());
    std::reverse(reversed.members.begin(), reversed.members.end());
    reversed.labels.assign(reversed.members.begin(), reversed.members.end());
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 40);
    RunSpec spec;
    spec.groups = {reversed};
    EXPECT_TRUE(all_ranks_passed(run(c, spec, ok_and_exact)));
}

// Groups made of part of the world, labelled by world rank: {1, 3} and {0, 2} at once (with 4
// ranks or more), else {1} alone.
TEST_P(TransferTest, AFF_GROUP_SubsetsOfTheWorld) {
    const bool four = world().size() >= 4;
    std::vector<GroupSpec> groups(four ? 2 : 1);
    if (four) {
        groups[0].members = {1, 3};
        groups[1].members = {0, 2};
    } else {
        groups[0].members = {1};
    }
    for (GroupSpec &g : groups) g.labels.assign(g.members.begin(), g.members.end());
    const Case odd = make_case(aff::split_even(kShape, 0, {1, 3}), aff::split_even(kShape, 1, {3, 1}), 2, 16);
    const Case even = make_case(aff::split_even(kShape, 1, {0, 2}), aff::block_cyclic(kShape, 0, 3, {2, 0}), 8, 64);
    const Case alone = make_case(aff::split_even(kShape, 0, {1}), aff::block_cyclic(kShape, 1, 2, {1}), 4, 64);
    RunSpec spec;
    spec.groups = groups;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return !four ? alone : env.group == 0 ? odd : even; };
    EXPECT_TRUE(all_ranks_passed(run(odd, spec, ok_and_exact)));
}

// ===================== AFF-NO-HANG =====================

// Ranks that meet a failure must return an error within this bound: every rank may wait out one
// operation timeout in turn, plus a slack for a loaded machine.
constexpr uint32_t kOpTimeoutMs = 300;
uint32_t no_hang_bound_ms() { return kOpTimeoutMs * uint32_t(world().size() + 2) + 2000; }

void failed_in_time(const RankResult &r, Failures &f) {
    if (!r.called) return;
    if (r.status != XMC_ERR_TIMEOUT && r.status != XMC_ERR_PEER_FAILED)
        f.push_back(std::string("expected timeout or peer_failed, got ") + xmc_status_string(r.status) + ": " +
                    r.error.message);
    if (r.ms > no_hang_bound_ms())
        f.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                    std::to_string(no_hang_bound_ms()) + " ms");
}

TEST_P(TransferTest, AFF_NO_HANG_RankThatNeverJoins) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 64);
    RunSpec spec;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.joins = [](const RankEnv &env) { return env.world_rank != world().size() - 1; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) { failed_in_time(r, f); })));
}

TEST_P(TransferTest, AFF_NO_HANG_TransportFailureOnOneRankReachesEveryRank) {
    const std::vector<int> all = labels_of(world().size());
    // An 8-byte budget: rank 1 exchanges several chunks with every peer, so operation 3 happens.
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 8);
    // On every path: one all_gather of rank 1 fails, its third (after the offers and the
    // agreement: what follows is the path's own exchange, or the completion vote).
    if (std::string(world().name()) == "threads")
        for (xmc_path p : paths_to_test()) {
            RunSpec spec;
            spec.path = p;
            spec.op_timeout_ms = kOpTimeoutMs;
            spec.deadline_ms = no_hang_bound_ms() + 1000;
            spec.fail_gather = [](const RankEnv &env) { return env.world_rank == kBadRank ? int64_t{2} : int64_t{-1}; };
            EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
                failed_in_time(r, f);
            }))) << "failing all_gather 2, path " << path_str(p);
        }
    // On the staged path, whose chunks are messages: its first message fails, and one in the
    // middle of the exchange.
    for (int64_t op : {0, 3}) {
        RunSpec spec;
        spec.path = XMC_PATH_STAGED;
        spec.op_timeout_ms = kOpTimeoutMs;
        spec.deadline_ms = no_hang_bound_ms() + 1000;
        spec.fail_op = [op](const RankEnv &env) { return env.world_rank == kBadRank ? op : int64_t{-1}; };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            failed_in_time(r, f);
        }))) << "failing operation " << op;
    }
}

// The receiver refuses a large chunk (its receive fails) while the sender has chunks in flight: the
// sender must not wait for that receiver without a bound (seed bug: an oversized chunk refused by
// the receiver, and a sender waiting forever for its acknowledgement).
TEST_P(TransferTest, AFF_NO_HANG_SenderOfAChunkTheReceiverRefusesReturns) {
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 65536;  // 256 KiB from rank 0 to rank 1, in 64 KiB chunks
    const Case c = make_case(aff::split_sizes({65536}, 0, on_first, labels_of(w)),
                             aff::split_sizes({65536}, 0, on_second, labels_of(w)), 4, 65536);
    RunSpec spec;
    spec.path = XMC_PATH_STAGED;  // chunks as messages
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.fail_op = [](const RankEnv &env) { return env.world_rank == 1 ? int64_t{0} : int64_t{-1}; };  // its first receive
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        failed_in_time(r, f);
    })));
}

// Path IPC: world rank 1's driver refuses (a fault script of the fake) to open its peers'
// sources: its first cuIpcOpenMemHandle fails, or, with three ranks or more, its second (one
// source is open by then). Every rank fails within the bound, with the driver's code (rank 1:
// its own failure; the others: the peer's), and every rank's driver holds no more objects than
// before the call: what was opened is closed on the failure's path too, and no rank's source is
// left shared.
TEST_P(TransferTest, AFF_NO_HANG_IpcPeerWhoseHandleCannotBeOpenedReachesEveryRank) {
    const PathsHere &h = paths_here();
    if (std::find(h.taken.begin(), h.taken.end(), XMC_PATH_IPC) == h.taken.end())
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' takes no path ipc over the " << world().name()
                                                     << " transport (it is for ranks in two processes of one node)");
    std::string why;
    const DriverControl *dc = driver_control(api, &why);
    if (!dc) XMC_SKIP(SkipKind::Unsupported, "the refusal is injected through the fake driver: " << why);
    constexpr int64_t kCode = 205;  // CUDA_ERROR_MAP_FAILED, one of cuIpcOpenMemHandle's documented codes
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 64);
    std::vector<int> opens{1};
    if (world().size() >= 3) opens.push_back(2);
    for (int k : opens) {
        const std::string script = "fail:cuIpcOpenMemHandle:CUDA_ERROR_MAP_FAILED@" + std::to_string(k);
        std::vector<size_t> before(size_t(world().size()), 0);
        RunSpec spec;
        spec.path = XMC_PATH_IPC;
        spec.op_timeout_ms = kOpTimeoutMs;
        spec.deadline_ms = no_hang_bound_ms() + 1000;
        spec.tweak = [&](const RankEnv &env, Side &, Side &, xmc_transfer_args &, xmc_group &) {
            before[size_t(env.world_rank)] = dc->objects_besides_contexts();
            if (env.world_rank == kBadRank && dc->set_faults(script.c_str()) != 0)
                throw std::runtime_error("test setup: the fake refused the fault script " + script);
        };
        const Failures f = run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &out) {
            if (env.world_rank == kBadRank) dc->set_faults(nullptr);
            const xmc_status want = env.world_rank == kBadRank ? XMC_ERR_DRIVER : XMC_ERR_PEER_FAILED;
            if (r.status != want)
                out.push_back(std::string("expected ") + xmc_status_string(want) + ", got " +
                              xmc_status_string(r.status) + ": " + r.error.message);
            if (r.error.native_code != kCode)
                out.push_back("the error carries native code " + std::to_string(r.error.native_code) +
                              ", not the driver's " + std::to_string(kCode) + ": " + r.error.message);
            if (r.ms > no_hang_bound_ms())
                out.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                              std::to_string(no_hang_bound_ms()) + " ms");
            if (const size_t now = dc->objects_besides_contexts(); now != before[size_t(env.world_rank)])
                out.push_back("the failed call left " + std::to_string(now) + " driver objects besides contexts, " +
                              std::to_string(before[size_t(env.world_rank)]) + " before it:\n" + dc->ledger_text());
        });
        EXPECT_TRUE(all_ranks_passed(f)) << script << " on world rank " << kBadRank;
    }
}

// ===================== AFF-MAP-FLAT =====================

// AFF-MAP-FLAT: every padding element of this rank's target is still poisoned, whatever the rest
// (exact() checks the whole storage against the oracle; this says which bytes were padding).
void padding_untouched(const RankEnv &env, const RankResult &r, Failures &f) {
    const aff::RankLayout *t = layout_of(r.c->target, env.label());
    if (!t) return;
    auto it = r.c->tgt_layout.find(env.label());
    const Layout l = it != r.c->tgt_layout.end() ? it->second : dense_layout(t->shard_shape);
    const std::vector<bool> pad = aff::padding_mask(*t);
    const size_t elem = r.c->elem;
    for (size_t i = 0; i < pad.size(); ++i) {
        if (!pad[i]) continue;
        const size_t at = size_t(storage_element(t->shard_shape, l, int64_t(i))) * elem;
        if (std::any_of(r.tgt->store.begin() + std::ptrdiff_t(at), r.tgt->store.begin() + std::ptrdiff_t(at + elem),
                        [](uint8_t b) { return b != kPoison; })) {
            f.push_back("padding element " + std::to_string(i) + " of the target shard was written");
            return;
        }
    }
}

// A shard of a flat map: the executors address it as runs (other dims than the tensor's).
bool flat_shard(const aff::Map &m, const aff::RankLayout &r) { return r.shard_shape.size() != m.shape.size(); }

// A random case with a ZeRO-3 flat layout (gen_flat_map) on one side or both, the other side a
// builder's layout; element sizes, budgets and layouts as gen_case (flat shards: gen_flat_layout).
Case gen_flat_case(int world_size) {
    const Shape shape = gen_shape(0, 3, 7);
    const aff::Map flat = gen_flat_map(shape, gen_ranks(world_size));
    const aff::Map other = *rc::gen::arbitrary<bool>() ? gen_flat_map(shape, gen_ranks(world_size)) : gen_map(shape, world_size);
    const bool to_flat = *rc::gen::arbitrary<bool>();
    const size_t elem = *rc::gen::elementOf(std::vector<size_t>{1, 2, 4, 8});
    const uint64_t budget = *rc::gen::elementOf(std::vector<uint64_t>{elem, elem + 1, 7 * elem + 3, 64, 1000, 1 << 20});
    Case c = make_case(to_flat ? other : flat, to_flat ? flat : other, elem, budget);
    c.data_seed = *rc::gen::arbitrary<uint64_t>();
    for (const auto &r : c.source.ranks)
        c.src_layout[r.rank] = flat_shard(c.source, r) ? gen_flat_layout(r.shard_shape) : gen_layout(r.shard_shape);
    for (const auto &r : c.target.ranks)
        c.tgt_layout[r.rank] = flat_shard(c.target, r) ? gen_flat_layout(r.shard_shape) : gen_layout(r.shard_shape);
    return c;
}

// A [7, 5] parameter between two others in ZeRO-3's flat buffer over the world (alignment 4: padding
// after it), to rows, to columns and back. Each rank's flat shard of it is bound inside that rank's
// whole partition, at its offset: the other parameters' elements and the padding around it are
// poisoned and must stay so.
TEST_P(TransferTest, AFF_MAP_FLAT_Zero3ToTensorParallelAndBackInsideThePartition) {
    const std::vector<int> all = labels_of(world().size());
    const Shape shape{7, 5};
    const aff::FlatPartition flat = aff::zero3_flat({{3}, shape, {2, 3}}, all, 4);
    const aff::Map &zero = flat.maps[1];
    std::map<int, Layout> in_partition;
    for (size_t k = 0; k < all.size(); ++k)
        in_partition[all[k]] = Layout{flat.offsets[1][k], {1}, uint64_t(flat.partition)};
    for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}})
        for (const aff::Map &tp : {aff::split_even(shape, 0, all), aff::split_even(shape, 1, all)}) {
            Case there = make_case(zero, tp, elem, 3 * elem + 1), back = make_case(tp, zero, elem, 3 * elem + 1);
            there.src_layout = back.tgt_layout = in_partition;
            for (const Case *c : {&there, &back})
                EXPECT_TRUE(all_ranks_passed(run(*c, {}, [](const RankEnv &env, const RankResult &r, Failures &f) {
                    status_ok(r, f);
                    exact(r, f);
                    padding_untouched(env, r, f);
                }))) << "element size " << elem << (c == &there ? ", from ZeRO-3" : ", to ZeRO-3");
        }
}

TEST_P(TransferTest, AFF_MAP_FLAT_RandomFlatLayoutsElementSizesAndBuffers) {
    check_property([] { return gen_flat_case(world().size()); },
                   [](const RankEnv &env, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       exact(r, f);
                       padding_untouched(env, r, f);
                   });
}

// A run of a flat shard is placed on evenly spaced buffer elements only: a 3-D flat shard of a 2-D
// tensor in a buffer with padded rows is refused by every rank before any write (not written
// across its rows).
TEST_P(TransferTest, AFF_MAP_FLAT_FlatShardOnUnevenlySpacedBufferRefusedBeforeAnyWrite) {
    const std::vector<int> all = labels_of(world().size());
    aff::Map zero = aff::zero3_flat({kShape}, all, 1).maps[0];  // 48 / world elements each
    aff::RankLayout *bad = nullptr;
    for (auto &r : zero.ranks)
        if (r.rank == kBadRank) bad = &r;
    ASSERT_TRUE(bad != nullptr && bad->shard_shape[0] % 2 == 0);
    bad->shard_shape = {1, 2, bad->shard_shape[0] / 2};  // the same runs, counted in a 3-D shard
    ASSERT_FALSE(aff::validate(zero).has_value());
    Case c = make_case(aff::split_even(kShape, 0, all), zero, 4, 4096);
    c.tgt_layout[kBadRank] = make_layout(bad->shard_shape, row_major_order(bad->shard_shape), 1, 3, 0, 0);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_untouched(r, f);
    })));
    c.tgt_layout[kBadRank] = make_layout(bad->shard_shape, row_major_order(bad->shard_shape), 2, 0, 3, 1);
    EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &env, const RankResult &r, Failures &f) {
        status_ok(r, f);  // every other element, rows not padded: evenly spaced
        exact(r, f);
        padding_untouched(env, r, f);
    })));
}


// ===================== AFF-PATH =====================

// The mixed case of the refusal tests (every rank exchanges data with every other).
Case mixed_case(uint64_t budget = 40) {
    const std::vector<int> all = labels_of(world().size());
    return make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, budget);
}

std::string trials_text(const TransferTest::PathsHere &h) {
    std::string s;
    for (const auto &t : h.trials)
        s += "  " + TransferTest::path_str(t.path) + ": " +
             (t.taken ? std::string("taken") : t.refused ? "refused (" + t.reason + ")" : std::string("neither")) + "\n";
    return s;
}

// Each path forced once: taken (every rank succeeds, the target exact, that path reported to
// every peer) or refused by every rank before any write, never anything else. The backend's own
// choice is a path it takes when forced; a run told to test one path (XMC_TRANSFER_PATH) finds
// it taken.
TEST_P(TransferTest, AFF_PATH_EveryPathIsTakenOrRefusedByEveryRank) {
    const PathsHere &h = paths_here();
    const std::string seen = trials_text(h);
    std::printf("data paths of backend '%s' over %s, %d ranks:\n%s", api->name, world().name(), world().size(),
                seen.c_str());
    EXPECT_TRUE(h.problems.empty()) << join(h.problems) << seen;
    EXPECT_FALSE(h.taken.empty()) << "the backend takes no path\n" << seen;
    EXPECT_TRUE(std::find(h.taken.begin(), h.taken.end(), h.chosen) != h.taken.end())
        << "the backend's own choice, " << path_str(h.chosen) << ", is not a path it takes when forced\n" << seen;
    if (const xmc_path p = configured_path(); p != XMC_PATH_AUTO) {
        EXPECT_TRUE(std::find(h.taken.begin(), h.taken.end(), p) != h.taken.end())
            << "this run tests path " << path_str(p) << ", which the backend does not take here\n" << seen;
    }
}

// On each path taken here: exact targets, the path reported for every peer with data, and bytes
// on the transport exactly where the path says (staged: every byte once; otherwise none).
TEST_P(TransferTest, AFF_PATH_EachPathTakenMovesTheDataAsReported) {
    const Case c = mixed_case(24);
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &env, const RankResult &r, Failures &f) {
            status_ok(r, f);
            arrived(r, f);
            paths_reported(env, r, f);
            traffic_by_path(r, f);
        }))) << "path " << path_str(p);
    }
    // Left to the backend: a path for every peer with data, and none for the others.
    RunSpec own;
    own.path = XMC_PATH_AUTO;
    EXPECT_TRUE(all_ranks_passed(run(c, own, [](const RankEnv &env, const RankResult &r, Failures &f) {
        status_ok(r, f);
        arrived(r, f);
        paths_reported(env, r, f);
        traffic_by_path(r, f);
    }))) << "the backend's own choice";
}

// Sources in slots (VMM memory rather than dev_alloc's), on each path taken here: exact targets
// and the path reported. On path IPC a slot has no legacy handle: its readers import it by a file
// descriptor of its physical memory (an executor that only knows cuIpcGetMemHandle fails here).
TEST_P(TransferTest, AFF_PATH_SourcesInSlotsMoveExactlyOnEveryPath) {
    Memory probe{api, inst};
    probe.device = uses_device_buffers(api, inst);
    if (!Side::has_slots(probe))
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' gives its transfers no device slots (it needs "
                                                   << "device buffers and the vmm capability)");
    const Case c = mixed_case(24);
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.source_in_slot = true;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &env, const RankResult &r, Failures &f) {
            status_ok(r, f);
            arrived(r, f);
            paths_reported(env, r, f);
        }))) << "path " << path_str(p) << ", sources in slots";
    }
}

// Random cases, every path: each peer the plan exchanges data with gets a path, the others none.
TEST_P(TransferTest, AFF_PATH_RandomCasesReportAPathForEveryPeerWithData) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &env, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       paths_reported(env, r, f);
                       traffic_by_path(r, f);
                   });
}

// Nothing crossed the transport but the votes, and nothing was written.
void refused_before_any_message(const RankResult &r, Failures &f) {
    refused_untouched(r, f);
    for (size_t q = 0; q < r.rec->peers.size(); ++q)
        if (r.rec->peers[q].sends + r.rec->peers[q].recvs > 0)
            f.push_back("messages to or from peer " + std::to_string(q) + " before the refusal");
}

// World rank 1 forces another path than the others do: the two ends of its pairs would take
// different paths, so every rank refuses before any write (as for differing plans).
TEST_P(TransferTest, AFF_PATH_RanksWhoseChoicesDifferAllRefuse) {
    const PathsHere &h = paths_here();
    ASSERT_FALSE(h.taken.empty()) << trials_text(h);
    const xmc_path common = h.taken.front();
    // Another path taken here if there is one (a genuine mismatch), else one refused here.
    xmc_path other = XMC_PATH_AUTO;
    for (xmc_path p : h.taken)
        if (p != common && other == XMC_PATH_AUTO) other = p;
    for (const auto &t : h.trials)
        if (t.path != common && other == XMC_PATH_AUTO) other = t.path;
    const Case c = mixed_case();
    for (const bool others_force : {true, false}) {  // the others force `common`, or leave it to the backend
        const xmc_path mine = others_force ? common : XMC_PATH_AUTO;
        const xmc_path bad = others_force ? other : (h.chosen == common ? other : common);
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.path_of = [&](const RankEnv &env) { return int(env.world_rank == kBadRank ? bad : mine); };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_before_any_message(r, f);
        }))) << "world rank " << kBadRank << " forces " << path_str(bad) << ", the others "
             << (others_force ? path_str(mine) : "the backend's choice (" + path_str(h.chosen) + ")");
    }
}

// A forced path the ranks cannot take here is refused by every rank, naming the path; a path
// outside the enum is no request at all.
TEST_P(TransferTest, AFF_PATH_ForcedPathTheRanksCannotTakeIsRefusedByEveryRank) {
    const PathsHere &h = paths_here();
    const Case c = mixed_case();
    for (const auto &t : h.trials) {
        if (!t.refused) continue;
        RunSpec spec;
        spec.path = t.path;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        const std::string name = path_str(t.path);
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &, const RankResult &r, Failures &f) {
            refused_before_any_message(r, f);
            if (!std::strstr(r.error.message, name.c_str()))
                f.push_back("the refusal does not name path " + name + ": " + r.error.message);
        }))) << "forced " << name;
    }
    RunSpec spec;
    spec.path = XMC_PATH_COUNT_;
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_INVALID_ARGUMENT)
            f.push_back(std::string("path XMC_PATH_COUNT_: expected invalid_argument, got ") +
                        xmc_status_string(r.status) + ": " + r.error.message);
    }))) << "a path outside the enum";
}

// ===================== the NCCL path: errors, refusals, communicators =====================

// The fake NCCL's control API (fakes/nccl/fake_nccl_control.h), when the NCCL this process loaded
// is the fake that XMC_NCCL_LIBRARY names; null members otherwise.
struct FakeNcclControl {
    int (*set_faults)(const char *) = nullptr;
    uint64_t (*live_comms)() = nullptr;
};
FakeNcclControl fake_nccl() {
    FakeNcclControl f;
    const char *lib = std::getenv("XMC_NCCL_LIBRARY");
    if (!lib || !*lib) return f;
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);  // the copy the backend loaded, if it did
    if (!h) return f;
    f.set_faults = reinterpret_cast<int (*)(const char *)>(dlsym(h, "xmc_fake_nccl_set_faults"));
    f.live_comms = reinterpret_cast<uint64_t (*)()>(dlsym(h, "xmc_fake_nccl_live_comms"));
    dlclose(h);  // (the backend's reference keeps it loaded)
    if (!f.set_faults || !f.live_comms) f = FakeNcclControl{};
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

// With every rank well, an exchange in both directions on every path the ranks do not refuse
// cleanly succeeds, or is refused (then AFF-PATH's business), never ends in the bound: a round
// whose send and receive are not posted together (ungrouped NCCL point-to-point, where a send
// waits for the peer's receive) deadlocks, and the bound can only end it as a failure.
TEST_P(TransferTest, AFF_NO_HANG_TwoWayExchangeOnEveryPathFinishesWithinTheBound) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 8);
    std::vector<xmc_path> paths;
    if (const xmc_path p = configured_path(); p != XMC_PATH_AUTO) paths.push_back(p);
    else
        for (const auto &t : paths_here().trials)
            if (!t.refused) paths.push_back(t.path);  // taken, or neither (AFF-PATH's failure)
    for (xmc_path p : paths) {
        RunSpec spec;
        spec.path = p;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            if (r.status != XMC_ERR_REFUSED) status_ok(r, f);
        }))) << "path " << path_str(p);
    }
}

// One rank's ncclSend fails (the fake's fault script, on that rank only): every rank fails within
// the bound, each with NCCL's code as its native code (the failing rank's own, the others' from
// its completion vote).
TEST_P(TransferTest, AFF_NO_HANG_NcclErrorOnOneRankReachesEveryRankWithItsCode) {
    FakeNcclControl fake;
    XMC_NEEDS_FAKE_NCCL(fake);
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 8);
    RunSpec spec;
    spec.path = XMC_PATH_NCCL;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    // Installed before the rank calls; its peers cannot reach a send before it joins the agreement.
    spec.tweak = [&](const RankEnv &env, Side &, Side &, xmc_transfer_args &, xmc_group &) {
        if (env.world_rank == kBadRank) fake.set_faults("fail:ncclSend:ncclSystemError@2");
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        if (env.world_rank == kBadRank) fake.set_faults(nullptr);
        if (r.status == XMC_OK) return f.push_back("succeeded, though an ncclSend failed");
        if (r.error.native_code != kNcclSystemError)
            f.push_back(std::string(xmc_status_string(r.status)) + " with native code " +
                        std::to_string(r.error.native_code) + ", not ncclSystemError (2): " + r.error.message);
        if (r.ms > no_hang_bound_ms())
            f.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                        std::to_string(no_hang_bound_ms()) + " ms");
    })));
}

// One rank cannot make the group's NCCL communicator (its ncclCommInitRank fails): it happens
// before any write, so every rank refuses with NCCL's code, and the targets stay poisoned. A fresh
// instance, so that no communicator is held already.
TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_NcclCommunicatorOneRankCannotJoin) {
    FakeNcclControl fake;
    XMC_NEEDS_FAKE_NCCL(fake);
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    xmc_instance *fresh = nullptr;
    ASSERT_EQ(api->open(&params, &fresh), XMC_OK);
    const Case c = mixed_case();
    RunSpec spec;
    spec.path = XMC_PATH_NCCL;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.tweak = [&](const RankEnv &env, Side &, Side &, xmc_transfer_args &, xmc_group &) {
        if (env.world_rank == kBadRank)
            fake.set_faults("fail:ncclCommInitRankConfig:ncclInternalError@1; fail:ncclCommInitRank:ncclInternalError@1");
    };
    const Failures f = run_on(api, fresh, c, spec, [&](const RankEnv &env, const RankResult &r, Failures &out) {
        if (env.world_rank == kBadRank) fake.set_faults(nullptr);
        refused_untouched(r, out);
        if (r.error.native_code != kNcclInternalError)
            out.push_back("native code " + std::to_string(r.error.native_code) + ", not ncclInternalError (3): " +
                          r.error.message);
    });
    EXPECT_EQ(api->close(fresh), XMC_OK);
    EXPECT_TRUE(all_ranks_passed(f));
}

// The NCCL path's communicators belong to the instance: made by its first NCCL transfer, used
// again by the next, and destroyed when it closes (the fake NCCL's ledger is back where it was).
TEST_P(TransferTest, AFF_PATH_NcclCommunicatorsGoWithTheInstance) {
    FakeNcclControl fake;
    XMC_NEEDS_FAKE_NCCL(fake);
    const uint64_t before = fake.live_comms();
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    xmc_instance *fresh = nullptr;
    ASSERT_EQ(api->open(&params, &fresh), XMC_OK);
    const Case c = mixed_case();
    RunSpec spec;
    spec.path = XMC_PATH_NCCL;
    uint64_t during = 0;
    for (int k = 0; k < 2; ++k) {
        EXPECT_TRUE(all_ranks_passed(run_on(api, fresh, c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            arrived(r, f);
        }))) << "transfer " << k;
        if (k == 0) {
            during = fake.live_comms();
        } else {
            EXPECT_EQ(fake.live_comms(), during) << "a second transfer of the group made another communicator";
        }
    }
    EXPECT_GT(during, before) << "no communicator was made";
    EXPECT_EQ(api->close(fresh), XMC_OK);
    EXPECT_EQ(fake.live_comms(), before) << "closing the instance left " << fake.live_comms() - before
                                         << " NCCL communicators alive";
}

// ===================== AFF-LAYOUT =====================

// The plan is made for holey targets and offset sources on every rank; one rank's entry of the
// plan's layouts (the same edit on every rank: it is the plan) then differs from the buffers that
// rank gives in one respect. Every rank refuses before any write.
void layout_differs(TransferTest &t, const std::string &what,
                    const std::function<void(xmc_plan_layout &)> &edit) {
    Case c = mixed_case(4096);
    for (const auto &r : c.target.ranks) c.tgt_layout[r.rank] = holey_layout(r.shard_shape);
    for (const auto &r : c.source.ranks) c.src_layout[r.rank] = make_layout(r.shard_shape, row_major_order(r.shard_shape), 1, 1, 3, 1);
    for (xmc_path p : t.paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak_layouts = [&](const RankEnv &, std::vector<xmc_plan_layout> &layouts) {
            for (xmc_plan_layout &l : layouts)
                if (l.rank == kBadRank) edit(l);
        };
        EXPECT_TRUE(all_ranks_passed(t.run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_before_any_message(r, f);
        }))) << what << ", path " << TransferTest::path_str(p);
    }
}

TEST_P(TransferTest, AFF_LAYOUT_StridesDifferFromThePlansAllRefuse) {
    layout_differs(*this, "the plan made for dense targets on rank 1", [](xmc_plan_layout &l) {
        int64_t stride = 1;
        for (int d = l.target.ndim; d-- > 0;) l.target.strides[d] = stride, stride *= l.target.shape[d];
    });
    layout_differs(*this, "the plan made for one source stride doubled on rank 1",
                   [](xmc_plan_layout &l) { l.source.strides[0] *= 2; });
}

TEST_P(TransferTest, AFF_LAYOUT_MemoryKindDiffersFromThePlansAllRefuse) {
    layout_differs(*this, "the plan made for another kind of target memory on rank 1", [](xmc_plan_layout &l) {
        l.target.kind = l.target.kind == XMC_MEM_DEVICE ? XMC_MEM_HOST : XMC_MEM_PINNED;
    });
    layout_differs(*this, "the plan made for registered source memory on rank 1",
                   [](xmc_plan_layout &l) { l.source.kind = XMC_MEM_REGISTERED; });
}

TEST_P(TransferTest, AFF_LAYOUT_ElementCountDiffersFromThePlansAllRefuse) {
    layout_differs(*this, "the plan made for a target one row longer on rank 1",
                   [](xmc_plan_layout &l) { l.target.shape[0] += 1; });
    layout_differs(*this, "the plan made for a source with an offset one element later on rank 1",
                   [](xmc_plan_layout &l) { l.source.offset += 1; });
}

TEST_P(TransferTest, AFF_LAYOUT_ElementSizeDiffersFromThePlansAllRefuse) {
    layout_differs(*this, "the plan made for 8-byte elements on rank 1", [](xmc_plan_layout &l) { l.elem_size = 8; });
}

// Ranks whose callers give different layouts for the same plan refuse as for differing plans.
TEST_P(TransferTest, AFF_LAYOUT_RanksGivenDifferentLayoutsAllRefuse) {
    const Case c = mixed_case(4096);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.tweak_layouts = [](const RankEnv &env, std::vector<xmc_plan_layout> &layouts) {
        if (env.world_rank != kBadRank) return;
        for (xmc_plan_layout &l : layouts)
            if (l.rank == 0) l.target.offset += 1;  // another rank's entry, as this rank's caller believes it
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_before_any_message(r, f);
    })));
}

// ===================== AFF-STAGING-REUSE =====================

// World rank 0 sends its strided source (every chunk packed into its outgoing staging) to world
// rank 1 in several chunks, over a transport that reads each send's buffer late and delivers every
// other message after the one sent after it. Staging reused before the send that reads it
// returned, or a receive that assumes delivery in order, corrupts the target.
TEST_P(TransferTest, AFF_STAGING_REUSE_LateReadsAndReorderedDeliveryLeaveTargetsExact) {
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 24;
    Case c = make_case(aff::split_sizes({24}, 0, on_first, labels_of(w)), aff::split_sizes({24}, 0, on_second, labels_of(w)),
                       4, 48);  // 2 chunks of 12 elements
    c.src_layout[0] = make_layout({24}, {0}, 2, 0, 1, 1);  // every other element: packed, never sent in place
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.delay_ms = 400;  // far longer than any send takes on a loaded machine
        spec.op_timeout_ms = 40000;
        spec.deadline_ms = 90000;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [p](const RankEnv &env, const RankResult &r, Failures &f) {
            status_ok(r, f);
            arrived(r, f);
            // With several chunks on the transport, one overtook another: the test tested.
            if (p == XMC_PATH_STAGED && env.world_rank == 0 && r.rec->peers.size() > 1 && r.rec->peers[1].sends >= 2 &&
                r.overtaken == 0)
                f.push_back("the delaying transport delivered nothing out of order: the test did not test");
        }))) << "path " << path_str(p);
    }
}

// Every pair both ways, small chunks, holey targets, over the late and reordering transport.
TEST_P(TransferTest, AFF_STAGING_REUSE_BothDirectionsOverALateReorderingTransport) {
    Case c = mixed_case(20);
    for (const auto &r : c.target.ranks) c.tgt_layout[r.rank] = holey_layout(r.shard_shape);
    for (const auto &r : c.source.ranks) c.src_layout[r.rank] = holey_layout(r.shard_shape);
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.delay_ms = 3;
        spec.op_timeout_ms = 20000;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            arrived(r, f);
        }))) << "path " << path_str(p);
    }
}

// ===================== AFF-RESULT =====================

TEST_P(TransferTest, AFF_RESULT_StatisticsAreThePlansTotalsOnEveryRank) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       arrived(r, f);
                       result_is_the_plan(r, f);
                   });
}

// World rank 0's messages never arrive (its transport answers every send as done): the ranks
// waiting for its chunks fail within the bound of AFF-NO-HANG, and so does rank 0 itself: none
// reports success.
TEST_P(TransferTest, AFF_RESULT_PeerThatNeverSendsIsAnErrorNeverASuccess) {
    const Case c = mixed_case(16);
    RunSpec spec;
    spec.path = XMC_PATH_STAGED;  // the path whose data are messages
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.drop_sends = [](const RankEnv &env) { return env.world_rank == 0; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        failed_in_time(r, f);
    })));
}

// Case c on every path, each rank freeing (or overwriting) its source as soon as its own call
// returns, every device copy held back 50 ms over the fake driver: every target must be exact.
void expect_exact_with_sources_freed_on_return(TransferTest &t, const xmc_backend *api, xmc_instance *inst,
                                               const Case &c) {
    std::string why;
    const DriverControl *dc = uses_device_buffers(api, inst) ? driver_control(api, &why) : nullptr;
    const char *slow = "exec_delay:cuMemcpyAsync:50ms; exec_delay:cuMemcpy2DAsync:50ms; "
                       "exec_delay:cuMemcpy3DAsync:50ms; exec_delay:cuMemcpyPeerAsync:50ms; "
                       "exec_delay:cuMemcpy3DPeerAsync:50ms";
    for (xmc_path p : t.paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        spec.freed_on_return = true;
        if (dc) {
            ASSERT_EQ(dc->set_faults(slow), 0) << "the fake refused the delay script";
        }
        const Failures f = t.run(c, spec, [](const RankEnv &, const RankResult &r, Failures &out) {
            status_ok(r, out);
            arrived(r, out);
        });
        if (dc) dc->set_faults(nullptr);
        EXPECT_TRUE(all_ranks_passed(f)) << "path " << TransferTest::path_str(p);
    }
}

// Every rank frees (or overwrites) its source as soon as its own call returns: a rank returns only
// once every byte it sent has arrived, so what the others received is still exact. Over the fake
// driver every device copy is held back 50 ms, so a reader that reports success before its copies
// ran is caught.
TEST_P(TransferTest, AFF_RESULT_SourcesFreedOnReturnLeaveTargetsExact) {
    expect_exact_with_sources_freed_on_return(*this, api, inst, mixed_case(4096));
}

// World rank 0 sends, world rank 1 receives, nothing else: the sender has nothing to read and
// returns as soon as the completion vote lets it, and frees its source at once. The receiver's
// vote must mean that it is done reading (over the fake driver every device copy is held back
// 50 ms): a source freed while its reader still pulls from it leaves zeros in the target.
TEST_P(TransferTest, AFF_RESULT_OneWaySourceFreedOnReturnLeavesTargetExact) {
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 1024;  // 8 KiB in chunks of 2 KiB when staged
    const Case c = make_case(aff::split_sizes({1024, 2}, 0, on_first, labels_of(w)),
                             aff::split_sizes({1024, 2}, 0, on_second, labels_of(w)), 4, 2048);
    expect_exact_with_sources_freed_on_return(*this, api, inst, c);
}

// ===================== the fault sweep of transfers (AFF-NO-HANG) =====================

// One run of the transfer scenario (fault_sweep.hpp): three ranks, threads of this process over
// the threads transport, sharing the run's instance, on devices 0, 1, 0 (one per rank, round
// robin): every rank's buffers are device memory, each target written by local copies and by
// segments from both other ranks. The mixed case runs twice, forced on the direct path (peer
// pulls) and on the staged path (pinned arenas over the transport, in chunks), each transfer one
// step ("direct transfer_execute", "staged transfer_execute"). Whichever rank's call the fault
// meets, every rank must return an error in time (none hangs, none reports success), the rank
// that met it must report XMC_ERR_DRIVER with the driver's code naming transfer_execute, and the
// driver must hold nothing once the run's instance is closed. Without a fault every target is
// exact (AFF-EXEC-EXACT).
constexpr int kSweepRanks = 3;
constexpr uint32_t kSweepOpTimeoutMs = 150;  // each rank may wait out one operation per peer in turn
constexpr double kSweepBoundMs = kSweepOpTimeoutMs * (kSweepRanks + 2) + 2000;

struct SweptRank {
    Memory mem;
    Side src, tgt;
    std::vector<uint8_t> expected;  // the target's storage image when the transfer succeeded
    xmc_status status = XMC_OK;
    xmc_error_info error{};
    double ms = 0;
};

void transfer_phase(Run &r, const std::string &phase, xmc_path path, uint64_t budget) {
    const std::vector<int> labels = labels_of(kSweepRanks);
    const Case c = make_case(aff::split_even(kShape, 0, labels), aff::split_even(kShape, 1, labels), 4, budget);
    const aff::Bytes full = tensor_bytes(c.source.shape, c.elem, c.data_seed);
    std::vector<SweptRank> ranks(kSweepRanks);
    bool ready = true;
    r.step(phase + "-setup");
    for (int i = 0; ready && i < kSweepRanks; ++i) {
        SweptRank &k = ranks[size_t(i)];
        k.mem = Memory{r.api, r.inst, true, i % r.env().devices, nullptr};
        if (!r.ok(r.api->stream_create(r.inst, k.mem.ordinal, &k.mem.stream), "stream_create")) {
            ready = false;
            break;
        }
        const aff::Bytes src_shard = *aff::extract_shard(c.source, i, full, c.elem);
        const aff::Bytes tgt_shard = *aff::extract_shard(c.target, i, full, c.elem);
        k.src = make_side(c.source, i, c.src_layout, c.elem, &src_shard);
        k.tgt = make_side(c.target, i, c.tgt_layout, c.elem, nullptr);
        k.expected = make_side(c.target, i, c.tgt_layout, c.elem, &tgt_shard).store;
        try {
            k.src.put(k.mem);
            k.tgt.put(k.mem);
        } catch (const std::exception &) {
            // Only a site of a timing-dependent entry point lands here; the detail is the call's.
            r.ok(XMC_ERR_DRIVER, "dev_alloc/copy");
            ready = false;
        }
    }
    if (ready) {
        const std::vector<xmc_segment> segs = abi_segments(c.plan);
        const std::vector<xmc_plan_layout> layouts = plan_layouts(c, XMC_MEM_DEVICE);
        ThreadsMailbox box(kSweepRanks, kSweepOpTimeoutMs);
        r.step(phase + " transfer_execute");
        std::vector<std::thread> threads;
        for (int i = 0; i < kSweepRanks; ++i)
            threads.emplace_back([&, i] {
                SweptRank &k = ranks[size_t(i)];
                std::vector<int32_t> group_labels(labels.begin(), labels.end());
                const xmc_group g{i, kSweepRanks, group_labels.data(), box.endpoint(i), kSweepOpTimeoutMs};
                std::vector<xmc_path> paths(size_t(kSweepRanks), XMC_PATH_AUTO);
                xmc_transfer_args a{};
                a.struct_size = sizeof a;
                a.plan = xmc_plan_view{segs.data(), segs.size(), c.plan.digest};
                a.source = k.src.buf;
                a.target = k.tgt.buf;
                a.elem_size = c.elem;
                a.staging_budget = c.budget;
                a.group = &g;
                a.stream = k.mem.stream;
                a.path = path;
                a.peer_paths = paths.data();
                a.layouts = layouts.data();
                a.layout_count = layouts.size();
                xmc_transfer_stats stats{};
                const auto t0 = std::chrono::steady_clock::now();
                k.status = r.api->transfer_execute(r.inst, &a, &stats);
                k.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                r.api->last_error(r.inst, &k.error);  // this thread's
            });
        for (auto &t : threads) t.join();
        r.step(phase + "-check");
        int failed = 0, reporting = -1;
        for (int i = 0; i < kSweepRanks; ++i) {
            const SweptRank &k = ranks[size_t(i)];
            failed += k.status != XMC_OK;
            if (k.ms > kSweepBoundMs)
                r.problem("AFF-NO-HANG: rank " + std::to_string(i) + " returned after " + std::to_string(int(k.ms)) +
                          " ms, over the bound of " + std::to_string(int(kSweepBoundMs)) + " ms");
            // The rank that met the fault: a driver error of its own with the code. A peer's code in
            // another rank's error (peer_failed) is how the failure reached that rank.
            if (reporting < 0 && k.status == XMC_ERR_DRIVER && k.error.native_code == r.code()) reporting = i;
        }
        if (failed > 0 && failed < kSweepRanks) {
            std::string who;
            for (int i = 0; i < kSweepRanks; ++i)
                who += "\n  rank " + std::to_string(i) + ": " + xmc_status_string(ranks[size_t(i)].status) +
                       " [native " + std::to_string(ranks[size_t(i)].error.native_code) + "] " +
                       ranks[size_t(i)].error.message;
            r.problem("AFF-NO-HANG: " + std::to_string(kSweepRanks - failed) + " rank(s) reported success while " +
                      std::to_string(failed) + " failed:" + who);
        }
        if (failed > 0) {
            const SweptRank &k = ranks[size_t(reporting >= 0 ? reporting : 0)];
            if (reporting < 0 && r.fired())
                r.problem("no rank's error is the injected fault (driver_error with native code " +
                          std::to_string(r.code()) + "); rank 0 got " + xmc_status_string(k.status) + " [native " +
                          std::to_string(k.error.native_code) + "] " + k.error.message);
            else
                r.ok_with(k.status, k.error, "transfer_execute");
        } else {
            // AFF-EXEC-EXACT: success is exact on every rank.
            for (int i = 0; i < kSweepRanks; ++i) {
                SweptRank &k = ranks[size_t(i)];
                try {
                    k.tgt.fetch();
                } catch (const std::exception &) {
                    r.ok(XMC_ERR_DRIVER, "copy");
                    continue;
                }
                if (const std::string d = first_difference(k.tgt.store, k.expected, c.elem); !d.empty())
                    r.problem("rank " + std::to_string(i) + " reported success, but its target differs: " + d);
            }
        }
    }
    r.step(phase + "-teardown");
    for (SweptRank &k : ranks) {
        k.src.release();
        k.tgt.release();
        if (k.mem.stream)
            if (!r.ok(r.api->stream_destroy(r.inst, k.mem.stream), "stream_destroy"))
                r.must_succeed(r.api->stream_destroy(r.inst, k.mem.stream), "stream_destroy", "the retry");
    }
}

void transfer_scenario(Run &r) {
    if (r.inst && r.problems.empty()) transfer_phase(r, "direct", XMC_PATH_DIRECT, 4096);
    if (r.inst && r.problems.empty()) transfer_phase(r, "staged", XMC_PATH_STAGED, 16);
    r.close();
}
const Scenario kTransfer{"transfer", transfer_scenario};

TEST_P(FaultSweep, AFF_NO_HANG_FaultSweepOfTheDirectPathFailsEveryRankInTimeWithTheCode) {
    sweep(kTransfer, {"direct"});
}

TEST_P(FaultSweep, AFF_NO_HANG_FaultSweepOfTheStagedPathFailsEveryRankInTimeWithTheCode) {
    sweep(kTransfer, {"staged"});
}

XMC_INSTANTIATE_FOR_BACKENDS(TransferTest);
// HostileTest is instantiated by xmc (suites.cpp); xmc_multirank, which
// compiles this file alone, runs the TransferTest bodies only.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HostileTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FaultSweep);

} // namespace
} // namespace xmc::conformance
