// COPY-*: strided copies and stream order (SPEC 5). Every test body of a COPY
// requirement, run on every selected backend: the fixed and random copies,
// the hostile inputs (HostileCopyTest, HostileStreamTest) and the fault sweeps.
// Expected contents are computed from the descriptor alone, never taken from
// the backend (CopyStrided compares every byte of the destination, guard bytes
// included). The fixtures are in the harness (copy_env.hpp, hostile.hpp,
// fault_sweep.hpp).
#include "boundary.hpp"
#include "copy_env.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "os_facts.hpp"

#include <sys/mman.h>

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

// ---- COPY-STRIDED at the boundary classes ------------------------------------

// A side's geometry for a boundary class (boundary.hpp), against the
// allocation(s) it lies in: its nominal box (ptr to ptr + slice_pitch *
// (z + depth)) inside the allocation, ending exactly at its end, one byte past
// it, a page past it (the pitches' padding reaching memory no allocation
// owns; the described bytes stay inside), its rows in two touching
// allocations or in two across a gap (the padding spanning the boundary), or
// of zero width.
struct BoundaryCopy {
    size_t ptr_off = 0;  // from the first allocation's start
    xmc_copy_side side{};
    size_t w = 40, h = 3, d = 2;
    size_t alloc = 0, gap = 0;  // each allocation's size; the gap between two (spans only)
    bool two = false;
};

BoundaryCopy boundary_copy(Boundary c) {
    BoundaryCopy b;
    const size_t pg = page_size(), x = 3, y = 1;
    b.side.x_bytes = x;
    b.side.y = y;
    b.alloc = 3 * pg;
    auto box = [&] { return b.side.slice_pitch * (b.side.z + b.d); };
    // The offset that puts the last described byte on the allocation's last byte.
    auto last_at_end = [&] {
        return b.alloc - 1 - ((b.d - 1) * b.side.slice_pitch + (y + b.h - 1) * b.side.pitch + x + b.w - 1);
    };
    switch (c) {
    case Boundary::Inside:
        b.side.pitch = 64;
        b.side.slice_pitch = 64 * (y + b.h);
        b.ptr_off = 100;
        break;
    case Boundary::EndsAtEnd:  // no padding: the box ends with the last described byte
        b.side.pitch = x + b.w;
        b.side.slice_pitch = b.side.pitch * (y + b.h);
        b.ptr_off = b.alloc - box();
        break;
    case Boundary::OnePastEnd:  // a byte of padding per row: the box ends one byte past
        b.side.pitch = x + b.w + 1;
        b.side.slice_pitch = b.side.pitch * (y + b.h);
        b.ptr_off = last_at_end();
        break;
    case Boundary::IntoUnowned:  // a page of padding per slice: the box ends a page past
        b.side.pitch = x + b.w + 1;
        b.side.slice_pitch = b.side.pitch * (y + b.h) + pg;
        b.ptr_off = last_at_end();
        break;
    case Boundary::SpansAdjacent:
    case Boundary::SpansGap:  // two rows, the first in one allocation, the second in the next
        b.two = true;
        b.alloc = pg;
        b.gap = c == Boundary::SpansGap ? pg : 0;
        b.side.y = 0;
        b.h = 2;
        b.d = 1;
        b.side.pitch = b.alloc + b.gap;
        b.side.slice_pitch = 2 * b.side.pitch;
        b.ptr_off = b.alloc - 64;
        break;
    case Boundary::ZeroLength:
        b.side.pitch = 64;
        b.side.slice_pitch = 64 * (y + b.h);
        b.ptr_off = 100;
        b.w = 0;
        break;
    }
    return b;
}

TEST_P(CopyStrided, COPY_STRIDED_ExtentAtEveryBoundaryClassOfItsAllocations) {
    std::mt19937_64 rng(0x5eed2000u);
    const size_t pg = page_size();
    for (Boundary c : all_boundaries()) {
        for (xmc_mem_kind k : kinds()) {
            for (bool as_dst : {true, false}) {
                const BoundaryCopy g = boundary_copy(c);
                SCOPED_TRACE(std::string(boundary_name(c)) + ", " + kind_name(k) + " memory as the " +
                             (as_dst ? "destination" : "source"));
                // Two allocations the test places (touching or a gap apart) exist
                // for host memory (carved from one buffer) and registrations (two
                // in one mapping); pinned blocks and device memory go where the
                // backend puts them: one allocation, the single-block classes.
                if (g.two && k != XMC_MEM_HOST && k != XMC_MEM_REGISTERED) continue;
                // The region the allocation(s) lie in: all of it is compared.
                const size_t region = g.two ? 4 * (g.alloc + g.gap) : g.alloc;
                Buf a;
                std::vector<char> host_region;
                char *mapped = nullptr;
                if (g.two && k == XMC_MEM_HOST) {
                    host_region.assign(region, 0);
                    a.kind = k;
                    a.ptr = host_region.data();
                    a.bytes = region;
                } else if (g.two) {
                    void *p = mmap(nullptr, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                    ASSERT_NE(p, MAP_FAILED);
                    mapped = static_cast<char *>(p);
                    xmc_reg_info info{};
                    XMC_ASSERT_STATUS(XMC_OK, api->reg_register(inst, mapped, g.alloc, 0, 0, &info));
                    XMC_ASSERT_STATUS(XMC_OK, api->reg_register(inst, mapped + g.alloc + g.gap, g.alloc, 0, 0, &info));
                    a.kind = k;
                    a.ptr = mapped;
                    a.bytes = region;
                } else {
                    a = make(k, region);
                    ASSERT_NE(a.ptr, nullptr);
                }
                // The other side: host memory of the same geometry.
                const size_t other_bytes = g.ptr_off + g.side.slice_pitch * (g.side.z + g.d) + pg;
                std::vector<char> other(other_bytes);
                std::vector<char> image(region);
                for (auto &b : image) b = static_cast<char>(1 + rng() % 255);
                for (auto &b : other) b = static_cast<char>(1 + rng() % 255);
                const std::vector<char> region_before = image, other_before = other;
                if (k == XMC_MEM_DEVICE) put(a, image);
                else std::memcpy(a.ptr, image.data(), region);
                xmc_copy_desc desc{};
                xmc_copy_side mine = g.side, theirs = g.side;
                mine.ptr = a.ptr + g.ptr_off;
                mine.kind = k;
                theirs.ptr = other.data() + g.ptr_off;
                theirs.kind = XMC_MEM_HOST;
                desc.src = as_dst ? theirs : mine;
                desc.dst = as_dst ? mine : theirs;
                desc.width_bytes = g.w;
                desc.height = g.h;
                desc.depth = g.d;
                const xmc_status st = api->copy(inst, &desc, stream_);
                XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
                std::vector<char> want_region = region_before, want_other = other_before;
                // Rows in two registrations: a driver may want a copy's rows in one
                // (the fake Level Zero refuses the region, ZE_RESULT_ERROR_INVALID_ARGUMENT):
                // exact, or refused with its detail and nothing written.
                const bool may_refuse = g.two && k == XMC_MEM_REGISTERED && st != XMC_OK;
                if (c == Boundary::ZeroLength) {
                    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, st, "copy") << "a copy of zero width";
                } else if (may_refuse) {
                    EXPECT_TRUE(refused(st, st, "copy")) << "rows in two registrations, refused";
                } else {
                    XMC_EXPECT_STATUS(XMC_OK, st) << "a valid copy whose described bytes lie in its allocations";
                    for (size_t zz = 0; zz < g.d; ++zz)
                        for (size_t yy = 0; yy < g.h; ++yy)
                            for (size_t xx = 0; xx < g.w; ++xx) {
                                const size_t at = g.ptr_off + (g.side.z + zz) * g.side.slice_pitch +
                                                  (g.side.y + yy) * g.side.pitch + g.side.x_bytes + xx;
                                if (as_dst) want_region[at] = other_before[at];
                                else want_other[at] = region_before[at];
                            }
                }
                std::vector<char> got(region);
                if (k == XMC_MEM_DEVICE) got = get(a);
                else std::memcpy(got.data(), a.ptr, region);
                size_t wrong = 0, first = 0;
                for (size_t i = 0; i < region; ++i)
                    if (got[i] != want_region[i] && wrong++ == 0) first = i;
                EXPECT_EQ(wrong, 0u) << wrong << " byte(s) of the allocation region differ, the first at offset "
                                     << first << (as_dst ? "" : " (the copy wrote its source)");
                EXPECT_TRUE(other == want_other) << "the host side differs from the described bytes";
                if (mapped) {
                    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, mapped));
                    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, mapped + g.alloc + g.gap));
                    munmap(mapped, region);
                } else if (!g.two) {
                    release(a);
                    bufs_.pop_back();
                }
            }
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

TEST_P(HostileCopyTest, COPY_STRIDED_HostileDescriptorsRefusedNothingWritten) {
    constexpr size_t kN = 4096;
    std::vector<char> src(kN, 'S'), dst(kN, 'D');
    const std::vector<char> dst_before = dst;
    auto side = [](void *p) {
        xmc_copy_side s{};
        s.ptr = p;
        s.kind = XMC_MEM_HOST;
        s.pitch = 64;
        s.slice_pitch = 64 * 8;
        return s;
    };
    const xmc_copy_desc good{side(src.data()), side(dst.data()), 64, 8, 1};
    struct Case { const char *what; xmc_status want; std::function<void(xmc_copy_desc &)> edit; };
    const Case cases[] = {
        {"width 0", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.width_bytes = 0; }},
        {"height 0", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.height = 0; }},
        {"depth 0", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.depth = 0; }},
        {"NULL source", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.src.ptr = nullptr; }},
        {"NULL destination", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.dst.ptr = nullptr; }},
        {"memory kind 77", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { const int k = 77; std::memcpy(&d.dst.kind, &k, sizeof k); }},
        {"memory kind -1", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { const int k = -1; std::memcpy(&d.src.kind, &k, sizeof k); }},
        {"device memory of no device", XMC_ERR_NO_DEVICE,
         [](xmc_copy_desc &d) { d.dst.kind = XMC_MEM_DEVICE; d.dst.device = kBadDevice; }},
        {"device memory of device -1", XMC_ERR_NO_DEVICE,
         [](xmc_copy_desc &d) { d.src.kind = XMC_MEM_DEVICE; d.src.device = -1; }},
        {"pitch below width", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.dst.pitch = 63; }},
        {"pitch below x_bytes + width", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.src.x_bytes = 1; }},
        {"slice pitch below pitch * rows", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.dst.y = 1; }},
        {"x_bytes + width overflows", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { d.src.x_bytes = SIZE_MAX - 10; }},
        {"pitch * rows overflows", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { d.height = SIZE_MAX / 32; d.src.slice_pitch = d.dst.slice_pitch = SIZE_MAX; }},
        {"slices overflow the address space", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { d.depth = SIZE_MAX / 256; }},
        {"extent wraps the address space", XMC_ERR_INVALID_ARGUMENT,
         [](xmc_copy_desc &d) { d.dst.ptr = never_issued<void>(UINTPTR_MAX - 100); }},
        {"width SIZE_MAX", XMC_ERR_INVALID_ARGUMENT, [](xmc_copy_desc &d) { d.width_bytes = SIZE_MAX; }},
        {"overlapping sides", XMC_ERR_INVALID_ARGUMENT,
         [&](xmc_copy_desc &d) { d.src.ptr = static_cast<char *>(d.dst.ptr) + 1; }},
    };
    for (const Case &c : cases) {
        xmc_copy_desc d = good;
        c.edit(d);
        XMC_EXPECT_REFUSED(c.want, api->copy(inst, &d, stream_), "copy") << c.what;
    }
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->copy(inst, nullptr, stream_), "copy") << "NULL descriptor";
    xmc_stream *gone = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &gone));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_destroy(inst, gone));
    for (xmc_stream *s : {static_cast<xmc_stream *>(nullptr), gone, never_issued<xmc_stream>(0x3000)})
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->copy(inst, &good, s), "copy") << "stream " << s;
    expect_dead_instances_refused("copy", [&](xmc_instance *i) { return api->copy(i, &good, stream_); });
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_TRUE(dst == dst_before) << "a refused copy wrote the destination";
    // The good descriptor still copies.
    XMC_EXPECT_STATUS(XMC_OK, api->copy(inst, &good, stream_));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, stream_));
    EXPECT_EQ(dst[0], 'S');
}

// A buffer of the copy scenario and the model of its bytes (-1: unknown).
struct CopyBuf {
    xmc_mem_kind kind = XMC_MEM_HOST;
    char *ptr = nullptr;
    size_t bytes = 0;
    std::vector<int> model;
    std::vector<char> host;  // backing of a HOST buffer
};

// The bytes a copy writes, applied to the models (xmc/backend.h's formula).
void model_copy(const xmc_copy_desc &c, const CopyBuf &src, CopyBuf &dst) {
    const size_t so = static_cast<size_t>(static_cast<char *>(c.src.ptr) - src.ptr);
    const size_t to = static_cast<size_t>(static_cast<char *>(c.dst.ptr) - dst.ptr);
    for (size_t z = 0; z < c.depth; ++z)
        for (size_t y = 0; y < c.height; ++y)
            for (size_t x = 0; x < c.width_bytes; ++x)
                dst.model[to + (c.dst.z + z) * c.dst.slice_pitch + (c.dst.y + y) * c.dst.pitch + c.dst.x_bytes + x] =
                    src.model[so + (c.src.z + z) * c.src.slice_pitch + (c.src.y + y) * c.src.pitch + c.src.x_bytes + x];
}

xmc_copy_desc desc(const CopyBuf &src, size_t soff, xmc_copy_side s, const CopyBuf &dst, size_t doff,
                   xmc_copy_side t, size_t w, size_t h, size_t d) {
    s.ptr = src.ptr + soff;
    s.kind = src.kind;
    s.device = 0;
    t.ptr = dst.ptr + doff;
    t.kind = dst.kind;
    t.device = 0;
    return xmc_copy_desc{s, t, w, h, d};
}

// Stream, device memory, 1-D, 2-D and 3-D copies between pinned, registered
// and device memory, synchronize, free, destroy (COPY-STRIDED).
void copy_scenario(Run &r) {
    const SweepEnv &env = r.env();
    if (!r.inst) return;
    constexpr size_t kBytes = 16384;
    const xmc_backend *api = r.api;
    // Setup (not swept: the pinning and registration sweeps cover these calls).
    // Without `pin` or `register`, host memory stands in.
    r.step("setup");
    CopyBuf P, Q, R, D;
    for (CopyBuf *b : {&P, &Q}) {
        b->bytes = kBytes;
        if (env.has(XMC_CAP_PIN)) {
            xmc_pin_result res{};
            const int32_t with = env.has(XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
            r.must_succeed(api->pin_alloc(r.inst, kBytes, 64, with, &res), "pin_alloc", "setup");
            b->kind = XMC_MEM_PINNED;
            b->ptr = static_cast<char *>(res.base);
        }
    }
    R.bytes = kBytes;
    const size_t r_pages = (kBytes + page_size() - 1) / page_size();  // registered: whole pages of the arena
    if (env.has(XMC_CAP_REGISTER)) {
        xmc_reg_info info{};
        r.must_succeed(api->reg_register(r.inst, env.page(0), r_pages * page_size(), 0, 0, &info), "reg_register",
                       "setup");
        R.kind = XMC_MEM_REGISTERED;
        R.ptr = env.page(0);
    }
    for (CopyBuf *b : {&P, &Q, &R}) {
        if (!b->ptr) {
            b->host.assign(kBytes, 0);
            b->ptr = b->host.data();
        }
        b->model.resize(kBytes);
    }
    for (size_t i = 0; i < kBytes; ++i) {
        P.ptr[i] = static_cast<char>(1 + (i * 131) % 251);
        Q.ptr[i] = static_cast<char>(0xA5 ^ (i * 7));
        R.ptr[i] = static_cast<char>(0x5A ^ (i * 11));
    }
    for (CopyBuf *b : {&P, &Q, &R})
        for (size_t i = 0; i < kBytes; ++i) b->model[i] = static_cast<unsigned char>(b->ptr[i]);
    D.kind = XMC_MEM_DEVICE;
    D.bytes = kBytes;
    D.model.assign(kBytes, -1);

    xmc_stream *s = nullptr;
    r.step("stream_create");
    bool good = r.ok(api->stream_create(r.inst, 0, &s), "stream_create");
    void *dptr = nullptr;
    if (good) {
        r.step("dev_alloc");
        good = r.ok(api->dev_alloc(r.inst, 0, kBytes, &dptr), "dev_alloc");
        D.ptr = static_cast<char *>(dptr);
    }
    // The copies, in order on one stream. Shapes: {x, y, z, pitch, slice}.
    struct Copy {
        const char *step;
        CopyBuf *src;
        size_t soff;
        xmc_copy_side s;
        CopyBuf *dst;
        size_t doff;
        xmc_copy_side t;
        size_t w, h, d;
    };
    const Copy copies[] = {
        {"copy 1-D pinned->device", &P, 0, {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, kBytes, kBytes}, &D, 0,
         {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, kBytes, kBytes}, kBytes, 1, 1},
        {"copy 1-D device->device", &D, 0, {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, 2048, 2048}, &D, 8192,
         {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, 2048, 2048}, 2048, 1, 1},
        {"copy 2-D device->registered", &D, 0, {nullptr, XMC_MEM_HOST, 0, 3, 2, 0, 160, 160 * 9}, &R, 0,
         {nullptr, XMC_MEM_HOST, 0, 5, 1, 0, 256, 256 * 8}, 100, 7, 1},
        {"copy 3-D registered->pinned", &R, 0, {nullptr, XMC_MEM_HOST, 0, 10, 1, 0, 256, 256 * 8}, &Q, 0,
         {nullptr, XMC_MEM_HOST, 0, 2, 0, 1, 64, 64 * 5}, 50, 3, 4},
        // Slice pitches that are not multiples of the pitches (CUDA: one 2-D copy per slice).
        {"copy 3-D device->pinned, uneven slices", &D, 8192, {nullptr, XMC_MEM_HOST, 0, 1, 0, 0, 40, 40 * 2 + 7}, &Q,
         4096, {nullptr, XMC_MEM_HOST, 0, 0, 1, 0, 32, 32 * 3 + 5}, 20, 2, 3},
    };
    for (const Copy &c : copies) {
        if (!good) break;
        r.step(c.step);
        const xmc_copy_desc d = desc(*c.src, c.soff, c.s, *c.dst, c.doff, c.t, c.w, c.h, c.d);
        good = r.ok(api->copy(r.inst, &d, s), "copy");
        if (good) model_copy(d, *c.src, *c.dst);
    }
    if (s) {
        // Also after a failed copy: the copies queued before it must end
        // before their memory is freed.
        r.step("stream_synchronize");
        if (!r.ok(api->stream_synchronize(r.inst, s), "stream_synchronize")) {
            good = false;
            r.must_succeed(api->stream_synchronize(r.inst, s), "stream_synchronize", "the retry after a failed wait");
        }
    }
    if (good) {
        // COPY-STRIDED: exactly the described bytes, nothing else; the source untouched.
        for (const CopyBuf *b : {&P, &Q, &R}) {
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < kBytes; ++i)
                if (b->model[i] >= 0 && static_cast<unsigned char>(b->ptr[i]) != b->model[i] && wrong++ == 0) first = i;
            r.check(wrong == 0, std::to_string(wrong) + " byte(s) of a " +
                                    (b == &P ? "source" : "destination") + " buffer are wrong after the copies, " +
                                    "the first at offset " + std::to_string(first));
        }
    }
    if (dptr) {
        r.step("dev_free");
        if (!r.ok(api->dev_free(r.inst, dptr), "dev_free"))
            r.must_succeed(api->dev_free(r.inst, dptr), "dev_free", "the retry after a failed free");
    }
    if (s) {
        r.step("stream_destroy");
        if (!r.ok(api->stream_destroy(r.inst, s), "stream_destroy")) {
            // Either the stream is still there and the retry destroys it, or
            // the backend already let it go (the ledger check sees a leak).
            const xmc_status again = api->stream_destroy(r.inst, s);
            if (again != XMC_ERR_INVALID_HANDLE) r.must_succeed(again, "stream_destroy", "the retry after a failed destroy");
        }
    }
    r.step("teardown");
    if (R.kind == XMC_MEM_REGISTERED) r.must_succeed(api->reg_unregister(r.inst, R.ptr), "reg_unregister", "teardown");
    for (CopyBuf *b : {&P, &Q})
        if (b->kind == XMC_MEM_PINNED) r.must_succeed(api->pin_free(r.inst, b->ptr), "pin_free", "teardown");
    r.close();
}
const Scenario kCopy{"copy", copy_scenario};

TEST_P(FaultSweep, COPY_STRIDED_FaultSweepOfStreamsAndCopiesLeavesNothing) {
    sweep(kCopy, {"stream_create", "dev_alloc", "copy", "stream_synchronize", "dev_free", "stream_destroy"});
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

void count_call(void *user) { ++*static_cast<int *>(user); }

TEST_P(HostileStreamTest, COPY_ORDER_HostileStreamAndEventHandlesRefused) {
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->stream_create(inst, 0, nullptr), "stream_create");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->event_create(inst, 0, nullptr), "event_create");
    for (int32_t dev : {kBadDevice, -1}) {
        xmc_stream *s = nullptr;
        xmc_event *e = nullptr;
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->stream_create(inst, dev, &s), "stream_create") << dev;
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->event_create(inst, dev, &e), "event_create") << dev;
        EXPECT_EQ(s, nullptr);
        EXPECT_EQ(e, nullptr);
    }

    xmc_stream *live = nullptr, *gone = nullptr;
    xmc_event *live_e = nullptr, *gone_e = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &live));
    XMC_ASSERT_STATUS(XMC_OK, api->event_create(inst, 0, &live_e));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &gone));
    XMC_ASSERT_STATUS(XMC_OK, api->event_create(inst, 0, &gone_e));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_destroy(inst, gone));
    XMC_ASSERT_STATUS(XMC_OK, api->event_destroy(inst, gone_e));
    // Handles of another instance, and of an instance closed since.
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    xmc_stream *foreign = nullptr;
    xmc_event *foreign_e = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(other, 0, &foreign));
    XMC_ASSERT_STATUS(XMC_OK, api->event_create(other, 0, &foreign_e));
    xmc_stream *orphan = nullptr;
    xmc_event *orphan_e = nullptr;
    {
        xmc_instance *doomed = nullptr;
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &doomed));
        XMC_ASSERT_STATUS(XMC_OK, api->stream_create(doomed, 0, &orphan));
        XMC_ASSERT_STATUS(XMC_OK, api->event_create(doomed, 0, &orphan_e));
        XMC_ASSERT_STATUS(XMC_OK, api->close(doomed));
    }

    const std::pair<const char *, xmc_stream *> bad_streams[] = {
        {"NULL", nullptr}, {"never issued", never_issued<xmc_stream>(0x1000)}, {"destroyed", gone},
        {"of another instance", foreign}, {"of a closed instance", orphan},
    };
    const std::pair<const char *, xmc_event *> bad_events[] = {
        {"NULL", nullptr}, {"never issued", never_issued<xmc_event>(0x2000)}, {"destroyed", gone_e},
        {"of another instance", foreign_e}, {"of a closed instance", orphan_e},
    };
    int calls = 0;
    for (const auto &[what, s] : bad_streams) {
        SCOPED_TRACE(std::string("stream ") + what);
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_synchronize(inst, s), "stream_synchronize");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_record(inst, live_e, s), "event_record");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_wait_event(inst, s, live_e), "stream_wait_event");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->host_callback(inst, s, count_call, &calls), "host_callback");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_destroy(inst, s), "stream_destroy");
    }
    for (const auto &[what, e] : bad_events) {
        SCOPED_TRACE(std::string("event ") + what);
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_record(inst, e, live), "event_record");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_synchronize(inst, e), "event_synchronize");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->stream_wait_event(inst, live, e), "stream_wait_event");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->event_destroy(inst, e), "event_destroy");
    }
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->host_callback(inst, live, nullptr, nullptr), "host_callback");
    // Nothing was enqueued by the refusals; the live handles still work.
    XMC_EXPECT_STATUS(XMC_OK, api->stream_synchronize(inst, live));
    EXPECT_EQ(calls, 0) << "a refused host_callback ran";
    XMC_EXPECT_STATUS(XMC_OK, api->host_callback(inst, live, count_call, &calls));
    XMC_EXPECT_STATUS(XMC_OK, api->event_record(inst, live_e, live));
    XMC_EXPECT_STATUS(XMC_OK, api->event_synchronize(inst, live_e));
    XMC_EXPECT_STATUS(XMC_OK, api->stream_synchronize(inst, live));
    EXPECT_EQ(calls, 1);
    // The other instance's handles are still its own.
    XMC_EXPECT_STATUS(XMC_OK, api->stream_synchronize(other, foreign));

    expect_dead_instances_refused("stream_create", [&](xmc_instance *i) {
        xmc_stream *s = nullptr;
        return api->stream_create(i, 0, &s);
    });
    expect_dead_instances_refused("event_create", [&](xmc_instance *i) {
        xmc_event *e = nullptr;
        return api->event_create(i, 0, &e);
    });
    expect_dead_instances_refused("stream_synchronize", [&](xmc_instance *i) { return api->stream_synchronize(i, live); });
    expect_dead_instances_refused("event_synchronize", [&](xmc_instance *i) { return api->event_synchronize(i, live_e); });
    expect_dead_instances_refused("event_record", [&](xmc_instance *i) { return api->event_record(i, live_e, live); });
    expect_dead_instances_refused("stream_wait_event", [&](xmc_instance *i) { return api->stream_wait_event(i, live, live_e); });
    expect_dead_instances_refused("host_callback", [&](xmc_instance *i) { return api->host_callback(i, live, count_call, &calls); });
    expect_dead_instances_refused("stream_destroy", [&](xmc_instance *i) { return api->stream_destroy(i, live); });
    expect_dead_instances_refused("event_destroy", [&](xmc_instance *i) { return api->event_destroy(i, live_e); });
    XMC_EXPECT_STATUS(XMC_OK, api->stream_synchronize(inst, live));
    EXPECT_EQ(calls, 1) << "a host_callback through a dead instance ran";

    XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(other, foreign));
    XMC_EXPECT_STATUS(XMC_OK, api->event_destroy(other, foreign_e));
    XMC_EXPECT_STATUS(XMC_OK, api->event_destroy(inst, live_e));
    XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(inst, live));
}

TEST_P(HostileStreamTest, COPY_ORDER_HostileDeviceAllocationsRefused) {
    void *p = nullptr;
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_alloc(inst, 0, 4096, nullptr), "dev_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_alloc(inst, 0, 0, &p), "dev_alloc");
    EXPECT_EQ(p, nullptr);
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->dev_alloc(inst, kBadDevice, 4096, &p), "dev_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->dev_alloc(inst, -1, 4096, &p), "dev_alloc");
    EXPECT_EQ(p, nullptr);
    XMC_EXPECT_REFUSED(XMC_ERR_OUT_OF_MEMORY, api->dev_alloc(inst, 0, SIZE_MAX, &p), "dev_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_OUT_OF_MEMORY, api->dev_alloc(inst, 0, size_t{1} << 50, &p), "dev_alloc");
    EXPECT_EQ(p, nullptr);

    XMC_ASSERT_STATUS(XMC_OK, api->dev_alloc(inst, 0, 4096, &p));
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    char local = 0;
    const std::pair<const char *, void *> bad[] = {
        {"NULL", nullptr}, {"a stack address", &local}, {"interior", static_cast<char *>(p) + 1},
    };
    for (const auto &[what, addr] : bad)
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_free(inst, addr), "dev_free") << what;
    // Another instance's allocation is not its own.
    EXPECT_EQ(api->dev_free(other, p), XMC_ERR_INVALID_ARGUMENT) << "dev_free of another instance's allocation";
    expect_dead_instances_refused("dev_alloc", [&](xmc_instance *i) {
        void *q = nullptr;
        return api->dev_alloc(i, 0, 4096, &q);
    });
    expect_dead_instances_refused("dev_free", [&](xmc_instance *i) { return api->dev_free(i, p); });
    XMC_EXPECT_STATUS(XMC_OK, api->dev_free(inst, p));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->dev_free(inst, p), "dev_free") << "second free";
}

// A full open to close: streams on every device, device memory, an event
// recorded, waited for by another stream and synchronised; then close with
// all of them alive, so close must release them (COPY-ORDER's objects).
void open_close_scenario(Run &r) {
    const SweepEnv &env = r.env();
    if (!r.inst) return;
    const xmc_backend *api = r.api;
    std::vector<xmc_stream *> streams;
    r.step("stream_create");
    bool good = true;
    for (int32_t d = 0; good && d <= env.devices; ++d) {  // one per device, and a second one on device 0
        xmc_stream *s = nullptr;
        good = r.ok(api->stream_create(r.inst, d < env.devices ? d : 0, &s), "stream_create");
        if (good) streams.push_back(s);
    }
    r.step("dev_alloc");
    for (int32_t d = 0; good && d < env.devices; ++d) {
        void *p = nullptr;
        good = r.ok(api->dev_alloc(r.inst, d, 4096, &p), "dev_alloc");
    }
    xmc_event *e = nullptr;
    if (good) {
        r.step("event_create");
        good = r.ok(api->event_create(r.inst, 0, &e), "event_create");
    }
    if (good) {
        r.step("event_record");
        good = r.ok(api->event_record(r.inst, e, streams.front()), "event_record");
    }
    if (good) {
        r.step("stream_wait_event");
        good = r.ok(api->stream_wait_event(r.inst, streams.back(), e), "stream_wait_event");
    }
    if (good) {
        r.step("event_synchronize");
        good = r.ok(api->event_synchronize(r.inst, e), "event_synchronize");
    }
    r.close();  // with the streams, the event and the device memory alive
}
const Scenario kOpenClose{"open-close", open_close_scenario};

TEST_P(FaultSweep, COPY_ORDER_FaultSweepOpenToCloseLeavesNothing) {
    sweep(kOpenClose, {"open", "event_create", "event_record", "stream_wait_event", "event_synchronize", "close"});
}

// ---- COPY-REUSE (0.2) -------------------------------------------------------

// The fixture (CopyReuse) is in copy_env.hpp.

// Stream A writes the pinned buffer (device -> pinned) and records; stream B
// waits and reads it (pinned -> device): B reads what A wrote, all of it.
TEST_P(CopyReuse, COPY_REUSE_ReaderWaitsForTheCopyThatFillsThePinnedBuffer) {
    xmc_stream *a = stream_, *b = new_stream(0);
    xmc_event *filled = new_event(0);
    ASSERT_TRUE(b && filled);
    const std::vector<char> want = pattern(3);
    Buf src = make(XMC_MEM_DEVICE, kBytes), pinned = make(XMC_MEM_PINNED, kBytes), dst = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(src.ptr && pinned.ptr && dst.ptr);
    put(src, want);
    put(dst, std::vector<char>(kBytes, 0));
    std::memset(pinned.ptr, 0x7e, kBytes);
    hold_back(a);
    auto fill = linear(src.ptr, XMC_MEM_DEVICE, 0, pinned.ptr, XMC_MEM_PINNED, 0, kBytes);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &fill, a));
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, filled, a));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, b, filled));
    auto drain = linear(pinned.ptr, XMC_MEM_PINNED, 0, dst.ptr, XMC_MEM_DEVICE, 0, kBytes);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &drain, b));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, b));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, a));
    EXPECT_TRUE(get(dst) == want) << "stream B read the pinned buffer before stream A's copy into it had finished";
}

// The reverse order: stream B reads the pinned buffer and records; stream A
// waits for that event and only then overwrites the buffer: B's destination is
// what the buffer held before, bit for bit.
TEST_P(CopyReuse, COPY_REUSE_WriterWaitsForTheCopyThatReadsThePinnedBuffer) {
    xmc_stream *a = stream_, *b = new_stream(0);
    xmc_event *read = new_event(0);
    ASSERT_TRUE(b && read);
    const std::vector<char> first = pattern(5), second = pattern(9);
    Buf pinned = make(XMC_MEM_PINNED, kBytes), dst = make(XMC_MEM_DEVICE, kBytes), next = make(XMC_MEM_DEVICE, kBytes);
    ASSERT_TRUE(pinned.ptr && dst.ptr && next.ptr);
    std::memcpy(pinned.ptr, first.data(), kBytes);
    put(dst, std::vector<char>(kBytes, 0));
    put(next, second);
    hold_back(b);
    auto drain = linear(pinned.ptr, XMC_MEM_PINNED, 0, dst.ptr, XMC_MEM_DEVICE, 0, kBytes);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &drain, b));
    XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, read, b));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, a, read));
    auto refill = linear(next.ptr, XMC_MEM_DEVICE, 0, pinned.ptr, XMC_MEM_PINNED, 0, kBytes);
    XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &refill, a));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, a));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, b));
    EXPECT_TRUE(get(dst) == first) << "stream A overwrote the pinned buffer while stream B's copy was still reading it";
    EXPECT_EQ(std::memcmp(pinned.ptr, second.data(), kBytes), 0) << "stream A's copy into the pinned buffer is missing";
}

// The buffer handed back and forth: each round A fills it, B drains it, A
// waits for B before the next fill. Every round's data arrives whole.
TEST_P(CopyReuse, COPY_REUSE_BufferHandedBackAndForthKeepsEveryRound) {
    constexpr int kRounds = 4;
    xmc_stream *a = stream_, *b = new_stream(0);
    xmc_event *filled = new_event(0), *drained = new_event(0);
    ASSERT_TRUE(b && filled && drained);
    Buf pinned = make(XMC_MEM_PINNED, kBytes);
    std::vector<Buf> src, dst;
    std::vector<std::vector<char>> want;
    for (int r = 0; r < kRounds; ++r) {
        want.push_back(pattern(11 + 7 * r));
        src.push_back(make(XMC_MEM_DEVICE, kBytes));
        dst.push_back(make(XMC_MEM_DEVICE, kBytes));
        ASSERT_TRUE(src.back().ptr && dst.back().ptr);
        put(src.back(), want.back());
    }
    ASSERT_NE(pinned.ptr, nullptr);
    for (int r = 0; r < kRounds; ++r) {
        if (r > 0) { XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, a, drained)); }
        auto fill = linear(src[r].ptr, XMC_MEM_DEVICE, 0, pinned.ptr, XMC_MEM_PINNED, 0, kBytes);
        XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &fill, a));
        XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, filled, a));
        XMC_ASSERT_STATUS(XMC_OK, api->stream_wait_event(inst, b, filled));
        hold_back(b);  // the drain is slow: the next fill must wait for it
        auto drain = linear(pinned.ptr, XMC_MEM_PINNED, 0, dst[r].ptr, XMC_MEM_DEVICE, 0, kBytes);
        XMC_ASSERT_STATUS(XMC_OK, api->copy(inst, &drain, b));
        XMC_ASSERT_STATUS(XMC_OK, api->event_record(inst, drained, b));
    }
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, a));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_synchronize(inst, b));
    for (int r = 0; r < kRounds; ++r)
        EXPECT_TRUE(get(dst[r]) == want[r]) << "round " << r << ": the pinned buffer was overwritten or read early";
}

} // namespace
} // namespace xmc::conformance
