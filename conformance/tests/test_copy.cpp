// COPY-*: strided copies and stream order (SPEC 5). One body per requirement,
// run on every selected backend. Expected contents are computed here from the
// descriptor alone, never taken from the backend: every byte of the
// destination buffer, guard bytes around the described region included, is
// compared with what the plain formula of xmc/backend.h says it must hold.
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace xmc::conformance {
namespace {

constexpr size_t kGuard = 64;  // poisoned bytes before and after every described region

const char *kind_name(xmc_mem_kind k) {
    switch (k) {
    case XMC_MEM_HOST: return "host";
    case XMC_MEM_PINNED: return "pinned";
    case XMC_MEM_REGISTERED: return "registered";
    case XMC_MEM_DEVICE: return "device";
    }
    return "?";
}

// One buffer of a memory kind, made through the backend under test.
struct Buf {
    xmc_mem_kind kind = XMC_MEM_HOST;
    int32_t device = 0;
    char *ptr = nullptr;
    size_t bytes = 0;
    size_t mapped = 0;  // registered: the mmap'ed length
};

class CopyTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
        if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
        XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &stream_));
    }

    void TearDown() override {
        if (stream_) api->stream_synchronize(inst, stream_);
        for (auto &b : bufs_) release(b);
        bufs_.clear();
        for (auto *s : streams_) EXPECT_EQ(api->stream_destroy(inst, s), XMC_OK) << last_error();
        if (stream_) {
            EXPECT_EQ(api->stream_destroy(inst, stream_), XMC_OK) << last_error();
        }
        for (auto *e : events_) EXPECT_EQ(api->event_destroy(inst, e), XMC_OK) << last_error();
        BackendTest::TearDown();
        // Over a fake driver: closing the instance left nothing alive in it.
        if (const DriverControl *c = driver_control(api, nullptr)) {
            EXPECT_EQ(c->live_objects(), 0u) << "the backend left driver objects behind:\n" << c->ledger_text();
        }
    }

    // The kinds of memory this backend can make: host always, device with
    // `stream`, pinned with `pin`, registered with `register`.
    std::vector<xmc_mem_kind> kinds() const {
        std::vector<xmc_mem_kind> k = {XMC_MEM_HOST, XMC_MEM_DEVICE};
        if (has(XMC_CAP_PIN)) k.push_back(XMC_MEM_PINNED);
        if (has(XMC_CAP_REGISTER)) k.push_back(XMC_MEM_REGISTERED);
        return k;
    }

    Buf make(xmc_mem_kind kind, size_t bytes, int32_t device = 0) {
        Buf b;
        b.kind = kind;
        b.device = device;
        b.bytes = bytes;
        switch (kind) {
        case XMC_MEM_HOST: b.ptr = new char[bytes]; break;
        case XMC_MEM_PINNED: {
            xmc_pin_result r{};
            // Where the backend can, pinned memory is also registered with the
            // device, as cudaHostAlloc memory is: the driver's fast path.
            const int32_t with = has(XMC_CAP_PIN_REGISTER) ? device : XMC_NO_DEVICE;
            EXPECT_TRUE(status_is(XMC_OK, api->pin_alloc(inst, bytes, 64, with, &r)));
            b.ptr = static_cast<char *>(r.base);
            break;
        }
        case XMC_MEM_REGISTERED: {
            const size_t page = page_size();
            b.mapped = (bytes + page - 1) / page * page;
            void *p = mmap(nullptr, b.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) { ADD_FAILURE() << "mmap failed"; break; }
            xmc_reg_info info{};
            if (!status_is(XMC_OK, api->reg_register(inst, p, b.mapped, device, 0, &info))) {
                ADD_FAILURE() << "cannot register a copy buffer on device " << device << ": " << last_error();
                munmap(p, b.mapped);
                break;
            }
            b.ptr = static_cast<char *>(p);
            break;
        }
        case XMC_MEM_DEVICE: {
            void *p = nullptr;
            EXPECT_TRUE(status_is(XMC_OK, api->dev_alloc(inst, device, bytes, &p)));
            b.ptr = static_cast<char *>(p);
            break;
        }
        }
        if (b.ptr) bufs_.push_back(b);
        return b;
    }

    void release(const Buf &b) {
        switch (b.kind) {
        case XMC_MEM_HOST: delete[] b.ptr; break;
        case XMC_MEM_PINNED: EXPECT_EQ(api->pin_free(inst, b.ptr), XMC_OK) << last_error(); break;
        case XMC_MEM_REGISTERED:
            EXPECT_EQ(api->reg_unregister(inst, b.ptr), XMC_OK) << last_error();
            munmap(b.ptr, b.mapped);
            break;
        case XMC_MEM_DEVICE: EXPECT_EQ(api->dev_free(inst, b.ptr), XMC_OK) << last_error(); break;
        }
    }

    // A whole-buffer 1-D copy between a host vector and b, on `s`, waited for.
    // Device memory is only ever read or written through the backend.
    void put(const Buf &b, const std::vector<char> &data, xmc_stream *s = nullptr) {
        if (b.kind != XMC_MEM_DEVICE) { std::memcpy(b.ptr, data.data(), b.bytes); return; }
        std::vector<char> staging(data);
        xmc_copy_desc d = linear(staging.data(), XMC_MEM_HOST, 0, b.ptr, XMC_MEM_DEVICE, b.device, b.bytes);
        ASSERT_TRUE(status_is(XMC_OK, api->copy(inst, &d, s ? s : stream_)));
        ASSERT_TRUE(status_is(XMC_OK, api->stream_synchronize(inst, s ? s : stream_)));
    }
    std::vector<char> get(const Buf &b, xmc_stream *s = nullptr) {
        std::vector<char> out(b.bytes);
        if (b.kind != XMC_MEM_DEVICE) { std::memcpy(out.data(), b.ptr, b.bytes); return out; }
        xmc_copy_desc d = linear(b.ptr, XMC_MEM_DEVICE, b.device, out.data(), XMC_MEM_HOST, 0, b.bytes);
        EXPECT_TRUE(status_is(XMC_OK, api->copy(inst, &d, s ? s : stream_)));
        EXPECT_TRUE(status_is(XMC_OK, api->stream_synchronize(inst, s ? s : stream_)));
        return out;
    }

    static xmc_copy_desc linear(void *src, xmc_mem_kind sk, int32_t sd, void *dst, xmc_mem_kind dk, int32_t dd,
                                size_t n) {
        xmc_copy_desc d{};
        d.src = {src, sk, sd, 0, 0, 0, n, n};
        d.dst = {dst, dk, dd, 0, 0, 0, n, n};
        d.width_bytes = n;
        d.height = d.depth = 1;
        return d;
    }

    xmc_stream *new_stream(int32_t device) {
        xmc_stream *s = nullptr;
        EXPECT_TRUE(status_is(XMC_OK, api->stream_create(inst, device, &s)));
        if (s) streams_.push_back(s);
        return s;
    }
    xmc_event *new_event(int32_t device) {
        xmc_event *e = nullptr;
        EXPECT_TRUE(status_is(XMC_OK, api->event_create(inst, device, &e)));
        if (e) events_.push_back(e);
        return e;
    }

    int32_t devices_ = 0;
    xmc_stream *stream_ = nullptr;
    std::vector<xmc_stream *> streams_;
    std::vector<xmc_event *> events_;
    std::vector<Buf> bufs_;
};

// ---- COPY-STRIDED ----------------------------------------------------------

// A random shape of `dims` dimensions with storage offsets and padded pitches.
// Slice pitches are sometimes a multiple of the pitch and sometimes not, so a
// backend that maps copies onto a driver's 3-D call meets both.
struct Shape {
    size_t w = 1, h = 1, d = 1;
    xmc_copy_side s{}, t{};  // src and dst geometry (ptr, kind, device filled later)
};

xmc_copy_side random_side(std::mt19937_64 &rng, int dims, size_t w, size_t h) {
    xmc_copy_side s{};
    s.x_bytes = rng() % 17;
    s.y = dims >= 2 ? rng() % 4 : 0;
    s.z = dims >= 3 ? rng() % 3 : 0;
    s.pitch = s.x_bytes + w + rng() % 33;
    const size_t slice = s.pitch * (s.y + h);
    s.slice_pitch = (rng() % 2) ? slice + s.pitch * (rng() % 3) : slice + rng() % 65;
    return s;
}

Shape random_shape(std::mt19937_64 &rng, int dims) {
    Shape sh;
    sh.w = 1 + rng() % 96;
    sh.h = dims >= 2 ? 1 + rng() % 6 : 1;
    sh.d = dims >= 3 ? 1 + rng() % 4 : 1;
    sh.s = random_side(rng, dims, sh.w, sh.h);
    sh.t = random_side(rng, dims, sh.w, sh.h);
    return sh;
}

size_t side_bytes(const xmc_copy_side &s, const Shape &sh) { return (s.z + sh.d) * s.slice_pitch; }

size_t offset(const xmc_copy_side &s, size_t x, size_t y, size_t z) {
    return (s.z + z) * s.slice_pitch + (s.y + y) * s.pitch + s.x_bytes + x;
}

std::string show(const Shape &sh) {
    char b[256];
    std::snprintf(b, sizeof b,
                  "extent %zux%zux%zu, src x%zu y%zu z%zu pitch %zu slice %zu, dst x%zu y%zu z%zu pitch %zu slice %zu",
                  sh.w, sh.h, sh.d, sh.s.x_bytes, sh.s.y, sh.s.z, sh.s.pitch, sh.s.slice_pitch, sh.t.x_bytes,
                  sh.t.y, sh.t.z, sh.t.pitch, sh.t.slice_pitch);
    return b;
}

class CopyStrided : public CopyTest {
protected:
    void SetUp() override {
        CopyTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
    }

    // One copy of shape `sh` from a src of kind sk to a dst of kind dk: random
    // non-zero source bytes, a poisoned destination, then every byte of the
    // destination (guards included) compared with the expected image.
    void check(const Shape &sh, xmc_mem_kind sk, xmc_mem_kind dk, int32_t device, xmc_stream *s,
               std::mt19937_64 &rng) {
        SCOPED_TRACE(std::string(kind_name(sk)) + " -> " + kind_name(dk) + " on device " + std::to_string(device) +
                     ": " + show(sh));
        const size_t sbytes = kGuard + side_bytes(sh.s, sh) + kGuard;
        const size_t tbytes = kGuard + side_bytes(sh.t, sh) + kGuard;
        Buf src = make(sk, sbytes, device), dst = make(dk, tbytes, device);
        ASSERT_TRUE(src.ptr && dst.ptr);
        std::vector<char> sdata(sbytes), poison(tbytes);
        for (auto &c : sdata) c = static_cast<char>(1 + rng() % 255);
        for (size_t i = 0; i < tbytes; ++i) poison[i] = static_cast<char>(0xA5 ^ (i * 7));
        put(src, sdata, s);
        put(dst, poison, s);

        xmc_copy_desc d{};
        d.src = sh.s;
        d.src.ptr = src.ptr + kGuard;
        d.src.kind = sk;
        d.src.device = device;
        d.dst = sh.t;
        d.dst.ptr = dst.ptr + kGuard;
        d.dst.kind = dk;
        d.dst.device = device;
        d.width_bytes = sh.w;
        d.height = sh.h;
        d.depth = sh.d;
        ASSERT_TRUE(status_is(XMC_OK, api->copy(inst, &d, s)));
        ASSERT_TRUE(status_is(XMC_OK, api->stream_synchronize(inst, s)));

        std::vector<char> want = poison;
        for (size_t z = 0; z < sh.d; ++z)
            for (size_t y = 0; y < sh.h; ++y)
                for (size_t x = 0; x < sh.w; ++x)
                    want[kGuard + offset(sh.t, x, y, z)] = sdata[kGuard + offset(sh.s, x, y, z)];
        const std::vector<char> got = get(dst, s);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < tbytes; ++i)
            if (got[i] != want[i] && wrong++ == 0) first = i;
        EXPECT_EQ(wrong, 0u) << wrong << " destination byte(s) differ, the first at offset " << first
                             << (first < kGuard || first >= tbytes - kGuard ? " (a guard byte)" : "")
                             << ": got " << int(static_cast<unsigned char>(got[first])) << ", want "
                             << int(static_cast<unsigned char>(want[first]));
        // The source is read only.
        EXPECT_TRUE(get(src, s) == sdata) << "the copy changed its source";
        release(src);
        release(dst);
        bufs_.pop_back();
        bufs_.pop_back();
    }

    void every_kind_pair(int dims, int cases) {
        std::mt19937_64 rng(0x5eed0000u + dims);
        for (xmc_mem_kind sk : kinds())
            for (xmc_mem_kind dk : kinds())
                for (int c = 0; c < cases && !HasFatalFailure(); ++c) check(random_shape(rng, dims), sk, dk, 0, stream_, rng);
    }
};

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

// Refusals: each bad descriptor gets its own status and detail naming "copy",
// and nothing is written: the destination stays poisoned.
class CopyRefusal : public CopyStrided {
protected:
    void SetUp() override {
        CopyStrided::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        src_.assign(4096, 1);
        dst_.assign(4096, 0x5A);
        good_ = linear(src_.data(), XMC_MEM_HOST, 0, dst_.data(), XMC_MEM_HOST, 0, 64);
        good_.src.pitch = good_.dst.pitch = 128;
        good_.src.slice_pitch = good_.dst.slice_pitch = 4 * 128;
        good_.height = 4;
        good_.depth = 2;
    }
    void expect_refused(const xmc_copy_desc &d, xmc_status want, const char *what, xmc_stream *s = nullptr) {
        XMC_EXPECT_REFUSED(want, api->copy(inst, &d, s ? s : stream_), "copy") << what;
        ASSERT_EQ(api->stream_synchronize(inst, stream_), XMC_OK);
        EXPECT_EQ(std::vector<char>(4096, 0x5A), dst_) << what << ": a refused copy wrote the destination";
    }
    std::vector<char> src_, dst_;
    xmc_copy_desc good_{};
};

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

// ---- COPY-ORDER ------------------------------------------------------------

class CopyOrder : public CopyTest {};

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
