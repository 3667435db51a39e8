// VMM-*: fixed-address slots (SPEC 5; test_vmm.cpp says how the five files divide them): graphs
// over slots: VMM-GRAPH and VMM-GRAPH-ORDER.
#include "vmm_tests.hpp"

namespace xmc::conformance {
namespace {

// ---- VMM-GRAPH --------------------------------------------------------------

// One graph that reads the slot and one that writes it, recorded once; across
// release, remap (copied at once or deferred) and adopt, each launch reads the
// bytes of the latest reload and writes into the slot's current backing.
TEST_P(VmmTest, VMM_GRAPH_LaunchesAfterEachReloadSeeTheReloadedBytes) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(3 << 20);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 300));
    xmc_stream *a = v.stream(), *b = v.stream(), *rec = v.stream();
    char *out = v.graph_buffer(info.size);
    void *in = v.source(info.size, 399);
    ASSERT_TRUE(a && b && rec && out && in);
    xmc_graph *reader = v.capture_read(info, rec, out), *writer = v.capture_write(info, rec, in);
    ASSERT_TRUE(reader && writer);
    ASSERT_TRUE(v.ok(api->graph_launch(v.inst, reader, a)));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, a)));
    EXPECT_TRUE(holds(std::vector<char>(out, out + info.size), 300)) << "before any release";
    for (int cycle = 0; cycle < 4; ++cycle) {
        SCOPED_TRACE("cycle " + std::to_string(cycle));
        const int tag = 301 + cycle;
        void *src = v.source(info.size, tag);
        xmc_request *rel = nullptr, *rem = nullptr;
        ASSERT_TRUE(v.ok(v.release(s, a, &rel)));
        const uint32_t flags = cycle % 2 ? XMC_REMAP_DEFER_COPY : 0;
        ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, flags, &rem)));
        if (flags) {
            ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, rem, 0, b)));
        }
        ASSERT_TRUE(v.ok(v.wait(rem)));
        ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
        ASSERT_TRUE(v.ok(v.destroy(rem)));
        ASSERT_TRUE(v.ok(v.destroy(rel)));
        // The reader, launched on either stream, sees this reload bit for bit.
        std::memset(out, kPoison, info.size);
        xmc_stream *on = cycle % 2 ? b : a;
        ASSERT_TRUE(v.ok(api->graph_launch(v.inst, reader, on)));
        ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, on)));
        EXPECT_TRUE(holds(std::vector<char>(out, out + info.size), tag))
            << "a graph recorded before the release read other bytes than the slot's reloaded ones";
        // The writer's bytes land in the slot's current backing.
        ASSERT_TRUE(v.ok(api->graph_launch(v.inst, writer, on)));
        ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, on)));
        EXPECT_TRUE(holds(v.read(info), 399)) << "a graph's write did not land in the slot's current backing";
        v.free_source(src);
    }
}

TEST_P(VmmTest, VMM_GRAPH_StatefulLaunchesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, Launch, Wait, Wait, Adopt, Destroy, Close, CaptureGraph,
                 CaptureGraph, LaunchGraph, LaunchGraph, LaunchGraph, WaitThenLaunchGraph>(0, GetParam(), "");
}

// ---- VMM-GRAPH-ORDER --------------------------------------------------------

// A release enqueued after a launch takes effect only once the graph's work
// (here: a gate it recorded, then a read of the slot) is done: held by its
// own gate, the launch is all that is ahead of the release on the stream.
TEST_P(VmmTest, VMM_GRAPH_ORDER_ReleaseAfterALaunchWaitsForTheGraphsWork) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 311));
    xmc_stream *a = v.stream(), *rec = v.stream();
    char *out = v.graph_buffer(info.size);
    ASSERT_TRUE(a && rec && out);
    ASSERT_TRUE(v.ok(v.begin_capture(rec)));
    auto gate = v.gate(rec);  // recorded: every launch waits here until the gate opens
    xmc_copy_desc d = Env::linear(info.address, XMC_MEM_DEVICE, out, XMC_MEM_PINNED, info.size);
    ASSERT_TRUE(v.ok(api->copy(v.inst, &d, rec)));
    xmc_graph *reader = v.end_capture(rec);
    ASSERT_NE(reader, nullptr);
    ASSERT_TRUE(v.ok(api->graph_launch(v.inst, reader, a)));
    const uint64_t free0 = v.free_memory();
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, a, &rel)));
    std::this_thread::sleep_for(kWatch);
    const xmc_request_info early = v.query(rel);
    const uint64_t free_early = v.free_memory();
    if (early.callback_fired || early.done || free_early != free0) {
        ADD_FAILURE() << "the release took effect before the graph launched ahead of it ran (callback_fired "
                      << early.callback_fired << ", done " << early.done << ", free memory grew by "
                      << free_early - free0 << "); the graph's read would now touch unmapped memory";
        return leak();
    }
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rel)));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, a)));
    EXPECT_TRUE(holds(std::vector<char>(out, out + info.size), 311))
        << "the graph launched before the release must see the slot mapped, with its bytes";
    EXPECT_EQ(v.free_memory(), free0 + info.size);
}

// A graph launched on a stream told to wait for a remap's copy reads what the
// copy left, though the copy is held back when the launch is enqueued.
TEST_P(VmmTest, VMM_GRAPH_ORDER_LaunchOnAStreamWaitingForARemapsCopyReadsTheCopy) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 321);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));  // mapped; the copy not launched yet
    ASSERT_TRUE(v.write(r.info, 322));
    xmc_stream *l = v.stream(), *c = v.stream(), *rec = v.stream();
    char *out = v.graph_buffer(r.info.size);
    ASSERT_TRUE(l && c && rec && out);
    xmc_graph *reader = v.capture_read(r.info, rec, out);  // over the mapping the copy goes into
    ASSERT_NE(reader, nullptr);
    auto gate = v.gate(l);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, l)));  // queued behind the gate
    ASSERT_TRUE(v.ok(api->request_stream_wait(v.inst, m, c)));
    ASSERT_TRUE(v.ok(api->graph_launch(v.inst, reader, c)));
    std::this_thread::sleep_for(kWatch / 3);
    gate->release();
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    EXPECT_TRUE(holds(std::vector<char>(out, out + r.info.size), 321))
        << "the graph read the slot before the remap's copy it was ordered after";
}

// On a capturing stream, a release or remap (single or batch), a deferred
// launch and a consumer's wait are refused with their own status, and nothing
// changes: the slots keep their states and bytes, the device its memory, and
// the graph records nothing of them.
TEST_P(VmmTest, VMM_GRAPH_ORDER_CapturingStreamRefusesReleaseAndRemapWithNothingChanged) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 331));
    auto r = v.released_slot_with_source(1, 332);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *deferred = nullptr;
    auto d = v.released_slot_with_source(1, 333);
    ASSERT_NE(d.slot, nullptr);
    ASSERT_TRUE(v.ok(v.remap(d.slot, v.io, d.source, d.info.size, XMC_REMAP_DEFER_COPY, &deferred)));
    ASSERT_TRUE(v.ok(v.wait(deferred)));
    xmc_stream *c = v.stream();
    ASSERT_NE(c, nullptr);
    const uint64_t free0 = v.free_memory();
    ASSERT_TRUE(v.ok(v.begin_capture(c)));
    xmc_request *q = nullptr;
    const void *src = r.source;
    const size_t n = r.info.size;
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING, api->slot_release(v.inst, s, c, &q), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING, api->slot_release_batch(v.inst, &s, 1, c, &q), "slot_release_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING, api->slot_remap(v.inst, r.slot, c, src, n, 0, &q), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING,
                          api->slot_remap_batch(v.inst, &r.slot, 1, c, &src, &n, XMC_REMAP_DEFER_COPY, &q),
                          "slot_remap_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING, api->request_launch_copy(v.inst, deferred, 0, c), "request_launch_copy"));
    EXPECT_TRUE(v.refused(XMC_ERR_CAPTURING, api->request_stream_wait(v.inst, deferred, c), "request_stream_wait"));
    EXPECT_EQ(q, nullptr) << "a refused call returned a request";
    EXPECT_EQ(v.free_memory(), free0) << "a refused call changed the device's memory";
    xmc_graph *g = v.end_capture(c);
    ASSERT_NE(g, nullptr);
    ASSERT_TRUE(v.ok(api->graph_launch(v.inst, g, c)));  // nothing of the refused calls was recorded
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    EXPECT_EQ(v.free_memory(), free0);
    EXPECT_TRUE(holds(v.read(info), 331)) << "the mapped slot lost its bytes";
    // Every slot is where it was: each call succeeds now, on the same stream.
    xmc_request *rel = nullptr, *rem = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, c, &rel)));
    ASSERT_TRUE(v.ok(v.remap(r.slot, c, r.source, r.info.size, 0, &rem)));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, deferred, 0, c)));
    ASSERT_TRUE(v.ok(v.wait(rel)));
    ASSERT_TRUE(v.ok(v.wait(rem)));
    ASSERT_TRUE(v.ok(v.wait(deferred)));
    EXPECT_TRUE(holds(v.read(r.info), 332));
    EXPECT_TRUE(holds(v.read(d.info), 333));
}

// A capture cannot begin while a remap still has reload copies to enqueue on
// the stream (they would be recorded instead of run): busy, until it has run.
TEST_P(VmmTest, VMM_GRAPH_ORDER_CaptureWaitsUntilARemapHasEnqueuedItsCopies) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 341);
    ASSERT_NE(r.slot, nullptr);
    xmc_stream *a = v.stream();
    ASSERT_NE(a, nullptr);
    auto gate = v.gate(a);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, a, r.source, r.info.size, 0, &m)));  // its point is behind the gate
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->graph_begin(v.inst, a), "graph_begin"));
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(v.begin_capture(a)));
    ASSERT_NE(v.end_capture(a), nullptr);
    EXPECT_TRUE(holds(v.read(r.info), 341)) << "the reload copy did not run on its stream";
}

} // namespace
} // namespace xmc::conformance
