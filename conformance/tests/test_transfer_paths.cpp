// AFF-*: the affine transfer executor (SPEC 5; test_transfer.cpp says how the three files divide
// the requirements): AFF-NO-HANG, AFF-PATH, the NCCL path and the fault sweep of transfers.
#include "transfer_tests.hpp"

namespace xmc::conformance {
namespace {

// ===================== AFF-NO-HANG =====================

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
    // middle of the exchange. With two ranks (qualify --procs 2) rank 1 has one peer, so a backend
    // that stages a direction whole (the staging-budget bugs: AFF-STAGING) makes two operations in
    // all: its second fails then (an operation 3 would never come, and the transfer rightly succeed).
    const int64_t middle = world().size() >= 3 ? 3 : 1;
    for (int64_t op : {int64_t{0}, middle}) {
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

// ===================== AFF-PATH =====================

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

// Exact targets, the path reported for every peer with data, and bytes on the transport exactly
// where the path says (staged: every byte once; otherwise none).
void moved_as_reported(const RankEnv &env, const RankResult &r, Failures &f) {
    status_ok(r, f);
    arrived(r, f);
    paths_reported(env, r, f);
    traffic_by_path(r, f);
}

// On each path taken here: exact targets, the path reported for every peer with data, and bytes
// on the transport exactly where the path says (staged: every byte once; otherwise none).
TEST_P(TransferTest, AFF_PATH_EachPathTakenMovesTheDataAsReported) {
    const Case c = mixed_case(24);
    for (xmc_path p : paths_to_test()) {
        RunSpec spec;
        spec.path = p;
        EXPECT_TRUE(all_ranks_passed(run(c, spec, moved_as_reported))) << "path " << path_str(p);
    }
    // Left to the backend: a path for every peer with data, and none for the others.
    RunSpec own;
    own.path = XMC_PATH_AUTO;
    EXPECT_TRUE(all_ranks_passed(run(c, own, moved_as_reported))) << "the backend's own choice";
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
        RunSpec spec = refusal_spec();
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
    // Its second send; with two ranks (qualify --procs 2) its first: a backend that sends a peer
    // direction whole (AFF-STAGING's bugs) sends once to its one peer, and a second send that never
    // comes would blame this requirement for a transfer that rightly succeeded.
    const char *script = world().size() >= 3 ? "fail:ncclSend:ncclSystemError@2" : "fail:ncclSend:ncclSystemError@1";
    spec.tweak = [&](const RankEnv &env, Side &, Side &, xmc_transfer_args &, xmc_group &) {
        if (env.world_rank == kBadRank) fake.set_faults(script);
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        if (env.world_rank == kBadRank) fake.set_faults(nullptr);
        failed_with_code_in_time(r, kNcclSystemError, "ncclSystemError", f);
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
// Each rank may wait out one operation per peer in turn; a site whose run the machine held up
// past it before the fault was reached runs again (Run::attempt) with 4 and 16 times as long.
constexpr uint32_t kSweepOpTimeoutMs = 150;
uint32_t sweep_op_timeout_ms(const Run &r) { return kSweepOpTimeoutMs << (2 * r.attempt); }
double sweep_bound_ms(const Run &r) { return sweep_op_timeout_ms(r) * (kSweepRanks + 2) + 2000.0; }

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
        ThreadsMailbox box(kSweepRanks, sweep_op_timeout_ms(r));
        r.step(phase + " transfer_execute");
        std::vector<std::thread> threads;
        for (int i = 0; i < kSweepRanks; ++i)
            threads.emplace_back([&, i] {
                SweptRank &k = ranks[size_t(i)];
                std::vector<int32_t> group_labels(labels.begin(), labels.end());
                const xmc_group g{i, kSweepRanks, group_labels.data(), box.endpoint(i), sweep_op_timeout_ms(r)};
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
            if (k.ms > sweep_bound_ms(r))
                r.problem("AFF-NO-HANG: rank " + std::to_string(i) + " returned after " + std::to_string(int(k.ms)) +
                          " ms, over the bound of " + std::to_string(int(sweep_bound_ms(r))) + " ms");
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

// ===================== the fault sweep of the paths between processes (AFF-NO-HANG) =====================

// The IPC and NCCL paths need ranks in processes of their own (a world of processes: `xmc qualify`'s
// --procs, the multirank ctests), where the sweep above (threads of one process, a fresh child per
// site) cannot go. Here every rank process runs the sweep together, one transfer per site: a clean
// run twice counts each rank's driver and NCCL calls made inside transfer_execute (the harness's
// own copies before and after are not counted, nor failed); then for each rank of the first two
// and each call it made, one run fails exactly that call on that rank only (CUDA_ERROR_UNKNOWN;
// ncclSystemError for an NCCL entry). Every rank must then fail within the bound with the
// injected code (the rank that met it: driver_error naming transfer_execute, or refused where
// nothing was written yet; the others may learn less), or every rank succeed exactly (the backend recovered; listed). Each run has an instance
// of its own, and once it is closed no rank's driver may hold more objects, nor its NCCL more
// communicators, than before it was opened: an exported or imported handle, a mapping, a
// reservation, a stream of the failed path left behind fails the site (one whose release failed
// must be released again by the close at the latest). A rank past the second meets
// the calls rank 1 meets (every rank but 0 is a peer that imports and is imported from).
constexpr const char *kNcclEntries[] = {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank",
                                        "ncclCommInitRankConfig", "ncclCommDestroy", "ncclCommAbort",
                                        "ncclCommGetAsyncError", "ncclSend", "ncclRecv",
                                        "ncclGroupStart", "ncclGroupEnd"};
constexpr int64_t kNcclInjected = kNcclSystemError;

// One rank process's fakes: counters of every entry (the CUDA driver's, and the NCCL's on the
// NCCL path), and a fault aimed at the j-th call of one of them.
struct ProcessFakes {
    const DriverControl *dc = nullptr;
    FakeHooks cuda;
    FakeNcclControl nccl;

    static bool is_nccl(const std::string &entry) { return entry.rfind("nccl", 0) == 0; }
    Counts counts() const {
        Counts c = cuda.counts();
        if (nccl.calls)
            for (const char *e : kNcclEntries)
                if (uint64_t n = nccl.calls(e)) c[e] = n;
        return c;
    }
    int64_t code(const std::string &entry) const { return is_nccl(entry) ? kNcclInjected : cuda.code; }
    std::string script(const std::string &entry, uint64_t j) const {
        return is_nccl(entry) ? "fail:" + entry + ":ncclSystemError@" + std::to_string(j) : cuda.fail_call(entry, j);
    }
    bool arm(const std::string &entry, uint64_t j) const {
        const std::string s = script(entry, j);
        return is_nccl(entry) ? nccl.set_faults(s.c_str()) == 0 : dc->set_faults(s.c_str()) == 0;
    }
    void disarm() const {
        dc->set_faults(nullptr);
        if (nccl.set_faults) nccl.set_faults(nullptr);
    }
};

struct WorldSite {
    int rank = 0;
    std::string entry;
    uint64_t j = 0;
    std::string name() const { return entry + " #" + std::to_string(j) + " on world rank " + std::to_string(rank); }
};

std::string comma_list(const std::set<std::string> &names) {
    std::string s;
    for (const std::string &n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

// What each rank says of its run, as lines run() gathers from every process.
const std::string kCountLine = "world-sweep count ", kOutcomeLine = "world-sweep outcome ";

// (`api` passed in: BackendTest keeps it protected.)
void sweep_between_processes(TransferTest &t, const xmc_backend *api, xmc_path path, bool source_in_slot) {
    const TransferTest::PathsHere &h = t.paths_here();
    const std::string path_name = TransferTest::path_str(path);
    if (std::find(h.taken.begin(), h.taken.end(), path) == h.taken.end())
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' takes no path " << path_name << " over the "
                                                     << world().name() << " transport");
    if (std::string(world().name()) == "threads")
        XMC_SKIP(SkipKind::Unsupported, "ranks are threads of one process, where a fault cannot be aimed at one rank "
                                        "(FaultSweep sweeps the paths a thread world takes)");
    // The sites are the calls of world ranks 0 and 1, which a world of 2 meets as one of 4 does;
    // at 4 ranks the sweep took 34 s of the PR gate's multirank runs (the np2 runs sweep).
    if (world().size() > 2)
        XMC_SKIP(SkipKind::Unsupported, "swept in worlds of 2 processes (the np2 runs, xmc qualify's --procs 2); "
                                        "this world has " << world().size());
    if (const xmc_path p = t.configured_path(); p != XMC_PATH_AUTO && p != path)
        XMC_SKIP(SkipKind::Unsupported, "this run tests path " << TransferTest::path_str(p) << " only (XMC_TRANSFER_PATH)");
    ProcessFakes fakes;
    std::string why;
    fakes.dc = driver_control(api, &why);
    if (!fakes.dc) XMC_SKIP(SkipKind::Unsupported, "the faults are injected through the fake driver: " << why);
    if (!resolve_hooks(*fakes.dc, &fakes.cuda, &why)) XMC_SKIP(SkipKind::Unsupported, why);
    if (path == XMC_PATH_NCCL && !(fakes.nccl = fake_nccl()).calls)
        XMC_SKIP(SkipKind::Unsupported, "the NCCL loaded is not the fake NCCL (XMC_NCCL_LIBRARY), whose calls are swept");

    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 64);
    // One run: the site's fault armed on its rank just before transfer_execute and disarmed just
    // after, this process's calls and driver objects taken around the call alone.
    auto run_site = [&](const WorldSite *site) {
        const size_t objects_before = fakes.dc->objects_besides_contexts();
        const uint64_t comms_before = fakes.nccl.live_comms ? fakes.nccl.live_comms() : 0;
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        xmc_instance *fresh = nullptr;
        if (xmc_status st = api->open(&params, &fresh); st != XMC_OK)
            return Failures{"test setup: open failed with " + std::string(xmc_status_string(st))};
        RunSpec spec;
        spec.path = path;
        spec.source_in_slot = source_in_slot;
        spec.op_timeout_ms = kOpTimeoutMs;
        spec.deadline_ms = no_hang_bound_ms() + 1000;
        struct Seen {
            Counts made;
            uint64_t unnamed = 0;  // driver calls the fake counted that no entry of the sweep accounts for
            bool armed = true;
        };
        auto seen = std::make_shared<std::map<int, Seen>>();  // by world rank (one per process here)
        auto mu = std::make_shared<std::mutex>();
        int here_rank = -1;  // this process's world rank (one per process here)
        spec.call = [&, seen, mu](const PreparedCall &pc) {
            const bool mine = site && site->rank == pc.env.world_rank;
            Seen s;
            if (mine) s.armed = fakes.arm(site->entry, site->j);
            const Counts before = fakes.counts();
            const uint64_t total_before = fakes.cuda.call_count(nullptr);
            const xmc_status st = pc.api->transfer_execute(pc.inst, &pc.args, &pc.stats);
            const uint64_t total = fakes.cuda.call_count(nullptr) - total_before;
            const Counts after = fakes.counts();
            if (mine) fakes.disarm();
            for (const auto &[e, n] : after) {
                const auto b = before.find(e);
                if (const uint64_t d = n - (b == before.end() ? 0 : b->second)) s.made[e] = d;
            }
            uint64_t named = 0;
            for (const auto &[e, n] : s.made)
                if (!ProcessFakes::is_nccl(e)) named += n;
            s.unnamed = total > named ? total - named : 0;
            std::lock_guard<std::mutex> lk(*mu);
            (*seen)[pc.env.world_rank] = s;
            here_rank = pc.env.world_rank;
            return st;
        };
        Failures lines = t.run_on(api, fresh, c, spec, [&, seen, mu](const RankEnv &env, const RankResult &r, Failures &out) {
            Seen s;
            {
                std::lock_guard<std::mutex> lk(*mu);
                s = (*seen)[env.world_rank];
            }
            const std::string me = std::to_string(env.world_rank);
            if (!s.armed) out.push_back("test setup: the fake refused the fault script " + fakes.script(site->entry, site->j));
            const bool mine = site && site->rank == env.world_rank;
            const auto it = mine ? s.made.find(site->entry) : s.made.end();
            const bool fired = mine && it != s.made.end() && it->second >= site->j;
            out.push_back(kOutcomeLine + me + " " + std::to_string(int(r.status)) + " " +
                          std::to_string(r.error.native_code) + " " + (fired ? "fired" : "-"));
            if (!site)
                for (const auto &[e, n] : s.made) out.push_back(kCountLine + me + " " + e + " " + std::to_string(n));
            // A call of an entry the sweep does not list would never be failed: the IPC path's
            // export, import and handle calls were missing so until this check.
            if (!site && s.unnamed > 0)
                out.push_back("the fake driver counted " + std::to_string(s.unnamed) + " calls inside transfer_execute "
                              "of entries the sweep does not list (kCudaEntries, fault_sweep.cpp)");
            if (r.status == XMC_OK) {
                exact(r, out);
            } else if (!site) {
                status_ok(r, out);
            } else {
                // Every rank fails in time; the one whose call failed says so: driver_error with the
                // injected code, naming transfer_execute (its peers may learn less than the code).
                if (r.ms > no_hang_bound_ms())
                    out.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                                  std::to_string(no_hang_bound_ms()) + " ms");
                // A failure before any write may be a refusal (every rank refuses, nothing written:
                // AFF-REFUSE-BEFORE-WRITE), still with the code.
                if (r.status == XMC_ERR_REFUSED) refused_untouched(r, out);
                const bool own = r.status == XMC_ERR_DRIVER || r.status == XMC_ERR_REFUSED;
                if (mine && fired && (!own || r.error.native_code != fakes.code(site->entry) ||
                                      std::strcmp(r.error.call, "transfer_execute") != 0))
                    out.push_back(std::string("the rank whose ") + site->entry + " failed answered " +
                                  xmc_status_string(r.status) + " [native " + std::to_string(r.error.native_code) +
                                  ", call '" + r.error.call + "'] " + r.error.message +
                                  ": not driver_error (or refused) with the injected code " +
                                  std::to_string(fakes.code(site->entry)) + " naming transfer_execute");
            }
        });
        // This process's own: its failure is reported by its rank alone.
        const std::string here = "world rank " + std::to_string(here_rank) + ": ";
        if (xmc_status st = api->close(fresh); st != XMC_OK)
            lines.push_back(here + "closing the run's instance failed with " + xmc_status_string(st));
        if (const size_t now = fakes.dc->objects_besides_contexts(); now != objects_before)
            lines.push_back(here + "the driver holds " + std::to_string(now) + " objects besides contexts once the "
                            "run's instance is closed, " + std::to_string(objects_before) + " before it was opened:\n" +
                            fakes.dc->ledger_text());
        if (const uint64_t now = fakes.nccl.live_comms ? fakes.nccl.live_comms() : 0; now != comms_before)
            lines.push_back(here + "NCCL holds " + std::to_string(now) + " communicators once the run's instance is "
                            "closed, " + std::to_string(comms_before) + " before it was opened");
        return lines;
    };
    // The lines of one run: the counts and outcomes apart, the rest problems.
    struct Lines {
        std::map<std::pair<int, std::string>, uint64_t> counts;
        int ok = 0, failed = 0;
        bool fired = false;
        Failures problems;
    };
    auto split = [](const Failures &lines) {
        Lines l;
        for (const std::string &x : lines) {
            if (const size_t at = x.find(kCountLine); at != std::string::npos) {
                std::istringstream in(x.substr(at + kCountLine.size()));
                int rank = 0;
                std::string e;
                uint64_t n = 0;
                in >> rank >> e >> n;
                l.counts[{rank, e}] = n;
            } else if (const size_t at2 = x.find(kOutcomeLine); at2 != std::string::npos) {
                std::istringstream in(x.substr(at2 + kOutcomeLine.size()));
                int rank = 0, status = 0;
                long long native = 0;
                std::string fired;
                in >> rank >> status >> native >> fired;
                (status == XMC_OK ? l.ok : l.failed) += 1;
                l.fired = l.fired || fired == "fired";
            } else {
                l.problems.push_back(x);
            }
        }
        return l;
    };

    // Two clean runs: the sites, and the entries whose count varies with timing (a poll).
    const Lines first = split(run_site(nullptr)), second = split(run_site(nullptr));
    // A transfer that fails with no fault injected is the business of the requirement it breaks
    // (AFF-PATH, AFF-EXEC-EXACT report it); this one has nothing to sweep then.
    if (!first.problems.empty() || !second.problems.empty())
        XMC_SKIP(SkipKind::Unsupported, "the transfer on path " << path_name << " fails with no fault injected, so "
                 "there is no clean run to sweep (its own requirement reports it): "
                 << join(!first.problems.empty() ? first.problems : second.problems));
    const int swept = world().size();
    std::vector<WorldSite> sites;
    std::set<std::string> varying;
    for (const auto &[key, n] : first.counts) {
        if (key.first >= swept) continue;
        const auto o = second.counts.find(key);
        const uint64_t m = o == second.counts.end() ? 0 : o->second;
        if (m != n) varying.insert(key.second);
        for (uint64_t j = 1; j <= std::min(n, m); ++j) sites.push_back({key.first, key.second, j});
    }
    ASSERT_FALSE(sites.empty()) << "the clean run made no driver call inside transfer_execute on path " << path_name;

    int failing = 0, recovered = 0, unreached = 0;
    std::set<std::string> entries;
    std::string recovered_names;
    for (const WorldSite &site : sites) {
        entries.insert(site.entry);
        const Lines l = split(run_site(&site));
        if (l.ok > 0 && l.failed > 0)
            ADD_FAILURE() << "AFF-NO-HANG: failing " << site.name() << " on path " << path_name << ": " << l.ok
                          << " rank(s) reported success while " << l.failed << " failed\n"
                          << join(l.problems);
        else
            EXPECT_TRUE(all_ranks_passed(l.problems)) << "failing " << site.name() << " on path " << path_name;
        if (l.failed > 0) ++failing;
        else if (l.fired) ++recovered, recovered_names += "  " + site.name() + "\n";
        else ++unreached;
    }
    std::cout << "fault sweep of path " << path_name << (source_in_slot ? " (sources in slots)" : "") << " across "
              << world().size() << " processes: " << sites.size() << " sites of " << entries.size()
              << " entries on world ranks 0-" << swept - 1 << ": " << failing << " failed every rank, " << recovered
              << " recovered, " << unreached << " not reached (a count that varies: "
              << (varying.empty() ? std::string("none") : comma_list(varying)) << ")\n"
              << recovered_names;
    ::testing::Test::RecordProperty("world_sweep_sites", int(sites.size()));
}

TEST_P(TransferTest, AFF_NO_HANG_FaultSweepOfTheIpcPathFailsEveryProcessInTimeWithTheCode) {
    sweep_between_processes(*this, api, XMC_PATH_IPC, false);
}

// The same with every source in a slot: a peer imports it by a file descriptor of its physical
// memory (export, import, map, set access), not by a legacy IPC handle.
TEST_P(TransferTest, AFF_NO_HANG_FaultSweepOfTheIpcPathFromSlotsFailsEveryProcessInTimeWithTheCode) {
    sweep_between_processes(*this, api, XMC_PATH_IPC, true);
}

TEST_P(TransferTest, AFF_NO_HANG_FaultSweepOfTheNcclPathFailsEveryProcessInTimeWithTheCode) {
    sweep_between_processes(*this, api, XMC_PATH_NCCL, false);
}

} // namespace
} // namespace xmc::conformance
