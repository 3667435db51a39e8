// The harness of the COPY-* tests (conformance/tests/test_copy.cpp) and of
// GRAPH-CAPTURE's (test_graph.cpp): buffers
// of every memory kind, made through the backend under test, and the fixtures.
#pragma once
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"

#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace xmc::conformance {

// The name of a memory kind, for messages.
inline const char *kind_name(xmc_mem_kind k) {
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

// A stream on device 0, and the buffers, streams and events a test makes,
// freed in TearDown; skips where the backend has no device. Over a fake
// driver, TearDown checks that closing the instance left nothing alive in it.
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

// COPY-STRIDED: copies of random shapes between every pair of memory kinds,
// every byte of the destination buffer, guard bytes around the described
// region included, compared with what the plain formula of xmc/backend.h says
// it must hold (computed from the descriptor alone, never taken from the
// backend).
class CopyStrided : public CopyTest {
protected:
    static constexpr size_t kGuard = 64;  // poisoned bytes before and after every described region

    // A random shape of `dims` dimensions with storage offsets and padded pitches.
    // Slice pitches are sometimes a multiple of the pitch and sometimes not, so a
    // backend that maps copies onto a driver's 3-D call meets both.
    struct Shape {
        size_t w = 1, h = 1, d = 1;
        xmc_copy_side s{}, t{};  // src and dst geometry (ptr, kind, device filled later)
    };

    static xmc_copy_side random_side(std::mt19937_64 &rng, int dims, size_t w, size_t h) {
        xmc_copy_side s{};
        s.x_bytes = rng() % 17;
        s.y = dims >= 2 ? rng() % 4 : 0;
        s.z = dims >= 3 ? rng() % 3 : 0;
        s.pitch = s.x_bytes + w + rng() % 33;
        const size_t slice = s.pitch * (s.y + h);
        s.slice_pitch = (rng() % 2) ? slice + s.pitch * (rng() % 3) : slice + rng() % 65;
        return s;
    }

    static Shape random_shape(std::mt19937_64 &rng, int dims) {
        Shape sh;
        sh.w = 1 + rng() % 96;
        sh.h = dims >= 2 ? 1 + rng() % 6 : 1;
        sh.d = dims >= 3 ? 1 + rng() % 4 : 1;
        sh.s = random_side(rng, dims, sh.w, sh.h);
        sh.t = random_side(rng, dims, sh.w, sh.h);
        return sh;
    }

    static size_t side_bytes(const xmc_copy_side &s, const Shape &sh) { return (s.z + sh.d) * s.slice_pitch; }

    static size_t offset(const xmc_copy_side &s, size_t x, size_t y, size_t z) {
        return (s.z + z) * s.slice_pitch + (s.y + y) * s.pitch + s.x_bytes + x;
    }

    static std::string show(const Shape &sh) {
        char b[256];
        std::snprintf(b, sizeof b,
                      "extent %zux%zux%zu, src x%zu y%zu z%zu pitch %zu slice %zu, "
                      "dst x%zu y%zu z%zu pitch %zu slice %zu",
                      sh.w, sh.h, sh.d, sh.s.x_bytes, sh.s.y, sh.s.z, sh.s.pitch, sh.s.slice_pitch, sh.t.x_bytes,
                      sh.t.y, sh.t.z, sh.t.pitch, sh.t.slice_pitch);
        return b;
    }

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
                for (int c = 0; c < cases && !HasFatalFailure(); ++c)
                    check(random_shape(rng, dims), sk, dk, 0, stream_, rng);
    }
};

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

// COPY-ORDER: streams, events and host callbacks.
class CopyOrder : public CopyTest {};

// One pinned buffer shared by copies on two streams, ordered by an event. The
// copy that must come first is held back twice: a sleeping host callback in
// front of it on its stream, and, over a fake driver, the copy itself delayed
// on the device (exec_delay of the next copy the driver is given). A wait that
// did not hold the second stream lets its copy touch the buffer meanwhile.
class CopyReuse : public CopyOrder {
protected:
    static constexpr size_t kBytes = 1 << 20;
    std::vector<char> pattern(int seed) {
        std::vector<char> v(kBytes);
        for (size_t i = 0; i < kBytes; ++i) v[i] = static_cast<char>(seed + (i * 131 + i / 4096) % 251);
        return v;
    }
    void hold_back(xmc_stream *s) {
        XMC_ASSERT_STATUS(XMC_OK, api->host_callback(inst, s, [](void *) {
            std::this_thread::sleep_for(std::chrono::milliseconds(120));
        }, nullptr));
        if (const DriverControl *c = driver_control(api, nullptr); c && c->delay_next_copy) {
            ASSERT_EQ(c->set_faults(c->delay_next_copy), 0) << c->delay_next_copy;
        }
    }
    void TearDown() override {
        if (const DriverControl *c = driver_control(api, nullptr)) c->set_faults("");
        CopyOrder::TearDown();
    }
};

} // namespace xmc::conformance
