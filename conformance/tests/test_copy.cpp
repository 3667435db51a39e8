// COPY-*: strided copies and stream order (SPEC 5). The test bodies of the
// COPY requirements, run on every selected backend: the fixed and random
// copies. Expected contents are computed from the descriptor alone, never
// taken from the backend (CopyStrided compares every byte of the destination,
// guard bytes included). The fixtures are in the harness (copy_env.hpp).
#include "copy_env.hpp"
#include "os_facts.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace xmc::conformance {
namespace {

// ---- COPY-STRIDED -----------------------------------------------------------

TEST_P(CopyStrided, COPY_STRIDED_OneDimensionalCopiesExactlyTheDescribedBytes) { every_kind_pair(1, 3); }

TEST_P(CopyStrided, COPY_STRIDED_TwoDimensionalCopiesExactlyTheDescribedBytes) { every_kind_pair(2, 3); }

TEST_P(CopyStrided, COPY_STRIDED_ThreeDimensionalCopiesExactlyTheDescribedBytes) { every_kind_pair(3, 4); }

TEST_P(CopyStrided, COPY_STRIDED_EveryDeviceCopiesOnItsOwnStream) {
    std::mt19937_64 rng(0x5eed1000u);
    for (int32_t dev = 0; dev < devices_; ++dev) {
        xmc_stream *s = new_stream(dev);
        ASSERT_NE(s, nullptr);
        for (xmc_mem_kind other : kinds()) {
            check(random_shape(rng, 3), other, XMC_MEM_DEVICE, dev, s, rng);
            check(random_shape(rng, 2), XMC_MEM_DEVICE, other, dev, s, rng);
        }
    }
}

TEST_P(CopyRefusal, COPY_STRIDED_RefusesNullPointersAndZeroExtents) {
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->copy(inst, nullptr, stream_), "copy");
    auto d = good_; d.width_bytes = 0; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "width 0");
    d = good_; d.height = 0; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "height 0");
    d = good_; d.depth = 0; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "depth 0");
    d = good_; d.src.ptr = nullptr; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "source NULL");
    d = good_; d.dst.ptr = nullptr; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "destination NULL");
    // The good descriptor itself is accepted: the refusals above are about the change alone.
    XMC_EXPECT_STATUS(XMC_OK, api->copy(inst, &good_, stream_));
    XMC_EXPECT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_EQ(dst_[0], 1);
}

TEST_P(CopyRefusal, COPY_STRIDED_RefusesPitchSmallerThanOffsetPlusWidth) {
    auto d = good_; d.src.pitch = 63; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "src pitch < width");
    d = good_; d.dst.x_bytes = 65; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "dst pitch < x + width");
    d = good_; d.src.slice_pitch = 4 * 128 - 1; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "src slice_pitch < pitch*rows");
    d = good_; d.dst.y = 1; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "dst slice_pitch < pitch*(y+height)");
}

TEST_P(CopyRefusal, COPY_STRIDED_RefusesExtentsThatOverflow) {
    auto d = good_; d.src.x_bytes = SIZE_MAX - 10; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "x + width overflows");
    d = good_; d.dst.pitch = SIZE_MAX / 2; d.dst.slice_pitch = SIZE_MAX; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "pitch*rows overflows");
    d = good_; d.src.z = SIZE_MAX / 512; expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "z*slice_pitch overflows");
    d = good_; d.dst.ptr = reinterpret_cast<void *>(UINTPTR_MAX - 100); expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "wraps the address space");
}

TEST_P(CopyRefusal, COPY_STRIDED_RefusesUnknownKindDeviceAndStream) {
    auto d = good_;
    const int seven = 7;  // stored as a C caller would: not a value of the C++ enum
    std::memcpy(&d.src.kind, &seven, sizeof d.src.kind);
    expect_refused(d, XMC_ERR_INVALID_ARGUMENT, "kind 7");
    d = good_; d.dst.kind = XMC_MEM_DEVICE; d.dst.device = devices_; expect_refused(d, XMC_ERR_NO_DEVICE, "device out of range");
    d = good_; d.src.kind = XMC_MEM_DEVICE; d.src.device = -1; expect_refused(d, XMC_ERR_NO_DEVICE, "device -1");
    int not_a_stream = 0;
    expect_refused(good_, XMC_ERR_INVALID_HANDLE, "a stream never created", reinterpret_cast<xmc_stream *>(&not_a_stream));
}

TEST_P(CopyRefusal, COPY_STRIDED_RefusesOverlappingSourceAndDestination) {
    auto d = good_;
    d.dst.ptr = src_.data() + 100;  // inside the source's span
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->copy(inst, &d, stream_), "copy");
    ASSERT_EQ(api->stream_synchronize(inst, stream_), XMC_OK);
    EXPECT_EQ(std::vector<char>(4096, 1), src_) << "a refused overlapping copy wrote";
}

// ---- COPY-ORDER -------------------------------------------------------------

struct Trace {
    std::mutex mu;
    std::vector<int> order;
    std::vector<int> seen;  // what the callback found in the destination
    const char *dst = nullptr;
};

TEST_P(CopyOrder, COPY_ORDER_OneStreamRunsCopiesAndCallbacksInOrder) {
    constexpr int kSteps = 8;
    constexpr size_t n = 8192;
    std::vector<std::vector<char>> srcs;
    for (int i = 0; i < kSteps; ++i) srcs.emplace_back(n, static_cast<char>(i + 1));
    Buf mid = make(XMC_MEM_DEVICE, n);
    std::vector<char> dst(n, 0);
    Trace t;
    t.dst = dst.data();
    struct Step { Trace *t; int i; };
    std::vector<Step> steps;
    for (int i = 0; i < kSteps; ++i) steps.push_back({&t, i});
    // The first callback sleeps: work behind it that ran early would show.
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, [](void *) {
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }, nullptr));
    for (int i = 0; i < kSteps; ++i) {
        auto a = linear(srcs[i].data(), XMC_MEM_HOST, 0, mid.ptr, XMC_MEM_DEVICE, 0, n);
        auto b = linear(mid.ptr, XMC_MEM_DEVICE, 0, dst.data(), XMC_MEM_HOST, 0, n);
        XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &a, stream_));
        XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &b, stream_));
        XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, [](void *p) {
            auto *st = static_cast<Step *>(p);
            std::lock_guard<std::mutex> l(st->t->mu);
            st->t->order.push_back(st->i);
            st->t->seen.push_back(st->t->dst[0] == st->t->dst[n - 1] ? st->t->dst[0] : -1);
        }, &steps[i]));
    }
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    std::vector<int> want_order, want_seen;
    for (int i = 0; i < kSteps; ++i) { want_order.push_back(i); want_seen.push_back(i + 1); }
    EXPECT_EQ(t.order, want_order) << "callbacks ran out of order";
    EXPECT_EQ(t.seen, want_seen) << "a callback did not see the copies enqueued before it, finished";
    EXPECT_EQ(dst, srcs.back());
}

TEST_P(CopyOrder, COPY_ORDER_SynchronizeWaitsForEveryEnqueuedCallback) {
    std::atomic<int> done{0};
    for (int i = 0; i < 3; ++i)
        XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, [](void *p) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            static_cast<std::atomic<int> *>(p)->fetch_add(1);
        }, &done));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_EQ(done.load(), 3) << "stream_synchronize returned before its callbacks ran";
}

TEST_P(CopyOrder, COPY_ORDER_EventOrdersWorkAcrossStreams) {
    constexpr size_t n = 16384;
    xmc_stream *producer = stream_, *consumer = new_stream(0);
    xmc_event *e = new_event(0);
    ASSERT_TRUE(consumer && e);
    std::vector<char> src(n), dst(n, 0);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<char>(1 + i % 251);
    Buf mid = make(XMC_MEM_DEVICE, n);
    put(mid, std::vector<char>(n, 0));
    // The producer is held back by a sleeping callback; a consumer that did
    // not wait for the event would copy the still-zero middle buffer.
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, producer, [](void *) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }, nullptr));
    auto a = linear(src.data(), XMC_MEM_HOST, 0, mid.ptr, XMC_MEM_DEVICE, 0, n);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &a, producer));
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, e, producer));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, consumer, e));
    auto b = linear(mid.ptr, XMC_MEM_DEVICE, 0, dst.data(), XMC_MEM_HOST, 0, n);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &b, consumer));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, consumer));
    EXPECT_TRUE(dst == src) << "the consumer stream ran before the event it waited for";
}

TEST_P(CopyOrder, COPY_ORDER_EventSynchronizeWaitsForWorkBeforeTheRecord) {
    std::atomic<int> done{0};
    xmc_event *e = new_event(0);
    ASSERT_NE(e, nullptr);
    XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, stream_, [](void *p) {
        std::this_thread::sleep_for(std::chrono::milliseconds(80));
        static_cast<std::atomic<int> *>(p)->store(1);
    }, &done));
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, e, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->event_synchronize(inst, e));
    EXPECT_EQ(done.load(), 1) << "event_synchronize returned before the work recorded before it";
}

TEST_P(CopyOrder, COPY_ORDER_RefusesBadStreamEventAndDeviceArguments) {
    xmc_stream *s = nullptr;
    xmc_event *e = nullptr;
    void *p = nullptr;
    int junk = 0;
    auto *bad_s = reinterpret_cast<xmc_stream *>(&junk);
    auto *bad_e = reinterpret_cast<xmc_event *>(&junk);
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->stream_create(inst, devices_, &s), "stream_create");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->stream_create(inst, -1, &s), "stream_create");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->stream_create(inst, 0, nullptr), "stream_create");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->event_create(inst, devices_, &e), "event_create");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_destroy(inst, bad_s), "stream_destroy");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_synchronize(inst, nullptr), "stream_synchronize");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_record(inst, bad_e, stream_), "event_record");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_synchronize(inst, nullptr), "event_synchronize");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_wait_event(inst, stream_, bad_e), "stream_wait_event");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_destroy(inst, bad_e), "event_destroy");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->host_callback(inst, stream_, nullptr, nullptr), "host_callback");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->host_callback(inst, bad_s, [](void *) {}, nullptr), "host_callback");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_alloc(inst, 0, 0, &p), "dev_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->dev_alloc(inst, devices_, 64, &p), "dev_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_free(inst, &junk), "dev_free");
    // A stream destroyed once is gone: the second destroy is refused.
    xmc_stream *once = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &once));
    XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(inst, once));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_destroy(inst, once), "stream_destroy");
    // An interior device address is not a base.
    void *d = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->dev_alloc(inst, 0, 4096, &d));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_free(inst, static_cast<char *>(d) + 256), "dev_free");
    XMC_EXPECT_STATUS(XMC_OK, api->dev_free(inst, d));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_free(inst, d), "dev_free");
}

XMC_INSTANTIATE_FOR_BACKENDS(CopyStrided);
XMC_INSTANTIATE_FOR_BACKENDS(CopyRefusal);
XMC_INSTANTIATE_FOR_BACKENDS(CopyOrder);

} // namespace
} // namespace xmc::conformance
