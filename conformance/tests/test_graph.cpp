// GRAPH-CAPTURE: stream capture into graphs (SPEC 5, capability `graph`).
// Every test body of the requirement, run on every selected backend: what a
// capture records and what a launch runs (in order, as often as asked, on the
// stream it is launched on), what a capturing stream refuses and that it is
// usable once the capture ends, and that destroying a graph never frees what
// a running launch uses. Graphs over slots (VMM-GRAPH, VMM-GRAPH-ORDER) are in
// test_vmm_graph.cpp. Buffers come from the backend (copy_env.hpp); device memory is
// only read and written through the backend's own copies.
#include "copy_env.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace xmc::conformance {

// A stream on device 0 and buffers (CopyTest), and the graphs and captures a
// test makes: TearDown ends a capture left open and destroys every graph
// before the streams and buffers go.
class GraphTest : public CopyTest {
protected:
    void TearDown() override {
        for (xmc_stream *s : capturing_) {
            xmc_graph *g = nullptr;
            if (api->graph_end(inst, s, &g) == XMC_OK) graphs_.push_back(g);
        }
        capturing_.clear();
        for (xmc_graph *g : graphs_) EXPECT_EQ(api->graph_destroy(inst, g), XMC_OK) << last_error();
        graphs_.clear();
        CopyTest::TearDown();
    }

    ::testing::AssertionResult begin(xmc_stream *s) {
        ::testing::AssertionResult r = status_is(XMC_OK, api->graph_begin(inst, s));
        if (r) capturing_.push_back(s);
        return r;
    }
    // Ends the capture on s: the graph, or nullptr (a failure recorded).
    xmc_graph *end(xmc_stream *s) {
        xmc_graph *g = nullptr;
        EXPECT_TRUE(status_is(XMC_OK, api->graph_end(inst, s, &g)));
        capturing_.erase(std::remove(capturing_.begin(), capturing_.end(), s), capturing_.end());
        if (g) graphs_.push_back(g);
        return g;
    }
    xmc_status destroy(xmc_graph *g) {
        const xmc_status st = api->graph_destroy(inst, g);
        if (st == XMC_OK) graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), g), graphs_.end());
        return st;
    }
    // A 1-D copy of n bytes from src to dst on s.
    xmc_status copy(const Buf &src, const Buf &dst, size_t n, xmc_stream *s) {
        xmc_copy_desc d = linear(src.ptr, src.kind, 0, dst.ptr, dst.kind, 0, n);
        return api->copy(inst, &d, s);
    }
    // Pinned memory where the backend has it (a graph's host side is
    // page-locked in practice), else plain host memory.
    Buf host_buf(size_t n, char fill) {
        Buf b = make(has(XMC_CAP_PIN) ? XMC_MEM_PINNED : XMC_MEM_HOST, n);
        if (b.ptr) std::memset(b.ptr, fill, n);
        return b;
    }

    std::vector<xmc_stream *> capturing_;
    std::vector<xmc_graph *> graphs_;
};

namespace {

constexpr size_t kBytes = 64 << 10;

std::vector<char> bytes_of(const Buf &b) { return std::vector<char>(b.ptr, b.ptr + b.bytes); }

// What the recorded callbacks saw, in the order they ran.
struct Trace {
    std::mutex mu;
    std::vector<int> marks;
    const char *watch = nullptr;  // a host buffer a callback looks at
    std::vector<char> seen;       // its first byte, at each callback that looks
};
struct Mark {
    Trace *t;
    int id;
    bool look;
};
void mark(void *p) {
    auto *m = static_cast<Mark *>(p);
    std::lock_guard<std::mutex> l(m->t->mu);
    m->t->marks.push_back(m->id);
    if (m->look) m->t->seen.push_back(m->t->watch[0]);
}

} // namespace

// ---- GRAPH-CAPTURE ---------------------------------------------------------------

// Capture records copies and callbacks without running them; each launch runs
// all of it, in the recorded order, reading the source as it is at the launch.
TEST_P(GraphTest, GRAPH_CAPTURE_RecordsWorkAndEachLaunchRunsItInOrder) {
    Buf in = host_buf(kBytes, 1), out = host_buf(kBytes, 0);
    Buf a = make(XMC_MEM_DEVICE, kBytes), b = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(in.ptr && out.ptr && a.ptr && b.ptr);
    put(a, std::vector<char>(kBytes, 0));
    put(b, std::vector<char>(kBytes, 0));
    Trace t;
    t.watch = out.ptr;
    Mark first{&t, 1, false}, last{&t, 2, true};
    ASSERT_TRUE(begin(stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, mark, &first));
    XMC_ASSERT_STATUS(XMC_OK, copy(in, a, kBytes, stream_));   // in -> a -> b -> out: each step
    XMC_ASSERT_STATUS(XMC_OK, copy(a, b, kBytes, stream_));    // needs the one before it
    XMC_ASSERT_STATUS(XMC_OK, copy(b, out, kBytes, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, mark, &last));
    xmc_graph *g = end(stream_);
    ASSERT_NE(g, nullptr);
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_TRUE(t.marks.empty()) << "a recorded callback ran during the capture";
    EXPECT_EQ(get(b), std::vector<char>(kBytes, 0)) << "a recorded copy ran during the capture";
    EXPECT_EQ(bytes_of(out), std::vector<char>(kBytes, 0)) << "a recorded copy ran during the capture";
    // Launched one at a time: each reads `in` as it is then.
    for (char v : {char(11), char(22), char(33)}) {
        std::memset(in.ptr, v, kBytes);
        XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, g, stream_));
        XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
        EXPECT_EQ(bytes_of(out), std::vector<char>(kBytes, v)) << "launch of the graph reading " << int(v);
    }
    // Launched three times back to back: three runs, each whole and in order.
    std::memset(in.ptr, 44, kBytes);
    for (int i = 0; i < 3; ++i) XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, g, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    const std::vector<int> want = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
    EXPECT_EQ(t.marks, want) << "the recorded callbacks did not run once per launch, in the recorded order";
    ASSERT_EQ(t.seen.size(), 6u);
    EXPECT_EQ(t.seen.back(), 44) << "the last callback of a launch ran before the copies recorded before it";
    EXPECT_EQ(get(b), std::vector<char>(kBytes, 44));
}

// A launch is work on the stream it is launched on: after that stream's prior
// work, before its later work; another stream's order is its own.
TEST_P(GraphTest, GRAPH_CAPTURE_LaunchRunsAfterPriorAndBeforeLaterWorkOfItsStream) {
    Buf first = host_buf(kBytes, 5), second = host_buf(kBytes, 6), out = host_buf(kBytes, 0),
        later = host_buf(kBytes, 0);
    Buf a = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(first.ptr && second.ptr && out.ptr && later.ptr && a.ptr);
    put(a, std::vector<char>(kBytes, 0));
    ASSERT_TRUE(begin(stream_));
    XMC_ASSERT_STATUS(XMC_OK, copy(a, out, kBytes, stream_));  // the graph: a -> out
    xmc_graph *g = end(stream_);
    ASSERT_NE(g, nullptr);
    for (int round = 0; round < 2; ++round) {
        xmc_stream *t = new_stream(0);  // a stream the graph was not recorded on
        ASSERT_NE(t, nullptr);
        const char want = static_cast<char>(5 + 2 * round), after = static_cast<char>(6 + 2 * round);
        std::memset(first.ptr, want, kBytes);
        std::memset(second.ptr, after, kBytes);
        std::memset(out.ptr, 0, kBytes);
        // Prior work held back by a sleeping callback: a launch that ran
        // early would read a's old bytes.
        XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, t, [](void *) {
            std::this_thread::sleep_for(std::chrono::milliseconds(60));
        }, nullptr));
        XMC_ASSERT_STATUS(XMC_OK, copy(first, a, kBytes, t));
        XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, g, t));
        XMC_ASSERT_STATUS(XMC_OK, copy(second, a, kBytes, t));  // later work: must not be seen by the launch
        XMC_ASSERT_STATUS(XMC_OK, copy(a, later, kBytes, t));
        XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, t));
        EXPECT_EQ(bytes_of(out), std::vector<char>(kBytes, want))
            << "round " << round << ": the launch did not run between its stream's prior and later work";
        EXPECT_EQ(bytes_of(later), std::vector<char>(kBytes, after)) << "round " << round;
    }
}

// Work the platform refuses during a capture is refused with its own status
// (detail naming the call), the capture goes on, other streams work, and the
// stream is usable once the capture ends.
TEST_P(GraphTest, GRAPH_CAPTURE_RefusedWorkLeavesTheCaptureAndTheStreamUsable) {
    Buf in = host_buf(kBytes, 9), out = host_buf(kBytes, 0), other = host_buf(kBytes, 0);
    Buf a = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(in.ptr && out.ptr && other.ptr && a.ptr);
    xmc_stream *t = new_stream(0);
    xmc_event *e = new_event(0);
    ASSERT_TRUE(t && e);
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, e, t));
    // A graph made earlier, to try launching into the capture.
    ASSERT_TRUE(begin(t));
    xmc_graph *empty = end(t);
    ASSERT_NE(empty, nullptr);

    ASSERT_TRUE(begin(stream_));
    XMC_ASSERT_STATUS(XMC_OK, copy(in, a, kBytes, stream_));
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->stream_synchronize(inst, stream_), "stream_synchronize");
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->event_record(inst, e, stream_), "event_record");
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->stream_wait_event(inst, stream_, e), "stream_wait_event");
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->graph_begin(inst, stream_), "graph_begin");
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->graph_launch(inst, empty, stream_), "graph_launch");
    XMC_EXPECT_REFUSED(XMC_ERR_CAPTURING, api->stream_destroy(inst, stream_), "stream_destroy");
    xmc_graph *none = nullptr;
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->graph_end(inst, stream_, nullptr), "graph_end");
    // Another stream is not part of the capture: its work runs now.
    XMC_ASSERT_STATUS(XMC_OK, copy(in, other, kBytes, t));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, t));
    EXPECT_EQ(bytes_of(other), std::vector<char>(kBytes, 9)) << "work on a stream that does not capture did not run";
    XMC_ASSERT_STATUS(XMC_OK, api->event_synchronize(inst, e));  // recorded before the capture: complete
    XMC_ASSERT_STATUS(XMC_OK, copy(a, out, kBytes, stream_));  // recorded after the refusals
    xmc_graph *g = end(stream_);
    ASSERT_NE(g, nullptr) << "a refused call ended the capture";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->graph_end(inst, stream_, &none), "graph_end");
    EXPECT_EQ(none, nullptr);
    // The stream works again, and the graph holds the work from both sides of the refusals.
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, e, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, stream_, e));
    XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, empty, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, g, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_EQ(bytes_of(out), std::vector<char>(kBytes, 9)) << "the graph lost work recorded around the refusals";
}

// Destroying a graph while a launch of it runs waits for the launch (or is
// refused busy): it never returns while the launch may still use the graph.
TEST_P(GraphTest, GRAPH_CAPTURE_DestroyWaitsForARunningLaunch) {
    struct Gate {
        std::mutex mu;
        std::condition_variable cv;
        bool open = false;
        std::atomic<int> entered{0};
    } gate;
    Buf in = host_buf(kBytes, 3), out = host_buf(kBytes, 0);
    Buf a = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(in.ptr && out.ptr && a.ptr);
    ASSERT_TRUE(begin(stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, [](void *p) {
        auto *g = static_cast<Gate *>(p);
        g->entered.fetch_add(1);
        std::unique_lock<std::mutex> l(g->mu);
        g->cv.wait(l, [&] { return g->open; });
    }, &gate));
    XMC_ASSERT_STATUS(XMC_OK, copy(in, a, kBytes, stream_));
    XMC_ASSERT_STATUS(XMC_OK, copy(a, out, kBytes, stream_));
    xmc_graph *g = end(stream_);
    ASSERT_NE(g, nullptr);
    XMC_ASSERT_STATUS(XMC_OK, api->graph_launch(inst, g, stream_));
    auto open = [&] {
        std::lock_guard<std::mutex> l(gate.mu);
        gate.open = true;
        gate.cv.notify_all();
    };
    std::atomic<bool> returned{false};
    std::atomic<xmc_status> got{XMC_OK};
    std::thread destroyer([&] {
        got = api->graph_destroy(inst, g);
        returned = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (!returned && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const bool early = returned.load();
    const xmc_status early_status = got.load();
    open();
    destroyer.join();
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_EQ(gate.entered.load(), 1);
    if (early) {
        EXPECT_EQ(early_status, XMC_ERR_BUSY)
            << "graph_destroy returned " << xmc_status_string(early_status)
            << " while a launch of the graph was still running (it must wait for it, or refuse busy)";
        if (early_status == XMC_ERR_BUSY) XMC_EXPECT_STATUS(XMC_OK, destroy(g));
        else graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), g), graphs_.end());
    } else {
        XMC_EXPECT_STATUS(XMC_OK, got.load());
        graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), g), graphs_.end());
    }
    EXPECT_EQ(bytes_of(out), std::vector<char>(kBytes, 3)) << "the launch did not finish its work";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_launch(inst, g, stream_), "graph_launch");
}

// Handles and arguments: a graph never issued, destroyed, or of another
// instance, and streams that are not live, are refused with nothing changed.
TEST_P(GraphTest, GRAPH_CAPTURE_RefusesBadGraphsStreamsAndArguments) {
    int junk = 0;
    auto *bad_g = reinterpret_cast<xmc_graph *>(&junk);
    auto *bad_s = reinterpret_cast<xmc_stream *>(&junk);
    xmc_graph *g = nullptr;
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_launch(inst, bad_g, stream_), "graph_launch");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_destroy(inst, bad_g), "graph_destroy");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_begin(inst, bad_s), "graph_begin");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_end(inst, bad_s, &g), "graph_end");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->graph_end(inst, stream_, &g), "graph_end");
    EXPECT_EQ(g, nullptr);
    ASSERT_TRUE(begin(stream_));
    g = end(stream_);
    ASSERT_NE(g, nullptr);
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_launch(inst, g, bad_s), "graph_launch");
    // Another instance's graph is no graph of this one, and the reverse.
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    XMC_EXPECT_STATUS(XMC_ERR_INVALID_HANDLE, api->graph_destroy(other, g));  // (its detail is other's)
    XMC_ASSERT_STATUS(XMC_OK, destroy(g));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_destroy(inst, g), "graph_destroy");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->graph_launch(inst, g, stream_), "graph_launch");
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
}

XMC_INSTANTIATE_FOR_BACKENDS(GraphTest);

} // namespace xmc::conformance
