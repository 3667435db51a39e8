// AFF-*: the affine transfer executor (SPEC 5; test_transfer.cpp says how the three files divide
// the requirements): AFF-MAP-FLAT, AFF-LAYOUT, AFF-STAGING-REUSE and AFF-RESULT.
#include "transfer_tests.hpp"

#include <dlfcn.h>

namespace xmc::conformance {
namespace {

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
    RunSpec spec = refusal_spec();
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
    RunSpec spec = refusal_spec();
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

// On path NCCL over the fake NCCL (XMC_NCCL_LIBRARY names it): every group's work held back `ms` on
// its stream (exec_delay), as a loaded network holds a real one, so a round taken as done before its
// stream passed it, with staging touched off that stream, shows in the target. ncclGroupEnd only
// queues the work there. Nothing on other paths, or over a real NCCL (its timing is its own).
class NcclLateWork {
public:
    NcclLateWork(xmc_path p, unsigned ms) {
        const char *lib = std::getenv("XMC_NCCL_LIBRARY");
        if (p != XMC_PATH_NCCL || !lib || !*lib) return;
        // The library the backend loads (or has loaded): one copy per process either way.
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        set_ = h ? reinterpret_cast<int (*)(const char *)>(dlsym(h, "xmc_fake_nccl_set_faults")) : nullptr;
        if (set_ && set_(("exec_delay:ncclGroupEnd:" + std::to_string(ms) + "ms").c_str()) != 0) set_ = nullptr;
    }
    ~NcclLateWork() {
        if (set_) set_("");
    }
    NcclLateWork(const NcclLateWork &) = delete;
    NcclLateWork &operator=(const NcclLateWork &) = delete;

private:
    int (*set_)(const char *) = nullptr;
};

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
        const NcclLateWork late(p, 400);
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
        const NcclLateWork late(p, 50);
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

} // namespace
} // namespace xmc::conformance
