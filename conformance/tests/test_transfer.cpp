// AFF-EXEC-EXACT .. AFF-GROUP: the affine transfer executor (SPEC 5). Every test body of a
// transfer requirement, run on every selected backend and on every rank of a world: the checks
// (each a few lines, combined by the tests), the fixed and random cases, and the hostile
// arguments of one call (HostileTest). Expected contents come from the model's oracle
// (extract_shard of the full tensor). Traffic is recorded at the transport. Nothing is taken on
// the backend's word. The buffers, the fixture and how a case runs on every rank:
// transfer_env.hpp. These files (with transfer_tests.hpp) are also compiled, alone,
// into `xmc_multirank`. Three of them, by requirement: here AFF-EXEC-EXACT,
// AFF-REFUSE-BEFORE-WRITE, AFF-AGREE, AFF-STAGING, AFF-ACCOUNT and AFF-GROUP;
// test_transfer_paths.cpp AFF-NO-HANG, AFF-PATH, the NCCL path and the fault sweep;
// test_transfer_layouts.cpp AFF-MAP-FLAT, AFF-LAYOUT, AFF-STAGING-REUSE and AFF-RESULT.
#include "transfer_tests.hpp"

namespace xmc::conformance {
namespace {

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

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_BufferTooSmallOnOneRank) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec = refusal_spec();
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
        RunSpec spec = refusal_spec();
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
        EXPECT_TRUE(all_ranks_passed(run(c, bad_rank_runs(c, other), [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_MissingBinding) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec = refusal_spec();
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
    RunSpec spec = refusal_spec();
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
        RunSpec spec = refusal_spec();
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

// Every rank refuses (that nothing was written is AFF-REFUSE-BEFORE-WRITE's).
void all_refuse(const RankEnv &, const RankResult &r, Failures &f) {
    if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
}

// World rank 1 runs another request than the others, valid on its own. All must refuse.
TEST_P(TransferTest, AFF_AGREE_DifferentPlansAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    const Case other = make_case(aff::block_cyclic(kShape, 0, 1, all), aff::split_even(kShape, 1, all), 4, 4096);
    ASSERT_NE(c.plan.digest, other.plan.digest);
    EXPECT_TRUE(all_ranks_passed(run(c, bad_rank_runs(c, other), all_refuse)));
}

TEST_P(TransferTest, AFF_AGREE_DifferentElementSizesAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.elem = 2;
    EXPECT_TRUE(all_ranks_passed(run(c, bad_rank_runs(c, other), all_refuse)));
}

TEST_P(TransferTest, AFF_AGREE_DifferentBudgetsAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.budget = 64;
    EXPECT_TRUE(all_ranks_passed(run(c, bad_rank_runs(c, other), all_refuse)));
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

XMC_INSTANTIATE_FOR_BACKENDS(TransferTest);
// HostileTest is instantiated by xmc (suites.cpp); xmc_multirank, which
// links the transfer files (test_transfer*.cpp) without suites.cpp, runs the TransferTest bodies only.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HostileTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FaultSweep);

} // namespace
} // namespace xmc::conformance
