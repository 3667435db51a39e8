// VMM-*: fixed-address slots (SPEC 5; test_vmm.cpp says how the five files divide them): failures
// and waits: VMM-ASYNC-ERROR, VMM-CALLBACK, VMM-EVENT-WAIT, VMM-DOUBLE, VMM-BATCH-PARTIAL and
// VMM-ERROR-CLEAR.
#include "vmm_tests.hpp"

namespace xmc::conformance {
namespace {

// ---- VMM-ASYNC-ERROR --------------------------------------------------------

// The asynchronous failure of `r`: reported by wait (with the driver's code,
// naming the call) and by query, identically.
void expect_async_failure(Env &v, xmc_request *r, const FaultHook &h) {
    const xmc_status st = v.wait(r);
    EXPECT_NE(st, XMC_OK) << "the injected driver failure was not reported";
    EXPECT_NE(st, XMC_ERR_TIMEOUT);
    xmc_error_info e{};
    v.api->last_error(v.inst, &e);
    EXPECT_EQ(e.native_code, h.code) << "the failure must carry the driver's code; " << v.error();
    EXPECT_STREQ(e.call, "request_wait");
    const xmc_request_info i = v.query(r);
    EXPECT_EQ(i.done, 1);
    EXPECT_EQ(i.status, st) << "query and wait disagree on the request's outcome";
    EXPECT_EQ(i.native_code, h.code);
}

// Checks the backend's slot against what the model says after the failure.
void expect_model_state(Env &v, const SlotModel &m, int slot, xmc_slot *s, const xmc_slot_info &info) {
    xmc_request *probe = nullptr;
    const SlotState st = m.slots()[slot].state;
    if (st == SlotState::Mapped) {
        if (m.slots()[slot].content != kNoTag) {
            EXPECT_TRUE(holds(v.read(info), m.slots()[slot].content));
        }
        EXPECT_TRUE(v.ok(v.release(s, v.io, &probe))) << "the model says the slot is mapped";
    } else if (st == SlotState::Released || st == SlotState::ReleasePending) {
        void *src = v.source(info.size, 999);
        EXPECT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &probe))) << "the model says the slot is released";
        if (probe) {
            EXPECT_TRUE(v.ok(v.wait(probe))) << "a remap after the failure must work (the fault is spent)";
            EXPECT_TRUE(holds(v.read(info), 999));
        }
    }
    if (probe) v.wait(probe);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedReleaseLeavesSlotMappedWithItsBytes) {
    const FaultHook h = fault_hook(api, true, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    SlotModel m;
    auto [s, info] = v.mapped_slot(1);
    ASSERT_EQ(m.create(1), XMC_OK);
    ASSERT_TRUE(v.write(info, 191));
    m.write(0, 191);
    const uint64_t free0 = v.free_memory();
    h.arm();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &r)));
    ASSERT_EQ(m.release({0}), XMC_OK);
    expect_async_failure(v, r, h);
    h.disarm();
    m.fail(0, 0);
    ASSERT_EQ(m.slots()[0].state, SlotState::Mapped);
    EXPECT_EQ(v.free_memory(), free0) << "a failed release returned memory it still maps";
    expect_model_state(v, m, 0, s, info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedRemapRollsBackToReleased) {
    const FaultHook h = fault_hook(api, false, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    SlotModel m;
    auto r = v.released_slot_with_source(1, 201);
    ASSERT_NE(r.slot, nullptr);
    m.create(1);
    m.release({0});
    m.wait(0);
    const uint64_t free_released = v.free_memory();
    h.arm();
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &q)));
    ASSERT_EQ(m.remap({0}, {Source::Valid}, {201}, 0), XMC_OK);
    expect_async_failure(v, q, h);
    h.disarm();
    m.fail(1, 0);
    EXPECT_EQ(v.free_memory(), free_released) << "the failed remap's mapping was not rolled back";
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_adopt(v.inst, q), "request_adopt"))
        << "a failed remap has nothing to adopt";
    ASSERT_EQ(m.slots()[0].state, SlotState::Released);
    expect_model_state(v, m, 0, r.slot, r.info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedBatchRemapRollsBackEverySlot) {
    const FaultHook h = fault_hook(api, false, 2);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    SlotModel m;
    auto a = v.released_slot(1), b = v.released_slot(1);
    ASSERT_TRUE(a.slot && b.slot);
    for (int i = 0; i < 2; ++i) {
        m.create(1);
        m.release({i});
        m.wait(i);
    }
    void *sa = v.source(a.info.size, 211), *sb = v.source(b.info.size, 212);
    const uint64_t free_released = v.free_memory();
    h.arm();
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {sa, sb}, {a.info.size, b.info.size}, 0, &q)));
    ASSERT_EQ(m.remap({0, 1}, {Source::Valid, Source::Valid}, {211, 212}, 0), XMC_OK);
    expect_async_failure(v, q, h);  // the second slot's map failed
    h.disarm();
    m.fail(2, 1);
    EXPECT_EQ(v.free_memory(), free_released) << "the first slot's mapping outlived its failed request";
    EXPECT_EQ(v.query(q).copies_launched, 0u) << "a copy was started into a rolled-back mapping";
    expect_model_state(v, m, 0, a.slot, a.info);
    expect_model_state(v, m, 1, b.slot, b.info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_RemapAfterAFailedReleaseFailsAndKeepsTheMapping) {
    const FaultHook h = fault_hook(api, true, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    SlotModel m;
    auto [s, info] = v.mapped_slot(1);
    ASSERT_TRUE(s && m.create(1) == XMC_OK);
    ASSERT_TRUE(v.write(info, 221));
    m.write(0, 221);
    void *src = v.source(info.size, 222);
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    const uint64_t free0 = v.free_memory();  // after the stream: only the failed requests are measured
    h.arm();
    xmc_request *rel = nullptr, *rem = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    m.release({0});
    const xmc_status remapped = v.remap(s, v.io, src, info.size, 0, &rem);
    gate->release();
    if (remapped != XMC_OK) {
        // Only if the release already ran, out of its stream's order:
        // VMM-RELEASE-ORDER's to report; the failure itself is checked below.
        EXPECT_EQ(v.query(rel).done, 1) << "remap refused while the release was pending: " << v.error();
    } else {
        m.remap({0}, {Source::Valid}, {222}, 0);
        expect_async_failure(v, rem, h);
    }
    expect_async_failure(v, rel, h);
    h.disarm();
    m.fail(0, 0);
    ASSERT_EQ(m.slots()[0].state, SlotState::Mapped);
    EXPECT_EQ(v.free_memory(), free0) << "memory accounting moved although the slot was never unmapped";
    expect_model_state(v, m, 0, s, info);
}

// ---- VMM-CALLBACK -----------------------------------------------------------

TEST_P(VmmTest, VMM_CALLBACK_StreamIsNeverHeldBySlotWork) {
    Env &v = e();
    auto [a, ia] = v.mapped_slot(1);
    auto [bslot, ib] = v.mapped_slot(1);
    auto [probe, ic] = v.mapped_slot(1);
    ASSERT_TRUE(a && bslot && probe);
    void *src = v.source(ia.size, 231), *src_b = v.source(ib.size, 232);
    xmc_stream *g = v.stream(), *b = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *rem = nullptr, *after = nullptr;
    ASSERT_TRUE(v.ok(v.release(a, g, &rel)));
    ASSERT_TRUE(v.ok(v.remap(a, b, src, ia.size, 0, &rem)));
    ASSERT_TRUE(v.ok(v.release(probe, b, &after)));  // b's next work: a release of another slot
    // The remap cannot run before its release, held by the gate. A backend
    // that only notes the remap's place on b lets b move on, and the release
    // after it completes; one whose stream callback does the work (driver
    // calls, and the wait for the release) itself holds b until the gate opens.
    EXPECT_TRUE(v.ok(v.wait(after, 2000)))
        << "the stream did not get past the remap while the remap waited for its release: the "
           "stream's callback does the slot work itself instead of handing it to a worker";
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rem))) << "(a driver that refuses calls from callback threads fails them here)";
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_TRUE(holds(v.read(ia), 231));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
    // A batch and a deferred copy through callbacks too: none may fail.
    xmc_request *r2 = nullptr, *r3 = nullptr;
    ASSERT_TRUE(v.ok(v.release_batch({a, bslot}, b, &r2)));
    ASSERT_TRUE(v.ok(v.remap_batch({a, bslot}, b, {src, src_b}, {ia.size, ib.size}, XMC_REMAP_DEFER_COPY, &r3)));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, r3, 1, g)));
    ASSERT_TRUE(v.ok(v.wait(r3)));
    ASSERT_TRUE(v.ok(v.wait(r2)));
    EXPECT_TRUE(holds(v.read(ib), 232));
}

// Observed at the driver (SPEC 6): the fake records the calling thread of every
// driver call, and each stream's callback thread is learned from a host callback
// of the test's own. A call that does not block (cuStreamQuery, cuEventRecord:
// the real driver lets them through) holds no stream, so only this record shows it.
struct CallbackThreads {
    std::set<int64_t> tids;          // the callback threads of the test's streams
    std::set<std::string> dispatch;  // what the stream's own dispatch calls there around any callback
};

void note_tid(void *p) { *static_cast<int64_t *>(p) = static_cast<int64_t>(gettid()); }

// Runs an empty host callback of the test's own on each stream and notes its thread, and the
// driver calls the stream's machinery made on that thread to run it (Level Zero's callback
// thread waits for and signals its events; the CUDA fake's makes none).
::testing::AssertionResult learn_callback_threads(Env &v, const DriverControl &c, const std::vector<xmc_stream *> &streams,
                                                  CallbackThreads *out) {
    for (xmc_stream *s : streams) {
        int64_t tid = 0;
        c.reset_calls();
        if (!v.ok(v.api->host_callback(v.inst, s, note_tid, &tid)) || !v.ok(v.api->stream_synchronize(v.inst, s)))
            return ::testing::AssertionFailure() << "a host callback of the test's own did not run: " << v.error();
        std::vector<DriverCall> calls;
        std::string why;
        if (!c.calls(&calls, &why)) return ::testing::AssertionFailure() << why;
        if (tid == 0) return ::testing::AssertionFailure() << "the host callback ran on no thread";
        out->tids.insert(tid);
        for (const auto &call : calls)
            if (call.tid == tid && !call.in_host_callback) out->dispatch.insert(call.entry);
    }
    return ::testing::AssertionSuccess();
}

TEST_P(VmmTest, VMM_CALLBACK_NoDriverCallOnAStreamsCallbackThread) {
    std::string why;
    const DriverControl *c = driver_control(api, &why);
    if (!c || !c->calls)
        XMC_SKIP(SkipKind::Unsupported, (c ? "the fake driver under backend '" + std::string(api->name) +
                                                  "' records no calling threads"
                                           : why));
    Env &v = e();
    auto [a, ia] = v.mapped_slot(1);
    auto [bslot, ib] = v.mapped_slot(1);
    ASSERT_TRUE(a && bslot);
    void *src = v.source(ia.size, 261), *src_b = v.source(ib.size, 262);
    xmc_stream *g = v.stream(), *b = v.stream();
    const std::vector<xmc_stream *> streams = {v.io, g, b};
    CallbackThreads cb;
    ASSERT_TRUE(learn_callback_threads(v, *c, streams, &cb));

    // Slot work through every kind of request: release, remap (on another stream than
    // its release), a deferred remap and its launch, batch release and remap, adopt,
    // destroy, close. Each is waited for, so every driver call it makes is in the record.
    c->reset_calls();
    xmc_request *rel = nullptr, *rem = nullptr, *r2 = nullptr, *r3 = nullptr, *r4 = nullptr, *r5 = nullptr;
    ASSERT_TRUE(v.ok(v.release(a, g, &rel)));
    ASSERT_TRUE(v.ok(v.remap(a, b, src, ia.size, 0, &rem)));
    ASSERT_TRUE(v.ok(v.wait(rem)));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
    ASSERT_TRUE(v.ok(v.release(a, v.io, &r2)));
    ASSERT_TRUE(v.ok(v.remap(a, g, src, ia.size, XMC_REMAP_DEFER_COPY, &r3)));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, r3, 0, b)));
    ASSERT_TRUE(v.ok(v.wait(r3)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, r3)));
    ASSERT_TRUE(v.ok(v.release_batch({a, bslot}, b, &r4)));
    ASSERT_TRUE(v.ok(v.remap_batch({a, bslot}, g, {src, src_b}, {ia.size, ib.size}, 0, &r5)));
    ASSERT_TRUE(v.ok(v.wait(r5)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, r5)));
    for (xmc_request *r : {rel, rem, r2, r3, r4, r5}) ASSERT_TRUE(v.ok(v.destroy(r)));
    for (xmc_stream *s : streams) ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, s)));
    EXPECT_TRUE(holds(v.read(ia), 261));
    EXPECT_TRUE(holds(v.read(ib), 262));
    ASSERT_TRUE(v.ok(v.close(a)));
    std::vector<DriverCall> calls;
    ASSERT_TRUE(c->calls(&calls, &why)) << why;
    // A stream whose callback thread changed meanwhile: learned again, so no call hides there.
    ASSERT_TRUE(learn_callback_threads(v, *c, streams, &cb));

    std::map<std::string, int> bad;
    for (const auto &call : calls)
        if (call.in_host_callback || (cb.tids.count(call.tid) && !cb.dispatch.count(call.entry)))
            ++bad[call.entry + (call.in_host_callback ? " (inside a host callback)" : " (on a stream's callback thread)")];
    std::string list;
    for (const auto &[entry, n] : bad) list += "\n  " + entry + " x" + std::to_string(n);
    EXPECT_TRUE(bad.empty()) << "slot work called the driver on a stream-callback thread (the real CUDA driver may "
                                "refuse such calls with CUDA_ERROR_NOT_PERMITTED; a callback only hands work to "
                                "workers), out of " << calls.size() << " calls:" << list;
    EXPECT_GT(calls.size(), 0u) << "the fake recorded no driver call of the slot work";
}

// ---- VMM-EVENT-WAIT ---------------------------------------------------------

TEST_P(VmmTest, VMM_EVENT_WAIT_ConsumerToldBeforeTheCopyExistsWaitsForIt) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 241));
    void *src = v.source(info.size, 242);
    xmc_stream *g = v.stream(), *b = v.stream(), *c = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *rem = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, 0, &rem)));
    // Told now, before any worker has started (let alone recorded) the copy.
    ASSERT_TRUE(v.ok(api->request_stream_wait(v.inst, rem, c)));
    auto seen = v.read_async(info, c);  // the consumer reads the slot
    std::this_thread::sleep_for(kWatch / 3);
    gate->release();
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    ASSERT_TRUE(v.ok(v.wait(rem)));
    EXPECT_TRUE(holds(seen->bytes(), 242)) << "the consumer stream read the slot before the reload copy finished";
}

TEST_P(VmmTest, VMM_EVENT_WAIT_ConsumerWaitsForALaunchedDeferredCopy) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 251);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.write(r.info, 252));
    xmc_stream *l = v.stream(), *c = v.stream();
    auto gate = v.gate(l);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, l)));  // queued behind the gate
    ASSERT_TRUE(v.ok(api->request_stream_wait(v.inst, m, c)));
    auto seen = v.read_async(r.info, c);
    std::this_thread::sleep_for(kWatch / 3);
    gate->release();
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    EXPECT_TRUE(holds(seen->bytes(), 251)) << "the consumer read the slot before the launched copy finished";
}

TEST_P(VmmTest, VMM_EVENT_WAIT_RefusesReleaseRequestAndStaleHandle) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_stream_wait(v.inst, rel, v.io),
                          "request_stream_wait"));
    ASSERT_TRUE(v.ok(v.destroy(rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_stream_wait(v.inst, rel, v.io),
                          "request_stream_wait"));
}

TEST_P(VmmTest, VMM_EVENT_WAIT_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, RemapBatch, Launch, Wait, Adopt, Destroy, StreamWait,
                 StreamWait>(0, GetParam(), "");
}

// ---- VMM-DOUBLE ---------------------------------------------------------------

// The second unmaps and releases of one mapping the fake driver under the
// backend has seen (0 where there is no such fake: the host, a real driver).
size_t second_releases(const xmc_backend *api) {
    const DriverControl *c = driver_control(api, nullptr);
    return c && c->second_releases ? c->second_releases() : 0;
}

// VMM-STATE's "nothing changed" includes the driver: a refused release of a
// released slot makes no driver call (a second unmap poisoned the fake's
// context, so the stateful sequences caught that bug only when they drew it).
TEST_P(VmmTest, VMM_STATE_RefusedReleaseOfAReleasedSlotChangesNothingAtTheDriver) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_request *rel = nullptr, *again = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &rel)));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release"));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_EQ(second_releases(api), second0) << "a refused release reached the driver (a second unmap or release)";
    xmc_stream *st = v.stream();
    EXPECT_NE(st, nullptr) << "the driver refuses work after the refused release";
    ASSERT_TRUE(v.ok(v.destroy(rel)));
}

TEST_P(VmmTest, VMM_DOUBLE_ReleaseOfAReleasedSlotIsRefusedAndNeverReachesTheDriver) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    const uint64_t free0 = v.free_memory();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_request *rel = nullptr, *again = reinterpret_cast<xmc_request *>(0x1);
    ASSERT_TRUE(v.ok(v.release(s, v.io, &rel)));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_EQ(v.free_memory(), free0);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release_batch({s}, v.io, &again), "slot_release_batch"));
    // With a mapped slot in the batch: refused whole, the mapped one untouched.
    auto [m, minfo] = v.mapped_slot(1);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(v.write(minfo, 301));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release_batch({m, s}, v.io, &again), "slot_release_batch"));
    EXPECT_EQ(again, reinterpret_cast<xmc_request *>(0x1)) << "a refused release handed out a request";
    ASSERT_TRUE(v.ok(v.wait(rel)));  // the first release's request is unchanged
    EXPECT_TRUE(holds(v.read(minfo), 301));
    EXPECT_EQ(v.free_memory(), free0 - minfo.size) << "a refused release returned memory again";
    // The released slot still remaps, once.
    void *src = v.source(info.size, 302);
    xmc_request *rem = nullptr;
    ASSERT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &rem)));
    ASSERT_TRUE(v.ok(v.wait(rem)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
    EXPECT_TRUE(holds(v.read(info), 302));
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

TEST_P(VmmTest, VMM_DOUBLE_SecondCloseIsRefusedAndReturnsTheMemoryOnce) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    const uint64_t free0 = v.free_memory();
    auto a = v.mapped_slot(1);
    auto b = v.released_slot(1);
    ASSERT_TRUE(a.slot && b.slot);
    ASSERT_TRUE(v.ok(v.close(a.slot)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, a.slot), "slot_close"))
        << "a second close of a mapped slot";
    ASSERT_TRUE(v.ok(v.close(b.slot)));  // released: its memory went back with the release
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, b.slot), "slot_close"))
        << "a second close of a released slot";
    EXPECT_EQ(v.free_memory(), free0) << "closing returned a slot's memory more (or less) than once";
    // A slot closed with its remap adopted, and one with a remap never adopted.
    auto c = v.released_slot_with_source(1, 311);
    auto d = v.released_slot_with_source(1, 312);
    ASSERT_TRUE(c.slot && d.slot);
    xmc_request *qc = nullptr, *qd = nullptr;
    ASSERT_TRUE(v.ok(v.remap(c.slot, v.io, c.source, c.info.size, 0, &qc)));
    ASSERT_TRUE(v.ok(v.remap(d.slot, v.io, d.source, d.info.size, 0, &qd)));
    ASSERT_TRUE(v.ok(v.wait(qc)));
    ASSERT_TRUE(v.ok(v.wait(qd)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, qc)));
    ASSERT_TRUE(v.ok(v.close(c.slot)));
    ASSERT_TRUE(v.ok(v.close(d.slot)));
    ASSERT_TRUE(v.ok(v.destroy(qc)));
    ASSERT_TRUE(v.ok(v.destroy(qd)));  // its mapping went with the slot: not unmapped again
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, c.slot), "slot_close"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, d.slot), "slot_close"));
    EXPECT_EQ(v.free_memory(), free0);
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

TEST_P(VmmTest, VMM_DOUBLE_EveryCallOnAClosedSlotIsRefused) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    auto [s, info] = v.mapped_slot(1);
    auto [live, linfo] = v.mapped_slot(1);
    ASSERT_TRUE(s && live);
    ASSERT_TRUE(v.write(linfo, 321));
    void *src = v.source(info.size, 322);
    ASSERT_TRUE(v.ok(v.close(s)));
    const uint64_t free0 = v.free_memory();
    xmc_request *r = reinterpret_cast<xmc_request *>(0x1);
    const size_t n = info.size;
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release(s, v.io, &r), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.remap(s, v.io, src, n, 0, &r), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.remap(s, v.io, src, n, XMC_REMAP_DEFER_COPY, &r), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release_batch({s}, v.io, &r), "slot_release_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release_batch({live, s}, v.io, &r), "slot_release_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.remap_batch({s}, v.io, {src}, {n}, 0, &r), "slot_remap_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, s), "slot_close"));
    EXPECT_EQ(r, reinterpret_cast<xmc_request *>(0x1)) << "a refused call handed out a request";
    // The live slot of the refused batch is untouched, and releases once.
    EXPECT_TRUE(holds(v.read(linfo), 321));
    EXPECT_EQ(v.free_memory(), free0);
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(live, v.io, &rel)));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_EQ(v.free_memory(), free0 + linfo.size);
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

// Deferred remaps: a launch into a slot closed since is refused (nothing to copy into).
TEST_P(VmmTest, VMM_DOUBLE_LaunchIntoAClosedSlotIsRefused) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    auto r = v.released_slot_with_source(1, 331);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, XMC_REMAP_DEFER_COPY, &q)));
    ASSERT_TRUE(v.ok(v.wait(q)));
    ASSERT_TRUE(v.ok(v.close(r.slot)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_launch_copy(v.inst, q, 0, v.io), "request_launch_copy"));
    ASSERT_TRUE(v.ok(v.destroy(q)));
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

// Whether sequences on this backend draw FailBatch (vmm_commands.hpp): only where a fault can be
// armed mid-sequence (a fake driver); the host's are counted from open, so its sequences draw none.
bool can_fail_mid_sequence(const xmc_backend *api) { return fault_hook(api, false, 1).driver != nullptr; }

// Operations on released and closed slots, with batches failing at a random slot among them.
TEST_P(VmmTest, VMM_DOUBLE_StatefulSequencesAgreeWithModel) {
    const size_t second0 = second_releases(api);
    t_fail_hook = can_fail_mid_sequence(api);
    run_stateful<Create, Write, Release, Release, ReleaseBatch, Remap, RemapBatch, Launch, Wait, Adopt, Destroy,
                 Close, Close, Query, CheckMemory, FailBatch>(kBusy | kClosed, GetParam(), "");
    t_fail_hook = false;
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

// ---- VMM-BATCH-PARTIAL --------------------------------------------------------

constexpr int kBatch = 3;

// The request's failure names the slot it failed at: its index in the batch.
void expect_failed_at(Env &v, xmc_request *r, size_t index) {
    EXPECT_NE(v.wait(r), XMC_OK);
    const std::string want = "(batch index " + std::to_string(index) + ")";
    EXPECT_NE(v.error().find(want), std::string::npos) << "the failure must name " << want << ": " << v.error();
}

// A batch remap whose map fails at slot k (each in turn): that slot and every
// other one is rolled back to released, nothing leaks, each remaps again.
TEST_P(VmmTest, VMM_BATCH_PARTIAL_RemapFailingAtEachSlotReportsItAndRollsEverySlotBack) {
    for (int k = 1; k <= kBatch; ++k) {
        SCOPED_TRACE("the map of batch index " + std::to_string(k - 1) + " fails");
        const FaultHook h = fault_hook(api, false, k);
        if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
        ASSERT_TRUE(reopen(h.options));
        Env &v = e();
        const size_t second0 = second_releases(api);
        SlotModel m;
        std::vector<Env::Slot> s;
        std::vector<xmc_slot *> hs;
        std::vector<const void *> src;
        std::vector<size_t> n;
        std::vector<int> tags, all;
        for (int i = 0; i < kBatch; ++i) {
            s.push_back(v.released_slot(1));
            ASSERT_NE(s.back().slot, nullptr);
            m.create(1);
            m.release({i});
            m.wait(i);
            hs.push_back(s.back().slot);
            tags.push_back(400 + 10 * k + i);
            src.push_back(v.source(s.back().info.size, tags.back()));
            n.push_back(s.back().info.size);
            all.push_back(i);
        }
        const uint64_t free_released = v.free_memory();
        h.arm();
        xmc_request *q = nullptr;
        ASSERT_TRUE(v.ok(v.remap_batch(hs, v.io, src, n, 0, &q)));
        ASSERT_EQ(m.remap(all, std::vector<Source>(kBatch, Source::Valid), tags, 0), XMC_OK);
        expect_async_failure(v, q, h);
        expect_failed_at(v, q, k - 1);
        h.disarm();
        m.fail(kBatch, k - 1);
        EXPECT_EQ(v.free_memory(), free_released) << "a mapping of the failed batch outlived it";
        EXPECT_EQ(v.query(q).copies_launched, 0u) << "a copy was started into a rolled-back mapping";
        EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_adopt(v.inst, q), "request_adopt"));
        ASSERT_TRUE(v.ok(v.destroy(q)));
        for (int i = 0; i < kBatch; ++i) {
            SCOPED_TRACE("batch index " + std::to_string(i));
            EXPECT_EQ(m.slots()[i].state, SlotState::Released);
            // Never half-mapped: no memory left at a rolled-back slot's address.
            EXPECT_FALSE(memfd_backed(s[i].info.address, s[i].info.size)) << "memory is still mapped at the slot";
            expect_model_state(v, m, i, hs[i], s[i].info);
        }
        EXPECT_EQ(second_releases(api), second0) << "the rollback unmapped or released a mapping twice";
    }
}

// A batch release whose unmap fails at slot k: that slot stays mapped with its
// bytes, the others are released, and every slot takes its next request.
TEST_P(VmmTest, VMM_BATCH_PARTIAL_ReleaseFailingAtEachSlotReportsItAndKeepsThatSlotMapped) {
    for (int k = 1; k <= kBatch; ++k) {
        SCOPED_TRACE("the unmap of batch index " + std::to_string(k - 1) + " fails");
        const FaultHook h = fault_hook(api, true, k);
        if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
        ASSERT_TRUE(reopen(h.options));
        Env &v = e();
        const size_t second0 = second_releases(api);
        SlotModel m;
        std::vector<Env::Slot> s;
        std::vector<xmc_slot *> hs;
        std::vector<int> all;
        for (int i = 0; i < kBatch; ++i) {
            s.push_back(v.mapped_slot(1));
            ASSERT_NE(s.back().slot, nullptr);
            m.create(1);
            ASSERT_TRUE(v.write(s.back().info, 500 + 10 * k + i));
            m.write(i, 500 + 10 * k + i);
            hs.push_back(s.back().slot);
            all.push_back(i);
        }
        const uint64_t free0 = v.free_memory();
        h.arm();
        xmc_request *q = nullptr;
        ASSERT_TRUE(v.ok(v.release_batch(hs, v.io, &q)));
        ASSERT_EQ(m.release(all), XMC_OK);
        expect_async_failure(v, q, h);
        expect_failed_at(v, q, k - 1);
        h.disarm();
        m.fail(0, k - 1);
        uint64_t released = 0;
        for (int i = 0; i < kBatch; ++i) released += m.holds_memory(i) ? 0 : s[i].info.size;
        EXPECT_EQ(v.free_memory(), free0 + released) << "memory returned is not that of the released slots";
        ASSERT_TRUE(v.ok(v.destroy(q)));
        for (int i = 0; i < kBatch; ++i) {
            SCOPED_TRACE("batch index " + std::to_string(i));
            EXPECT_EQ(m.slots()[i].state, i == k - 1 ? SlotState::Mapped : SlotState::Released);
            expect_model_state(v, m, i, hs[i], s[i].info);
        }
        EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
    }
}

TEST_P(VmmTest, VMM_BATCH_PARTIAL_StatefulSequencesAgreeWithModel) {
    const size_t second0 = second_releases(api);
    t_fail_hook = can_fail_mid_sequence(api);
    run_stateful<Create, Write, Check, Release, Remap, ReleaseBatch, RemapBatch, FailBatch, FailBatch, Launch, Wait,
                 Adopt, Destroy, Query, CheckMemory>(0, GetParam(), "");
    t_fail_hook = false;
    EXPECT_EQ(second_releases(api), second0) << "the driver saw a second unmap or release of one mapping";
}

// ---- VMM-ERROR-CLEAR ------------------------------------------------------------

// Refusals (busy, bad sources, duplicates) and failed batches, each followed by whatever the
// model allows on the same slots and streams.
TEST_P(VmmTest, VMM_ERROR_CLEAR_StatefulSequencesAgreeWithModel) {
    t_fail_hook = can_fail_mid_sequence(api);
    run_stateful<Create, Write, Check, Release, Remap, ReleaseBatch, RemapBatch, FailBatch, FailBatch, Launch, Wait,
                 Adopt, Destroy, Query, CheckMemory>(kBusy | kBadSource | kOneStream, GetParam(), "");
    t_fail_hook = false;
}

// Refusals at submit: none leaves state behind on the slot or the stream.
TEST_P(VmmTest, VMM_ERROR_CLEAR_AfterARefusedCallTheNextValidRequestSucceeds) {
    Env &v = e();
    const size_t second0 = second_releases(api);
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_stream *st = v.stream();
    void *src = v.source(info.size, 341);
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(s, st, src, info.size, 0, &r), "slot_remap"));
    ASSERT_TRUE(v.ok(v.release(s, st, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.query(r).status, XMC_OK);
    xmc_request *bad = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, st, &bad), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, v.remap(s, st, nullptr, info.size, 0, &bad), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, v.remap(s, st, src, info.size - 1, 0, &bad), "slot_remap"));
    std::vector<char> data = pattern(342, info.size);
    xmc_copy_desc d = Env::linear(data.data(), XMC_MEM_HOST, info.address, XMC_MEM_DEVICE, info.size);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->copy(v.inst, &d, st), "copy"));
    // A refused call leaves nothing behind at the driver either: a second unmap
    // there is state that later requests on the slot meet.
    EXPECT_EQ(second_releases(api), second0) << "a refused call reached the driver (a second unmap or release)";
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(s, st, src, info.size, 0, &q))) << "the slot kept an error of a refused call";
    ASSERT_TRUE(v.ok(v.wait(q)));
    EXPECT_EQ(v.query(q).status, XMC_OK);
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, st))) << "the stream kept an error of a refused call";
    EXPECT_TRUE(holds(v.read(info, st), 341));
}

// An asynchronous failure is the failed request's only: the next remap on the
// same slot and stream succeeds and its contents are right.
TEST_P(VmmTest, VMM_ERROR_CLEAR_AfterAFailedRemapTheNextRemapOnTheSameSlotAndStreamSucceeds) {
    const FaultHook h = fault_hook(api, false, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    auto r = v.released_slot_with_source(1, 351);
    ASSERT_NE(r.slot, nullptr);
    xmc_stream *st = v.stream();
    h.arm();
    xmc_request *failed = nullptr, *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, st, r.source, r.info.size, 0, &failed)));
    expect_async_failure(v, failed, h);
    h.disarm();
    ASSERT_TRUE(v.ok(v.remap(r.slot, st, r.source, r.info.size, 0, &q))) << "the slot kept the failed remap's error";
    ASSERT_TRUE(v.ok(v.wait(q))) << "the failed remap's error outlived it";
    EXPECT_EQ(v.query(q).status, XMC_OK);
    EXPECT_EQ(v.query(q).native_code, 0);
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, st))) << "the stream kept the failed remap's error";
    EXPECT_TRUE(holds(v.read(r.info, st), 351));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, q)));
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(r.slot, st, &rel)));
    EXPECT_TRUE(v.ok(v.wait(rel)));
}

TEST_P(VmmTest, VMM_ERROR_CLEAR_AfterAFailedReleaseTheNextReleaseOnTheSameSlotAndStreamSucceeds) {
    const FaultHook h = fault_hook(api, true, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    ASSERT_TRUE(reopen(h.options));
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 361));
    xmc_stream *st = v.stream();
    const uint64_t free0 = v.free_memory();
    h.arm();
    xmc_request *failed = nullptr, *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, st, &failed)));
    expect_async_failure(v, failed, h);
    h.disarm();
    EXPECT_TRUE(holds(v.read(info, st), 361)) << "a failed release must leave the slot's bytes";
    ASSERT_TRUE(v.ok(v.release(s, st, &rel))) << "the slot kept the failed release's error";
    ASSERT_TRUE(v.ok(v.wait(rel))) << "the failed release's error outlived it";
    EXPECT_EQ(v.query(rel).status, XMC_OK);
    EXPECT_EQ(v.free_memory(), free0 + info.size);
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, st)));
    void *src = v.source(info.size, 362);
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(s, st, src, info.size, 0, &q)));
    ASSERT_TRUE(v.ok(v.wait(q)));
    EXPECT_TRUE(holds(v.read(info, st), 362));
}

} // namespace
} // namespace xmc::conformance
