// AFF-PREPARED-*: transfers prepared once and run many times (SPEC 3 transfer_prepared, SPEC 5).
// Each test's ranks call transfer_prepare, transfer_run and transfer_release in place of the one
// transfer_execute of the other transfer tests (RunSpec::call); what a run moved is checked
// inside the sequence against the oracle (extract_shard of the full tensor of that run's data),
// and the last run's result by the usual checks. A rank's extra findings go to `Notes`, read by
// its check. Memory the backend can see freed is its own: dev_alloc's (device memory, or on the
// host backend its host "device" memory) and slots.
#include "prepared_tracked.hpp"
#include "transfer_tests.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <thread>

namespace xmc::conformance {
namespace {

// Per rank label: what its sequence found beyond the status it returns.
struct Notes {
    std::mutex mu;
    std::map<int, Failures> by_rank;
    void add(const RankEnv &env, const std::string &s) {
        std::lock_guard<std::mutex> lk(mu);
        by_rank[env.label()].push_back(s);
    }
    void into(const RankEnv &env, Failures &f) {
        std::lock_guard<std::mutex> lk(mu);
        for (auto &s : by_rank[env.label()]) f.push_back(s);
    }
};

// The storage image of `m`'s shard of rank `me` when the full tensor holds the data of `seed`.
std::vector<uint8_t> image(const Case &c, const aff::Map &m, const std::map<int, Layout> &layouts, int me,
                           uint64_t seed) {
    const aff::Bytes full = tensor_bytes(c.source.shape, c.elem, seed);
    aff::Bytes shard;
    if (layout_of(m, me)) shard = *aff::extract_shard(m, me, full, c.elem);
    return make_side(m, me, layouts, c.elem, &shard).store;
}

// The source gets the data of `seed` where it lives; returns the target image a run must give.
std::vector<uint8_t> new_data(const PreparedCall &pc, uint64_t seed) {
    const int me = pc.env.label();
    const std::vector<uint8_t> src = image(pc.c, pc.c.source, pc.c.src_layout, me, seed);
    std::copy(src.begin(), src.end(), pc.src.store.begin());  // in place: a host buffer is the store
    pc.src.upload();
    return image(pc.c, pc.c.target, pc.c.tgt_layout, me, seed);
}

// The target as the run left it, against `want`.
void target_is(const PreparedCall &pc, const std::vector<uint8_t> &want, const std::string &when, Notes &notes) {
    pc.tgt.fetch();
    if (auto d = first_difference(pc.tgt.store, want, pc.c.elem); !d.empty()) notes.add(pc.env, when + ": target: " + d);
}


// A prepared transfer released when the sequence ends, on every path.
struct Handle {
    const PreparedCall &pc;
    xmc_prepared *p = nullptr;
    explicit Handle(const PreparedCall &pc) : pc(pc) {}
    xmc_status prepare() { return pc.api->transfer_prepare(pc.inst, &pc.args, &p); }
    xmc_status run(xmc_stream *s = nullptr) {
        return pc.api->transfer_run(pc.inst, p, s ? s : pc.mem.stream, &pc.stats, pc.args.peer_paths);
    }
    xmc_status release() {
        const xmc_status s = pc.api->transfer_release(pc.inst, p);
        if (s == XMC_OK) p = nullptr;
        return s;
    }
    ~Handle() {
        if (p) pc.api->transfer_release(pc.inst, p);
    }
};

// The detail of a failed call on this rank, for a note.
std::string detail(const PreparedCall &pc, xmc_status s) {
    xmc_error_info e{};
    pc.api->last_error(pc.inst, &e);
    return std::string(xmc_status_string(s)) + " (" + e.call + ": " + e.message + ")";
}

// Every rank waits here until the others' setup (one rank's free and reallocation, a remap) is
// done, before the next run: a run's vote is bounded by the group's timeout, and a setup charged to
// it failed a correct backend (a loaded ASan run: the victim's 33 MiB reallocations took longer
// than the peers' 2 s vote, and they timed out instead of finding the run stale).
void setup_done(const PreparedCall &pc) {
    constexpr uint32_t kSetupBoundMs = 15000;
    const char mine = 1;
    std::vector<char> all(pc.env.labels.size());
    const xmc_transport &t = *pc.env.transport;
    if (t.all_gather(t.ctx, &mine, all.data(), 1, kSetupBoundMs) != 0)
        throw std::runtime_error("test setup: the ranks did not meet after the setup");
}

// `n` good runs, noted as before `what` where one fails.
xmc_status runs_together(const PreparedCall &pc, Handle &h, Notes &notes, int n, const std::string &what) {
    for (int k = 0; k < n; ++k)
        if (xmc_status s = h.run(); s != XMC_OK) {
            notes.add(pc.env, "run " + std::to_string(k + 1) + " before " + what + " failed: " + detail(pc, s));
            return s;
        }
    return XMC_OK;
}
// A run over new data (of seed data_seed + `seed`) that must move it, noted as `when`.
xmc_status run_moves_new_data(const PreparedCall &pc, Handle &h, Notes &notes, uint64_t seed, const std::string &when) {
    const std::vector<uint8_t> want = new_data(pc, pc.c.data_seed + seed);
    const xmc_status s = h.run();
    if (s == XMC_OK) target_is(pc, want, when, notes);
    else notes.add(pc.env, when + ": " + detail(pc, s));
    return s;
}
// The check of a sequence that must succeed on every rank with nothing noted.
std::function<void(const RankEnv &, const RankResult &, Failures &)> ok_and(Notes &notes) {
    return [&notes](const RankEnv &env, const RankResult &r, Failures &f) {
        status_ok(r, f);
        notes.into(env, f);
    };
}
// The run refused with `want` on this rank, naming transfer_run, before any write.
void refused_as(const RankResult &r, xmc_status want, Failures &f) {
    if (r.status != want)
        f.push_back(std::string("expected ") + xmc_status_string(want) + ", got " + xmc_status_string(r.status) + ": " +
                    r.error.message);
    else if (r.error.status != want || std::strcmp(r.error.call, "transfer_run") != 0 || !r.error.message[0])
        f.push_back(std::string("the refusal's detail must carry its status and name transfer_run; got call '") +
                    r.error.call + "': " + r.error.message);
}

// ===================== AFF-PREPARED-EXACT =====================

// Three runs of one prepared transfer, the sources changed before each: each run moves that run's
// bytes, with the plan's statistics (the last run is checked by exact() and result_is_the_plan()).
TEST_P(TransferTest, AFF_PREPARED_EXACT_EachRunMovesTheSourcesOfThatRun) {
    const Case c = mixed_case(64);
    for (xmc_path path : paths_to_test()) {
        Notes notes;
        RunSpec spec;
        spec.path = path;
        spec.call = [&](const PreparedCall &pc) {
            Handle h(pc);
            if (xmc_status s = h.prepare(); s != XMC_OK) return s;
            const uint64_t seeds[] = {pc.c.data_seed + 101, pc.c.data_seed + 202, pc.c.data_seed};
            for (int k = 0; k < 3; ++k) {
                const std::vector<uint8_t> want = new_data(pc, seeds[k]);
                if (xmc_status s = h.run(); s != XMC_OK) return s;
                if (k < 2) target_is(pc, want, "run " + std::to_string(k + 1), notes);
            }
            return h.release();
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
            status_ok(r, f);
            exact(r, f);
            result_is_the_plan(r, f);
            notes.into(env, f);
        }))) << "path " << path_str(path);
    }
}

// The caller's stream is busy (a callback that sleeps, then a copy of the new source data onto the
// source); the run, on that stream, must move the copied data, not what was there before.
TEST_P(TransferTest, AFF_PREPARED_EXACT_RunReadsAfterTheCallersEarlierWork) {
    const Case c = mixed_case(64);
    Notes notes;
    RunSpec spec;
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        xmc_stream *st = nullptr;
        if (pc.api->stream_create(pc.inst, pc.mem.ordinal, &st) != XMC_OK) {
            notes.add(pc.env, "test setup: stream_create failed");
            return XMC_ERR_INVALID_ARGUMENT;
        }
        struct Gone {
            const PreparedCall &pc;
            xmc_stream *st;
            ~Gone() { pc.api->stream_destroy(pc.inst, st); }
        } gone{pc, st};
        // The source holds other data (another seed) until the copy on the busy stream runs; the
        // copy brings the case's own data, which the run must move.
        const int me = pc.env.label();
        const std::vector<uint8_t> old = image(pc.c, pc.c.source, pc.c.src_layout, me, pc.c.data_seed + 7);
        std::copy(old.begin(), old.end(), pc.src.store.begin());
        pc.src.upload();
        std::vector<uint8_t> next = image(pc.c, pc.c.source, pc.c.src_layout, me, pc.c.data_seed);
        const std::vector<uint8_t> want = image(pc.c, pc.c.target, pc.c.tgt_layout, me, pc.c.data_seed);
        if (pc.args.source.ptr) {
            pc.api->host_callback(pc.inst, st, [](void *) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); },
                                  nullptr);
            xmc_copy_desc d{};
            const xmc_mem_kind k = pc.src.dev || pc.src.slot_addr ? XMC_MEM_DEVICE : XMC_MEM_HOST;
            d.src = xmc_copy_side{next.data(), XMC_MEM_HOST, pc.mem.ordinal, 0, 0, 0, next.size(), next.size()};
            d.dst = xmc_copy_side{pc.args.source.ptr, k, pc.mem.ordinal, 0, 0, 0, next.size(), next.size()};
            d.width_bytes = next.size();
            d.height = d.depth = 1;
            if (xmc_status s = pc.api->copy(pc.inst, &d, st); s != XMC_OK) {
                notes.add(pc.env, "test setup: copy on the busy stream failed: " + detail(pc, s));
                return s;
            }
        }
        const xmc_status s = h.run(st);
        pc.api->stream_synchronize(pc.inst, st);
        std::copy(next.begin(), next.end(), pc.src.store.begin());  // what the source holds now
        if (s == XMC_OK) target_is(pc, want, "the run on the busy stream", notes);
        return s;
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, ok_and(notes))));
}

// ===================== AFF-PREPARED-STALE =====================

// After a good run, one rank frees a buffer and allocates the same size again (a new allocation,
// most often at the same address); the next run is stale on every rank, and nothing is written:
// not the targets, not the new allocation. Rank 0's source, then the last rank's target.
void stale_after_replace(TransferTest &t, bool target_side) {
    const Case c = mixed_case(64);
    const int victim = target_side ? world().size() - 1 : 0;
    Notes notes;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.call = [&](const PreparedCall &pc) {
        Tracked tr(pc, target_side ? pc.tgt : pc.src, pc.env.world_rank == victim);
        if (!tr.usable()) {
            notes.add(pc.env, "test setup: dev_alloc failed");
            return XMC_ERR_INVALID_ARGUMENT;
        }
        pc.args.source.ptr = pc.src.buf.ptr;
        pc.args.target.ptr = pc.tgt.buf.ptr;
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, 1, "the replacement"); s != XMC_OK) return s;
        const bool mine = pc.env.world_rank == victim;
        if (mine && !tr.replace()) notes.add(pc.env, "test setup: dev_free/dev_alloc failed");
        if (mine && !tr.same_address) std::fprintf(stderr, "note: the new allocation is not at the freed one's address\n");
        setup_done(pc);
        pc.tgt.fetch();
        const std::vector<uint8_t> before = target_side && mine ? std::vector<uint8_t>{} : pc.tgt.store;
        const xmc_status s = h.run();
        if (mine && !tr.untouched()) notes.add(pc.env, "the run read or wrote the new allocation at the freed address");
        if (!before.empty()) {
            pc.tgt.fetch();
            if (pc.tgt.store != before) notes.add(pc.env, "the stale run wrote the target");
        }
        if (mine && target_side) tr.fill(kPoison), pc.tgt.store.assign(pc.tgt.store.size(), kPoison);
        return s;
    };
    EXPECT_TRUE(all_ranks_passed(t.run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        refused_as(r, XMC_ERR_STALE, f);
        notes.into(env, f);
    })));
}

// Device memory the backend never saw allocated (a framework's own allocator, straight from the
// driver): the last rank's target is such an allocation. A good run, then the last rank frees it
// and the driver allocates the same size again (most often at the same address); the next run is
// stale on every rank, and the new allocation is not written. The backend cannot know this memory
// from its own records: only the driver's identity of the allocation (CUDA's buffer ID) tells the
// new allocation from the old one.
TEST_P(TransferTest, AFF_PREPARED_STALE_DriverAllocationFreedAndReallocated) {
    std::string why;
    const DriverControl *dc = uses_device_buffers(api, inst) ? driver_control(api, &why) : nullptr;
    if (!dc || !dc->driver_alloc)
        XMC_SKIP(SkipKind::Unsupported, "memory the backend never saw allocated comes straight from the driver, "
                                        "through the fake driver's hooks: "
                                            << (why.empty() ? "no such hook for this backend" : why));
    const Case c = mixed_case(64);
    const int victim = world().size() - 1;
    Notes notes;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.call = [&](const PreparedCall &pc) {
        const bool mine = pc.env.world_rank == victim && pc.tgt.buf.ptr;
        const size_t bytes = pc.tgt.store.size();
        void *raw = nullptr;
        auto put = [&](void *dst, const std::vector<uint8_t> &img) {
            xmc_copy_desc d{};
            d.src = xmc_copy_side{const_cast<uint8_t *>(img.data()), XMC_MEM_HOST, pc.mem.ordinal, 0, 0, 0, img.size(), img.size()};
            d.dst = xmc_copy_side{dst, XMC_MEM_DEVICE, pc.mem.ordinal, 0, 0, 0, img.size(), img.size()};
            d.width_bytes = img.size();
            d.height = d.depth = 1;
            return pc.api->copy(pc.inst, &d, pc.mem.stream) == XMC_OK &&
                   pc.api->stream_synchronize(pc.inst, pc.mem.stream) == XMC_OK;
        };
        auto get = [&](void *src) {
            std::vector<uint8_t> img(bytes, 0);
            xmc_copy_desc d{};
            d.src = xmc_copy_side{src, XMC_MEM_DEVICE, pc.mem.ordinal, 0, 0, 0, bytes, bytes};
            d.dst = xmc_copy_side{img.data(), XMC_MEM_HOST, pc.mem.ordinal, 0, 0, 0, bytes, bytes};
            d.width_bytes = bytes;
            d.height = d.depth = 1;
            if (pc.api->copy(pc.inst, &d, pc.mem.stream) != XMC_OK ||
                pc.api->stream_synchronize(pc.inst, pc.mem.stream) != XMC_OK)
                img.clear();
            return img;
        };
        struct Freed {
            const DriverControl *dc;
            void *&p;
            ~Freed() {
                if (p) dc->driver_free(p);
            }
        } freed{dc, raw};
        if (mine) {
            if (!dc->driver_alloc(pc.mem.ordinal, bytes, &raw) || !put(raw, std::vector<uint8_t>(bytes, kPoison))) {
                notes.add(pc.env, "test setup: an allocation straight from the driver failed");
                return XMC_ERR_INVALID_ARGUMENT;
            }
            pc.args.target.ptr = raw;
        }
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, 1, "the free"); s != XMC_OK) return s;
        if (mine) {
            const std::vector<uint8_t> want = image(pc.c, pc.c.target, pc.c.tgt_layout, pc.env.label(), pc.c.data_seed);
            if (auto d = first_difference(get(raw), want, pc.c.elem); !d.empty())
                notes.add(pc.env, "the first run, into the driver's allocation: target: " + d);
            void *old = raw;
            dc->driver_free(raw);
            raw = nullptr;
            std::vector<void *> missed;  // held while the driver is asked again, as Tracked does
            for (int tries = 0; tries < 64 && raw != old; ++tries) {
                if (raw) missed.push_back(raw);
                if (!dc->driver_alloc(pc.mem.ordinal, bytes, &raw)) raw = nullptr;
            }
            for (void *m : missed) dc->driver_free(m);
            if (raw != old) std::fprintf(stderr, "note: the new allocation is not at the freed one's address\n");
            if (!raw || !put(raw, std::vector<uint8_t>(bytes, kMark))) notes.add(pc.env, "test setup: the new allocation failed");
        }
        setup_done(pc);
        const xmc_status s = h.run();
        if (mine && raw) {
            const std::vector<uint8_t> now = get(raw);
            if (now.empty() || std::any_of(now.begin(), now.end(), [](uint8_t b) { return b != kMark; }))
                notes.add(pc.env, "the run read or wrote the new allocation at the freed address");
        }
        pc.args.target.ptr = pc.tgt.buf.ptr;
        return s;
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        refused_as(r, XMC_ERR_STALE, f);
        notes.into(env, f);
    })));
}

TEST_P(TransferTest, AFF_PREPARED_STALE_SourceFreedAndReallocated) { stale_after_replace(*this, false); }
TEST_P(TransferTest, AFF_PREPARED_STALE_TargetFreedAndReallocated) { stale_after_replace(*this, true); }

// Runs every rank makes together before a test's own: after them a backend may synchronise runs
// otherwise than by the group's transport (the reference's third run on goes over a board in shared
// memory where every rank is on one node), and every requirement must hold there too.
constexpr int kRunsTogether = 3;

// The target poisoned again after runs that wrote it, so that "nothing written" reads only what
// the next run did.
void poison_target(const PreparedCall &pc) {
    std::fill(pc.tgt.store.begin(), pc.tgt.store.end(), kPoison);
    pc.tgt.upload();
}

// ===================== AFF-PREPARED-FOLLOW =====================

// Sources in slots (after `together` runs with the peers): a run while rank 0's slot is released
// is stale on every rank with nothing written; after the remap (new data in the new backing) the
// next run moves the new backing's bytes. (After runs together, the reference's peers reconnect to
// the new backing over its board: an IPC descriptor larger than a board slot once failed there.)
void released_refused_remapped_followed(TransferTest &t, int together) {
    const Case c = mixed_case(64);
    Notes notes;
    RunSpec spec;
    spec.source_in_slot = true;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, together + 1, "the release"); s != XMC_OK) return s;
        const bool mine = pc.env.world_rank == 0 && pc.src.slot;
        auto wait = [&](xmc_request *rq, const char *what) {
            if (pc.api->request_wait(pc.inst, rq, 10000) != XMC_OK) notes.add(pc.env, std::string("test setup: ") + what);
            pc.api->request_adopt(pc.inst, rq);  // a remap's mapping stays the slot's (VMM-ADOPT)
            pc.api->request_destroy(pc.inst, rq);
        };
        xmc_request *rq = nullptr;
        if (mine) {
            if (xmc_status r = pc.api->slot_release(pc.inst, pc.src.slot, pc.mem.stream, &rq); r != XMC_OK)
                throw std::runtime_error("test setup: slot_release failed: " + detail(pc, r));
            wait(rq, "the release failed");
        }
        setup_done(pc);
        pc.tgt.fetch();
        const std::vector<uint8_t> before = pc.tgt.store;
        const xmc_status s = h.run();
        if (s != XMC_ERR_STALE)
            notes.add(pc.env, std::string("a run while rank 0's source slot is released: expected stale, got ") +
                                  detail(pc, s));
        pc.tgt.fetch();
        if (pc.tgt.store != before) notes.add(pc.env, "the refused run wrote the target");
        // The remap: rank 0's slot gets the data of another seed; every rank's target follows.
        const uint64_t seed = pc.c.data_seed + 31;
        const std::vector<uint8_t> src_img = image(pc.c, pc.c.source, pc.c.src_layout, pc.env.label(), seed);
        if (mine) {
            // A remap's source is a pinned block as large as the slot.
            xmc_pin_result pin{};
            if (xmc_status r = pc.api->pin_alloc(pc.inst, pc.src.slot_size, 4096, XMC_NO_DEVICE, &pin); r != XMC_OK)
                throw std::runtime_error("test setup: pin_alloc failed: " + detail(pc, r));
            struct Unpin {
                const PreparedCall &pc;
                void *base;
                ~Unpin() { pc.api->pin_free(pc.inst, base); }
            } unpin{pc, pin.base};
            std::memset(pin.base, kPoison, pc.src.slot_size);
            std::memcpy(pin.base, src_img.data(), src_img.size());
            if (xmc_status r = pc.api->slot_remap(pc.inst, pc.src.slot, pc.mem.stream, pin.base, pc.src.slot_size, 0, &rq);
                r != XMC_OK)
                throw std::runtime_error("test setup: slot_remap failed: " + detail(pc, r));
            wait(rq, "the remap failed");
            pc.api->stream_synchronize(pc.inst, pc.mem.stream);
        }
        // Every other rank's source gets that seed's data too, so one oracle says what arrives.
        const std::vector<uint8_t> want = mine ? image(pc.c, pc.c.target, pc.c.tgt_layout, pc.env.label(), seed)
                                               : new_data(pc, seed);
        if (mine) std::copy(src_img.begin(), src_img.end(), pc.src.store.begin());
        setup_done(pc);
        const xmc_status s2 = h.run();
        if (s2 == XMC_OK) target_is(pc, want, "the run after the remap", notes);
        return s2;
    };
    EXPECT_TRUE(all_ranks_passed(t.run(c, spec, ok_and(notes))));
}
TEST_P(TransferTest, AFF_PREPARED_FOLLOW_ReleasedSlotRefusedRemappedSlotFollowed) {
    released_refused_remapped_followed(*this, 0);
}
TEST_P(TransferTest, AFF_PREPARED_FOLLOW_ReleasedSlotRefusedRemappedSlotFollowedAfterRuns) {
    released_refused_remapped_followed(*this, kRunsTogether);
}

// ---- sequences against a model (AFF-PREPARED-EXACT, -FOLLOW, -STALE together) ----
//
// A sequence of steps, the same on every rank, over two prepared transfers of one request (A,
// and B once a "run B" prepares it), with rank 0's source in a slot (where the steps release and
// remap it) and the last rank's target in memory the backend tracks. The model says what each run must do: stale on every rank
// while rank 0's slot is released or the handle was prepared before the last reallocation of the
// target, with no byte of any target written; otherwise move the sources' current bytes. The bugs
// it guards against bite only in an order no single test takes: a connection or check made at
// prepare and trusted after a remap, a reallocation noticed by one handle and not the other, a
// stale run that leaves a generation or a connection half-updated for the next good one.
enum SeqStep { kRunA, kRunB, kNewData, kReleaseSlot, kRemapSlot, kReallocTarget, kPrepareAgain, kSeqSteps };
const char *const kSeqStepName[kSeqSteps] = {
    "run A", "run B", "new data", "release rank 0's source slot", "remap that slot with new data",
    "free and reallocate the last rank's target", "release A and B, prepare A again"};

xmc_status run_sequence(const PreparedCall &pc, const std::vector<int> &steps, int victim, Notes &notes) {
    const bool slot_owner = pc.env.world_rank == 0 && pc.src.slot;
    const bool target_owner = pc.env.world_rank == victim;
    Tracked tr(pc, pc.tgt, target_owner);
    if (!tr.usable()) {
        notes.add(pc.env, "test setup: dev_alloc failed");
        return XMC_ERR_INVALID_ARGUMENT;
    }
    pc.args.source.ptr = pc.src.buf.ptr;
    pc.args.target.ptr = pc.tgt.buf.ptr;
    auto target_now = [&] {  // the target's bytes where they are now
        if (tr.own) return std::vector<uint8_t>(static_cast<uint8_t *>(tr.own), static_cast<uint8_t *>(tr.own) + pc.tgt.store.size());
        pc.tgt.fetch();
        return pc.tgt.store;
    };
    // The model: the slot's state, the target's reallocations, the data the sources hold.
    bool mapped = true;
    int target_gen = 0, a_gen = 0, b_gen = 0;
    uint64_t seed = pc.c.data_seed;
    std::vector<uint8_t> want = image(pc.c, pc.c.target, pc.c.tgt_layout, pc.env.label(), seed);
    std::optional<Handle> a, b;
    // A handle prepared now, over the target as it is (its generation noted); false: noted why.
    auto prepare = [&](std::optional<Handle> &h, int &gen, const std::string &what) {
        h.emplace(pc);
        gen = target_gen;
        const xmc_status s = h->prepare();
        if (s != XMC_OK) notes.add(pc.env, what + " failed: " + detail(pc, s));
        return s == XMC_OK;
    };
    if (!prepare(a, a_gen, "preparing A")) return XMC_OK;
    // The drawn steps, then a remap if the slot is left released (the checks after the call read
    // every source).
    for (size_t i = 0; i <= steps.size(); ++i) {
        if (i == steps.size() && mapped) break;
        const int step = i < steps.size() ? steps[i] : kRemapSlot;
        const std::string at = "step " + std::to_string(i + 1) + " (" + kSeqStepName[step] + ")";
        switch (step) {
        case kRunA:
        case kRunB: {
            std::optional<Handle> &h = step == kRunA ? a : b;
            if (!h) {  // B's first use prepares it (A always exists), over mapped memory only
                if (!mapped) break;
                if (!prepare(b, b_gen, at + ": preparing B")) return XMC_OK;
                break;
            }
            const bool stale = !mapped || (step == kRunA ? a_gen : b_gen) != target_gen;
            const std::vector<uint8_t> before = target_now();
            const xmc_status s = h->run();
            if (stale) {
                if (s != XMC_ERR_STALE) {
                    notes.add(pc.env, at + ": expected stale, got " + detail(pc, s));
                    return XMC_OK;
                }
                if (target_now() != before) notes.add(pc.env, at + ": the stale run wrote the target");
            } else {
                if (s != XMC_OK) {
                    notes.add(pc.env, at + ": expected success, got " + detail(pc, s));
                    return XMC_OK;
                }
                if (auto d = first_difference(target_now(), want, pc.c.elem); !d.empty())
                    notes.add(pc.env, at + ": target: " + d);
            }
            break;
        }
        case kNewData:
            if (!mapped) break;  // (rank 0's source has no memory to write)
            seed += 1000;
            want = new_data(pc, seed);
            break;
        case kReleaseSlot:
            if (!mapped) break;
            mapped = false;
            if (slot_owner) {
                xmc_request *rq = nullptr;
                if (xmc_status r = pc.api->slot_release(pc.inst, pc.src.slot, pc.mem.stream, &rq); r != XMC_OK)
                    throw std::runtime_error("test setup: slot_release failed: " + detail(pc, r));
                pc.api->request_wait(pc.inst, rq, 10000);
                pc.api->request_destroy(pc.inst, rq);
            }
            break;
        case kRemapSlot: {
            if (mapped) break;
            mapped = true;
            seed += 1000;
            if (!slot_owner) {
                want = new_data(pc, seed);
                break;
            }
            const std::vector<uint8_t> img = image(pc.c, pc.c.source, pc.c.src_layout, pc.env.label(), seed);
            xmc_pin_result pin{};
            if (xmc_status r = pc.api->pin_alloc(pc.inst, pc.src.slot_size, 4096, XMC_NO_DEVICE, &pin); r != XMC_OK)
                throw std::runtime_error("test setup: pin_alloc failed: " + detail(pc, r));
            std::memset(pin.base, kPoison, pc.src.slot_size);
            std::memcpy(pin.base, img.data(), img.size());
            xmc_request *rq = nullptr;
            const xmc_status r =
                pc.api->slot_remap(pc.inst, pc.src.slot, pc.mem.stream, pin.base, pc.src.slot_size, 0, &rq);
            if (r == XMC_OK) {
                pc.api->request_wait(pc.inst, rq, 10000);
                pc.api->request_adopt(pc.inst, rq);
                pc.api->request_destroy(pc.inst, rq);
                pc.api->stream_synchronize(pc.inst, pc.mem.stream);
            }
            pc.api->pin_free(pc.inst, pin.base);
            if (r != XMC_OK) throw std::runtime_error("test setup: slot_remap failed: " + detail(pc, r));
            std::copy(img.begin(), img.end(), pc.src.store.begin());
            want = image(pc.c, pc.c.target, pc.c.tgt_layout, pc.env.label(), seed);
            break;
        }
        case kReallocTarget:
            ++target_gen;
            if (target_owner && tr.ptr()) {
                if (!tr.replace()) throw std::runtime_error("test setup: dev_free/dev_alloc failed");
                tr.fill(kPoison);  // as a fresh target: holes stay poisoned
            }
            break;
        case kPrepareAgain:
            if (!mapped) break;  // (a prepare over a released slot is not what this models)
            b.reset();
            a.reset();
            if (tr.ptr()) pc.args.target.ptr = tr.ptr();
            if (!prepare(a, a_gen, at + ": preparing A again")) return XMC_OK;
            break;
        }
    }
    b.reset();
    a.reset();
    if (target_owner && tr.own) pc.tgt.store = target_now();  // the checks read the image
    return XMC_OK;
}

// Each requirement's sequences: a written one that takes every step in the order that matters,
// then drawn ones over the same steps (fixed seeds: a bug is caught on every run or on none).
void sequences_follow_the_model(TransferTest &t, const std::vector<int> &written, const std::vector<int> &kinds) {
    const Case c = mixed_case(64);
    const int victim = world().size() - 1;
    const int sequences = std::min(5, world().property_cases());
    for (int k = 0; k < sequences; ++k) {
        std::vector<int> steps = written;
        if (k > 0) {
            std::mt19937_64 g(uint64_t(k) * 0x9e3779b97f4a7c15ull);
            steps.assign(10, 0);
            for (int &st : steps) st = kinds[g() % kinds.size()];
        }
        std::string text;
        for (int st : steps) text += std::string(text.empty() ? "" : ", ") + kSeqStepName[st];
        Notes notes;
        RunSpec spec;
        // Sources in slots where the steps release and remap them (else plain device memory,
        // so that a bug of sharing slots is not taken for one of reallocations).
        spec.source_in_slot = std::find(kinds.begin(), kinds.end(), kReleaseSlot) != kinds.end();
        // (The default bound per operation, not a refusal's: a reallocation that hunts for the
        // old address took over 2 s under ASan, and its peers waited in their next gather.)
        spec.call = [&](const PreparedCall &pc) { return run_sequence(pc, steps, victim, notes); };
        EXPECT_TRUE(all_ranks_passed(t.run(c, spec, ok_and(notes))))
            << "sequence " << k + 1 << " of " << sequences << ": " << text;
    }
}

TEST_P(TransferTest, AFF_PREPARED_FOLLOW_SequencesOfRunsReleasesAndRemapsFollowTheModel) {
    sequences_follow_the_model(*this,
                               {kRunA, kReleaseSlot, kRunA, kRunB, kRemapSlot, kRunA, kRunB, kNewData, kRunB, kRunA,
                                kReleaseSlot, kRemapSlot, kPrepareAgain, kRunA},
                               {kRunA, kRunB, kNewData, kReleaseSlot, kRemapSlot, kPrepareAgain});
}

TEST_P(TransferTest, AFF_PREPARED_STALE_SequencesOfRunsAndReallocationsFollowTheModel) {
    sequences_follow_the_model(*this,
                               {kRunA, kRunB, kReallocTarget, kRunA, kRunB, kPrepareAgain, kRunA, kNewData, kRunA,
                                kRunB, kRunB, kReallocTarget, kNewData, kRunA},
                               {kRunA, kRunB, kNewData, kReallocTarget, kPrepareAgain});
}

// ===================== AFF-PREPARED-RELEASE =====================

// After a failed run (rank 0's run vote fails at its own transport; its peers time out), every
// rank releases: the handle is then refused by run and release alike, and closing the instance
// finds no prepared transfer left.
TEST_P(TransferTest, AFF_PREPARED_RELEASE_AfterAFailedRunNothingLeft) {
    xmc_instance *mine = nullptr;
    ASSERT_EQ(api->open(nullptr, &mine), XMC_OK);
    const Case c = mixed_case(64);
    Notes notes;
    RunSpec spec;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.fail_gather = [](const RankEnv &env) { return env.world_rank == 0 ? int64_t{2} : int64_t{-1}; };
    spec.call = [&](const PreparedCall &pc) {
        xmc_prepared *p = nullptr;
        if (xmc_status s = pc.api->transfer_prepare(pc.inst, &pc.args, &p); s != XMC_OK) return s;
        if (xmc_status s = pc.api->transfer_run(pc.inst, p, pc.mem.stream, &pc.stats, nullptr); s == XMC_OK)
            notes.add(pc.env, "the run whose vote failed on rank 0 succeeded");
        if (xmc_status s = pc.api->transfer_release(pc.inst, p); s != XMC_OK)
            notes.add(pc.env, "release after a failed run: " + detail(pc, s));
        if (xmc_status s = pc.api->transfer_run(pc.inst, p, pc.mem.stream, &pc.stats, nullptr); s != XMC_ERR_INVALID_HANDLE)
            notes.add(pc.env, std::string("a run of a released handle: expected invalid_handle, got ") + detail(pc, s));
        if (xmc_status s = pc.api->transfer_release(pc.inst, p); s != XMC_ERR_INVALID_HANDLE)
            notes.add(pc.env, std::string("a second release: expected invalid_handle, got ") + detail(pc, s));
        return XMC_OK;
    };
    const Failures f = run_on(api, mine, c, spec, [&](const RankEnv &env, const RankResult &, Failures &out) {
        notes.into(env, out);
    });
    xmc_close_report report{};
    ASSERT_EQ(api->close_report(mine, &report), XMC_OK);
    EXPECT_TRUE(all_ranks_passed(f));
    EXPECT_EQ(report.prepared_transfers, 0u) << "closing the instance released prepared transfers that "
                                                "transfer_release had reported released";
}

// Runs may keep what connects the ranks (path IPC's opened peer sources) from one run to the
// next; release closes it. Two good runs (the second over new data), then release: the driver
// holds no more objects than before the prepare, in every process (the fake driver's ledger; in
// a threads world, once every rank is done). The bug it guards against: a release that drops the
// handle but leaves a peer's source mapped, holding the peer's memory until the process exits.
TEST_P(TransferTest, AFF_PREPARED_RELEASE_ReleaseClosesWhatTheRunsKeptOpen) {
    std::string why;
    const DriverControl *dc = uses_device_buffers(api, inst) ? driver_control(api, &why) : nullptr;
    if (!dc)
        XMC_SKIP(SkipKind::Unsupported,
                 "what the driver holds is read from the fake driver's ledger: " << (why.empty() ? "host memory" : why));
    const Case c = mixed_case(64);
    Notes notes;
    RunSpec spec;
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, 1, "the rest"); s != XMC_OK) return s;
        const std::vector<uint8_t> want = new_data(pc, pc.c.data_seed + 7);
        if (xmc_status s = h.run(); s != XMC_OK) return s;
        target_is(pc, want, "the second run", notes);
        return h.release();
    };
    const size_t before = dc->objects_besides_contexts();
    const Failures f = run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &out) {
        status_ok(r, out);
        notes.into(env, out);
    });
    EXPECT_TRUE(all_ranks_passed(f));
    const size_t after = dc->objects_besides_contexts();
    EXPECT_EQ(after, before) << "after the release (and every rank's buffers freed) the driver holds " << after
                             << " objects besides contexts, " << before << " before the prepare:\n"
                             << dc->ledger_text();
}

// Bad handles, on each rank alone (nothing reaches a peer): NULL, an address that was never a
// prepared transfer, and one prepared on another instance are refused by run and release with
// invalid_handle, naming the call; the other instance's transfer still runs and releases after.
TEST_P(TransferTest, AFF_PREPARED_RELEASE_ForeignAndBogusHandlesRefused) {
    const Case c = mixed_case(64);
    Notes notes;
    RunSpec spec;
    spec.call = [&](const PreparedCall &pc) {
        xmc_instance *other = nullptr;
        if (pc.api->open(nullptr, &other) != XMC_OK) {
            notes.add(pc.env, "test setup: a second instance did not open");
            return XMC_ERR_INVALID_ARGUMENT;
        }
        struct Closer {
            const PreparedCall &pc;
            xmc_instance *i;
            ~Closer() { pc.api->close(i); }
        } closer{pc, other};
        int never = 0;
        auto refused = [&](const char *what, xmc_instance *in, xmc_prepared *h) {
            auto said = [&](xmc_status s) {  // the detail from the instance called
                xmc_error_info e{};
                pc.api->last_error(in, &e);
                return std::string(xmc_status_string(s)) + " (" + e.call + ": " + e.message + ")";
            };
            xmc_transfer_stats st{};
            if (xmc_status s = pc.api->transfer_run(in, h, pc.mem.stream, &st, nullptr); s != XMC_ERR_INVALID_HANDLE)
                notes.add(pc.env, std::string("transfer_run of ") + what + ": expected invalid_handle, got " + said(s));
            xmc_error_info e{};
            pc.api->last_error(in, &e);
            if (std::strcmp(e.call, "transfer_run") != 0)
                notes.add(pc.env, std::string("transfer_run of ") + what + ": the detail names '" + e.call + "'");
            if (xmc_status s = pc.api->transfer_release(in, h); s != XMC_ERR_INVALID_HANDLE)
                notes.add(pc.env, std::string("transfer_release of ") + what + ": expected invalid_handle, got " + said(s));
        };
        refused("NULL", pc.inst, nullptr);
        refused("an address never prepared", pc.inst, reinterpret_cast<xmc_prepared *>(&never));
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        refused("another instance's prepared transfer", other, h.p);
        if (xmc_status s = h.run(); s != XMC_OK) {
            notes.add(pc.env, "the prepared transfer no longer runs after another instance was refused it: " + detail(pc, s));
            return s;
        }
        return h.release();
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        status_ok(r, f);
        exact(r, f);
        notes.into(env, f);
    })));
}

// One rank releases instead of running (after `together` runs with its peers): its peers' runs
// fail within the bound, nothing written.
void release_fails_peers_in_time(TransferTest &t, int together) {
    const Case c = mixed_case(64);
    RunSpec spec;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        for (int k = 0; k < together; ++k)
            if (xmc_status s = h.run(); s != XMC_OK) return s;
        if (together) poison_target(pc);
        if (pc.env.world_rank == kBadRank) {
            h.release();
            return XMC_ERR_PEER_FAILED;  // (this rank's result is not checked below)
        }
        return h.run();
    };
    EXPECT_TRUE(all_ranks_passed(t.run(c, spec, [](const RankEnv &env, const RankResult &r, Failures &f) {
        if (env.world_rank == kBadRank) return;
        failed_in_time(r, f);
        for (uint8_t b : r.tgt->store)
            if (b != kPoison) return f.push_back("a run whose peer released wrote the target");
    })));
}
TEST_P(TransferTest, AFF_PREPARED_RELEASE_RankThatReleasesFailsItsPeersInTime) { release_fails_peers_in_time(*this, 0); }
TEST_P(TransferTest, AFF_PREPARED_RELEASE_RankThatReleasesAfterRunsFailsItsPeersInTime) {
    release_fails_peers_in_time(*this, kRunsTogether);
}

// A driver fault aimed at one rank: the fake driver's control, or NULL with *why (host memory, no
// fake, or ranks that are threads sharing one fake driver).
const DriverControl *one_rank_faults(const xmc_backend *api, xmc_instance *inst, std::string *why) {
    const DriverControl *dc = uses_device_buffers(api, inst) ? driver_control(api, why) : nullptr;
    if (!dc) {
        *why = "a driver call is failed through the fake driver's fault script: " + (why->empty() ? "host memory" : *why);
        return nullptr;
    }
    if (std::string(world().name()) == "threads") {
        *why = "ranks that are threads share one fake driver, whose fault cannot be aimed at one of them (the "
               "process worlds run this)";
        return nullptr;
    }
    return dc;
}

// kRunsTogether runs on path staged, then one in which rank kBadRank's next host<->device copy (a
// pack into staging or an unpack from it) fails, so that its peers wait for bytes it never sends;
// then(pc, h, status of that run) gives the rank's result.
RunSpec later_run_fails(const DriverControl *dc, Notes &notes,
                        std::function<xmc_status(const PreparedCall &, Handle &, xmc_status)> then) {
    RunSpec spec;
    spec.path = XMC_PATH_STAGED;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.call = [dc, &notes, then](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, kRunsTogether, "the fault"); s != XMC_OK) return s;
        if (pc.env.world_rank == kBadRank && dc->set_faults("fail:cuMemcpy2DAsync:CUDA_ERROR_LAUNCH_FAILED@1") != 0)
            notes.add(pc.env, "test setup: the fault script was refused");
        const xmc_status s = h.run();
        if (pc.env.world_rank == kBadRank) dc->set_faults("");
        return then(pc, h, s);
    };
    return spec;
}
constexpr int64_t kLaunchFailed = 719;  // CUDA_ERROR_LAUNCH_FAILED

// The run that fails: every rank fails within the bound, each with the driver's code as its native
// code (the failing rank's own, the others' from its completion vote). The bug it guards against:
// a peer that waits out its bound for those bytes and then fails its completion vote too,
// reporting a timeout without the code (a board that broke on the wait for a message).
TEST_P(TransferTest, AFF_NO_HANG_DriverErrorInALaterPreparedRunReachesEveryRankWithItsCode) {
    std::string why;
    const DriverControl *dc = one_rank_faults(api, inst, &why);
    if (!dc) XMC_SKIP(SkipKind::Unsupported, why);
    Notes notes;
    RunSpec spec = later_run_fails(dc, notes, [](const PreparedCall &, Handle &, xmc_status s) { return s; });
    EXPECT_TRUE(all_ranks_passed(run(mixed_case(64), spec, [&](const RankEnv &env, const RankResult &r, Failures &f) {
        notes.into(env, f);
        failed_with_code_in_time(r, kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", f);
    })));
}

// And the run after it, over new data, moves that data on every rank. The bug it guards against: a
// failed run's leftovers (a message no rank took, a connection half made) read by the next run.
TEST_P(TransferTest, AFF_PREPARED_EXACT_RunAfterAFailedRunMovesItsData) {
    std::string why;
    const DriverControl *dc = one_rank_faults(api, inst, &why);
    if (!dc) XMC_SKIP(SkipKind::Unsupported, why);
    Notes notes;
    RunSpec spec = later_run_fails(dc, notes, [&notes](const PreparedCall &pc, Handle &h, xmc_status failed) {
        if (failed == XMC_OK) notes.add(pc.env, "the run with a failing copy succeeded");
        return run_moves_new_data(pc, h, notes, 47, "the run after the failed one");
    });
    EXPECT_TRUE(all_ranks_passed(run(mixed_case(64), spec, ok_and(notes))));
}

// Path NCCL: a prepared transfer keeps the group's communicator between runs, until a one-shot
// call on the group fails its NCCL round (kBadRank's ncclSend) and the ranks abort it; the next
// run, over new data, moves it. The bug it guards against: a run that keeps using the aborted one.
TEST_P(TransferTest, AFF_PREPARED_EXACT_RunAfterAnotherCallAbortedTheCommunicatorMovesItsData) {
    FakeNcclControl fake;
    XMC_NEEDS_FAKE_NCCL(fake);
    Notes notes;
    RunSpec spec;
    spec.path = XMC_PATH_NCCL;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = 2 * no_hang_bound_ms() + 1000;
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (xmc_status s = runs_together(pc, h, notes, kRunsTogether, "the one-shot call"); s != XMC_OK) return s;
        if (pc.env.world_rank == kBadRank && fake.set_faults("fail:ncclSend:ncclSystemError@1") != 0)
            notes.add(pc.env, "test setup: the fake NCCL refused the fault script");
        xmc_transfer_stats one_shot{};
        const xmc_status failed = pc.api->transfer_execute(pc.inst, &pc.args, &one_shot);
        if (pc.env.world_rank == kBadRank) fake.set_faults(nullptr);
        if (failed == XMC_OK) notes.add(pc.env, "the one-shot call with a failing ncclSend succeeded");
        return run_moves_new_data(pc, h, notes, 53, "the prepared run after the failed one-shot call");
    };
    EXPECT_TRUE(all_ranks_passed(run(mixed_case(64), spec, ok_and(notes))));
}

// ===================== AFF-PREPARED-AGREE =====================

// Every rank prepares two transfers of one plan (and runs each `together` times with its peers);
// rank kBadRank runs the second, the others the first: every rank refuses, nothing written.
void different_transfers_refused(TransferTest &t, int together) {
    const Case c = mixed_case(64);
    RunSpec spec = refusal_spec();
    spec.call = [&](const PreparedCall &pc) {
        Handle a(pc), b(pc);
        if (xmc_status s = a.prepare(); s != XMC_OK) return s;
        if (xmc_status s = b.prepare(); s != XMC_OK) return s;
        for (int k = 0; k < together; ++k)
            for (Handle *h : {&a, &b})
                if (xmc_status s = h->run(); s != XMC_OK) return s;
        if (together) poison_target(pc);
        return pc.env.world_rank == kBadRank ? b.run() : a.run();
    };
    EXPECT_TRUE(all_ranks_passed(t.run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_as(r, XMC_ERR_REFUSED, f);
        for (uint8_t b : r.tgt->store)
            if (b != kPoison) return f.push_back("a refused run wrote the target");
    })));
}
TEST_P(TransferTest, AFF_PREPARED_AGREE_RanksRunningDifferentPreparedTransfersRefuse) {
    different_transfers_refused(*this, 0);
}
TEST_P(TransferTest, AFF_PREPARED_AGREE_RanksRunningDifferentPreparedTransfersAfterRunsRefuse) {
    different_transfers_refused(*this, kRunsTogether);
}

// Rank kBadRank's first run fails at its own transport before its vote leaves (its all_gather
// number 2: after prepare's offers and agreement), so its second run meets its peers' first:
// every rank refuses, nothing written.
TEST_P(TransferTest, AFF_PREPARED_AGREE_RankAtAnotherRunRefused) {
    const Case c = mixed_case(64);
    RunSpec spec = refusal_spec();
    spec.fail_gather = [](const RankEnv &env) { return env.world_rank == kBadRank ? int64_t{2} : int64_t{-1}; };
    spec.call = [&](const PreparedCall &pc) {
        Handle h(pc);
        if (xmc_status s = h.prepare(); s != XMC_OK) return s;
        if (pc.env.world_rank == kBadRank) h.run();  // fails at its own transport
        return h.run();
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_as(r, XMC_ERR_REFUSED, f);
        for (uint8_t b : r.tgt->store)
            if (b != kPoison) return f.push_back("a refused run wrote the target");
    })));
}

// Ranks whose requests differ (kBadRank's element size) refuse at prepare, every one of them.
TEST_P(TransferTest, AFF_PREPARED_AGREE_PrepareRefusesDifferentRequests) {
    const Case c = mixed_case(64);
    Case other = c;
    other.budget = c.budget * 2;
    RunSpec spec = bad_rank_runs(c, other);
    spec.call = [&](const PreparedCall &pc) {
        xmc_prepared *p = nullptr;
        const xmc_status s = pc.api->transfer_prepare(pc.inst, &pc.args, &p);
        if (s == XMC_OK) pc.api->transfer_release(pc.inst, p);
        return s;
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED || std::strcmp(r.error.call, "transfer_prepare") != 0)
            f.push_back(std::string("expected refused by transfer_prepare, got ") + xmc_status_string(r.status) +
                        " from '" + r.error.call + "': " + r.error.message);
    })));
}

}  // namespace
}  // namespace xmc::conformance
