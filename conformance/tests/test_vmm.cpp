// VMM-*: fixed-address slots (SPEC 5). Every test body of a VMM requirement,
// run on every selected backend: the fixed tests, the hostile inputs
// (HostileVmmTest) and the stateful properties, whose oracle is the slot
// model (reference/model/slot_model.hpp). How slot bytes and memory facts
// are observed, and how gates hold a stream: vmm_env.hpp; the stateful
// commands: vmm_commands.hpp. Each requirement's property names its mix of
// commands and the refusals it draws.
#include "boundary.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "os_facts.hpp"
#include "slot_model.hpp"
#include "spin_barrier.hpp"
#include "vmm_commands.hpp"
#include "vmm_env.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xmc::conformance {
namespace {

using model::kNoTag;
using model::SlotModel;
using model::SlotState;
using model::Source;
using namespace std::chrono_literals;
using namespace vmm_commands;

// ---- VMM-CREATE -------------------------------------------------------------

TEST_P(VmmTest, VMM_CREATE_RoundsUpToGranularityMapsAndGrantsAccess) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    xmc_slot_info one{};
    ASSERT_NE(v.create(1, &one), nullptr);
    const size_t g = one.size;  // the granularity: what one byte rounds up to
    ASSERT_GT(g, 0u);
    EXPECT_NE(one.address, nullptr);
    EXPECT_EQ(one.device, 0);
    EXPECT_EQ(v.free_memory(), free0 - g) << "create must take the slot's physical memory from the device";
    std::vector<std::pair<uintptr_t, size_t>> ranges = {{reinterpret_cast<uintptr_t>(one.address), g}};
    int tag = 11;
    for (size_t n : {g - 1, g, g + 1, 2 * g + 7}) {
        xmc_slot_info info{};
        ASSERT_NE(v.create(n, &info), nullptr);
        EXPECT_EQ(info.size, (n + g - 1) / g * g) << "size " << n << " rounded to the granularity " << g;
        ASSERT_TRUE(v.write(info, ++tag)) << "access must be granted for writing";
        EXPECT_TRUE(holds(v.read(info), tag)) << "access must be granted for reading (size " << n << ")";
        for (auto [a, sz] : ranges) {
            const auto b = reinterpret_cast<uintptr_t>(info.address);
            EXPECT_TRUE(b + info.size <= a || a + sz <= b) << "slots overlap";
        }
        ranges.emplace_back(reinterpret_cast<uintptr_t>(info.address), info.size);
    }
    while (!v.slots.empty()) ASSERT_TRUE(v.ok(v.close(v.slots.back())));
    EXPECT_EQ(v.free_memory(), free0) << "closing every slot must give all their memory back";
}

TEST_P(VmmTest, VMM_CREATE_RefusesZeroBytesUnknownDeviceAndNullResult) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    xmc_slot *s = nullptr;
    xmc_slot_info info{};
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_create(v.inst, 0, 0, &s, &info), "slot_create"));
    EXPECT_TRUE(v.refused(XMC_ERR_NO_DEVICE, api->slot_create(v.inst, 99, 4096, &s, &info), "slot_create"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_create(v.inst, 0, 4096, nullptr, &info), "slot_create"));
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(v.free_memory(), free0) << "a refused create took device memory";
}

TEST_P(HostileVmmTest, VMM_CREATE_HostileSizesRefusedWithNothingChanged) {
    warm_up(api, inst);
    closed_instance();  // an instance opened and closed, as the dead-instance refusals below make them
    const uint64_t free_before = free_memory();
    xmc_slot *s = nullptr;
    xmc_slot_info info{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_create(inst, 0, 4096, nullptr, &info), "slot_create");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_create(inst, 0, 4096, &s, nullptr), "slot_create");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->slot_create(inst, kBadDevice, 4096, &s, &info), "slot_create");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->slot_create(inst, -1, 4096, &s, &info), "slot_create");
    // Sizes that are 0 or overflow when rounded up to any granularity of at least a page.
    for (size_t bytes : {size_t{0}, SIZE_MAX, SIZE_MAX - 4096 + 2})
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_create(inst, 0, bytes, &s, &info), "slot_create")
            << "size " << bytes;
    // Representable, but more than any device has.
    XMC_EXPECT_REFUSED(XMC_ERR_OUT_OF_MEMORY, api->slot_create(inst, 0, size_t{1} << 50, &s, &info), "slot_create");
    EXPECT_EQ(s, nullptr) << "a refused slot_create returned a slot";
    EXPECT_EQ(free_memory(), free_before) << "a refused slot_create changed the device's free memory";
    // device_free_memory itself.
    uint64_t f = 0, t = 0;
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_free_memory(inst, 0, nullptr, &t), "device_free_memory");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_free_memory(inst, 0, &f, nullptr), "device_free_memory");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_free_memory(inst, kBadDevice, &f, &t), "device_free_memory");
    expect_dead_instances_refused("slot_create", [&](xmc_instance *i) {
        xmc_slot *x = nullptr;
        xmc_slot_info xi{};
        return api->slot_create(i, 0, 4096, &x, &xi);
    });
    expect_dead_instances_refused("device_free_memory", [&](xmc_instance *i) {
        uint64_t a = 0, b = 0;
        return api->device_free_memory(i, 0, &a, &b);
    });
    EXPECT_EQ(free_memory(), free_before);
}

// ---- VMM-STABLE -------------------------------------------------------------

TEST_P(VmmTest, VMM_STABLE_AddressNeverMovesAcrossReleaseRemapAdopt) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(3 << 20);
    ASSERT_NE(s, nullptr);
    xmc_stream *a = v.stream(), *b = v.stream();
    for (int cycle = 0; cycle < 4; ++cycle) {
        const int tag = 100 + cycle;
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
        // Read at the address create returned: a mapping made anywhere else
        // would leave this range unmapped or holding old bytes.
        EXPECT_TRUE(holds(v.read(info), tag)) << "cycle " << cycle;
        v.free_source(src);
    }
}

TEST_P(VmmTest, VMM_STABLE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, Check, Release, Remap, ReleaseBatch, RemapBatch, Launch, Wait, Wait,
                 Adopt, Adopt, Destroy, Close, Query, CheckMemory>(0, GetParam(), "");
}

// ---- VMM-RELEASE-ORDER ------------------------------------------------------

TEST_P(VmmTest, VMM_RELEASE_ORDER_TakesEffectOnlyAfterPriorStreamWork) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 7));
    xmc_stream *a = v.stream();
    auto gate = v.gate(a);
    auto prior = v.read_async(info, a);  // prior work on the stream: it reads the slot
    const uint64_t free0 = v.free_memory();
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, a, &rel)));
    std::this_thread::sleep_for(kWatch);
    const xmc_request_info early = v.query(rel);
    const uint64_t free_early = v.free_memory();
    if (early.callback_fired || early.done || free_early != free0) {
        ADD_FAILURE() << "the release took effect before the stream's prior work ran (callback_fired "
                      << early.callback_fired << ", done " << early.done << ", free memory grew by "
                      << free_early - free0 << "); the queued read would now touch unmapped memory";
        return leak();
    }
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rel)));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, a)));
    EXPECT_TRUE(holds(prior->bytes(), 7)) << "the work enqueued before the release must see the slot mapped";
    EXPECT_EQ(v.free_memory(), free0 + info.size) << "a completed release returns the slot's physical memory";
}

TEST_P(VmmTest, VMM_RELEASE_ORDER_ReturnsThePhysicalMemory) {
    Env &v = e();
    auto [s1, i1] = v.mapped_slot(1);
    auto [s2, i2] = v.mapped_slot(3 << 20);
    ASSERT_TRUE(s1 && s2);
    const bool memfds = memfd_backed(i1.address, i1.size);  // the host and the fake back slots with memfds
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s1, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.free_memory(), free0 + i1.size) << "device free memory must grow by the slot's size";
    if (memfds) {
        EXPECT_FALSE(memfd_backed(i1.address, i1.size)) << "the released range is still backed by its memfd";
    }
    xmc_request *b = nullptr;
    xmc_request *again = nullptr;
    ASSERT_TRUE(v.ok(v.release(s2, v.io, &b)));
    ASSERT_TRUE(v.ok(v.wait(b)));
    EXPECT_EQ(v.free_memory(), free0 + i1.size + i2.size);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s1, v.io, &again), "slot_release"));
    EXPECT_EQ(v.free_memory(), free0 + i1.size + i2.size) << "a refused second release changed the accounting";
}

// ---- VMM-UNMAPPED-FAULTS ----------------------------------------------------

TEST_P(VmmTest, VMM_UNMAPPED_FAULTS_AccessWhileReleasedDiesBySignal) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 21));
    volatile char *p = static_cast<volatile char *>(info.address);
    const char first = pattern(21, 1)[0];
    // The control: is a mapped slot readable by the host at all (it is on
    // the host and the fakes; device memory of a real GPU is not)?
    const bool host_readable = WIFEXITED(in_child([&] { return p[0] == first ? 0 : 3; }));
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    for (size_t off : {size_t{0}, info.size / 2, info.size - 1}) {
        const int rd = in_child([&] { return p[off] == 0 ? 1 : 2; });
        EXPECT_TRUE(died_by_fault(rd)) << "a read at offset " << off << " of the released slot did not fault ("
                                       << (WIFEXITED(rd) ? "it read memory" : "other signal") << ")";
        const int wr = in_child([&] {
            p[off] = 1;
            return 0;
        });
        EXPECT_TRUE(died_by_fault(wr)) << "a write at offset " << off << " of the released slot did not fault";
    }
    if (host_readable) {
        void *src = v.source(info.size, 22);
        xmc_request *m = nullptr;
        ASSERT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &m)));
        ASSERT_TRUE(v.ok(v.wait(m)));
        const char want = pattern(22, 1)[0];
        const int back = in_child([&] { return p[0] == want ? 0 : 3; });
        EXPECT_TRUE(WIFEXITED(back) && WEXITSTATUS(back) == 0) << "after the remap the range must be readable again";
    }
}

// ---- VMM-REMAP-COPY ---------------------------------------------------------

TEST_P(VmmTest, VMM_REMAP_COPY_ContentsEqualPinnedSourceBitForBit) {
    Env &v = e();
    const uint64_t free_mapped = v.free_memory();
    auto r = v.released_slot((2 << 20) + 1);
    ASSERT_NE(r.slot, nullptr);
    EXPECT_EQ(v.free_memory(), free_mapped) << "create then release must leave free memory as it was";
    const size_t extra = 4096;  // a source larger than the slot is fine; its head is copied
    void *src = v.source(r.info.size + extra, 31);
    const uint64_t free_released = v.free_memory();
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size + extra, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.free_memory(), free_released - r.info.size) << "the remap maps fresh physical memory";
    EXPECT_TRUE(holds(v.read(r.info), 31));
}

TEST_P(VmmTest, VMM_REMAP_COPY_RefusesInvalidSourceAndChangesNothing) {
    Env &v = e();
    auto r = v.released_slot(1);
    ASSERT_NE(r.slot, nullptr);
    const size_t n = r.info.size, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    char *big = static_cast<char *>(v.source(n + page, 41));
    void *small = v.source(n / 2, 42);
    std::vector<char> heap(n + page, 1);  // never pinned
    const uint64_t free0 = v.free_memory();
    struct Case {
        const char *what;
        const void *src;
        size_t bytes;
        uint32_t flags;
        xmc_status want;
    } cases[] = {
        {"NULL source", nullptr, n, 0, XMC_ERR_INVALID_ARGUMENT},
        {"source shorter than the slot", big, n - 1, 0, XMC_ERR_INVALID_ARGUMENT},
        {"unpinned memory", heap.data(), n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"inside a pinned block, not at its base", big + page, n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"pinned block smaller than the length given", small, n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"unknown flag", big, n, 0x80, XMC_ERR_INVALID_ARGUMENT},
    };
    for (const Case &c : cases) {
        xmc_request *m = reinterpret_cast<xmc_request *>(0x1);
        EXPECT_TRUE(v.refused(c.want, v.remap(r.slot, v.io, c.src, c.bytes, c.flags, &m), "slot_remap")) << c.what;
        EXPECT_EQ(m, reinterpret_cast<xmc_request *>(0x1)) << c.what << ": a refused remap returned a request";
        EXPECT_EQ(v.free_memory(), free0) << c.what << ": a refused remap mapped memory";
    }
    // Nothing changed: the slot is still released, so a valid remap is accepted.
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, big, n + page, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(r.info), 41));
}

TEST_P(VmmTest, VMM_REMAP_COPY_BatchWithOneInvalidSourceChangesNothing) {
    Env &v = e();
    auto a = v.released_slot(1), b = v.released_slot(1);
    ASSERT_TRUE(a.slot && b.slot);
    void *good = v.source(a.info.size, 51);
    std::vector<char> heap(b.info.size, 2);
    const uint64_t free0 = v.free_memory();
    xmc_request *m = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_NOT_PINNED_BASE,
                          v.remap_batch({a.slot, b.slot}, v.io, {good, heap.data()}, {a.info.size, b.info.size}, 0, &m),
                          "slot_remap_batch"));
    EXPECT_EQ(v.free_memory(), free0) << "the valid half of a refused batch was mapped";
    void *good_b = v.source(b.info.size, 52);
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {good, good_b}, {a.info.size, b.info.size}, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(a.info), 51));
    EXPECT_TRUE(holds(v.read(b.info), 52));
}

TEST_P(HostileVmmTest, VMM_REMAP_COPY_HostileSourcesRefusedWithNothingChanged) {
    xmc_slot_info si{};
    xmc_slot *s = slot(4096, &si);
    ASSERT_NE(s, nullptr);
    xmc_request *rel = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->slot_release(inst, s, stream_, &rel));
    requests_.push_back(rel);
    XMC_ASSERT_STATUS(XMC_OK, api->request_wait(inst, rel, kWaitMs));
    xmc_pin_result src{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, si.size + page_size(), 64, XMC_NO_DEVICE, &src));
    const uint64_t free_before = free_memory();
    const xmc_pin_stats pins_before = pins();
    std::vector<char> pageable(si.size);
    char *interior = static_cast<char *>(src.base) + page_size();
    struct Case { const char *what; xmc_status want; const void *p; size_t n; uint32_t flags; };
    const Case cases[] = {
        {"NULL source", XMC_ERR_INVALID_ARGUMENT, nullptr, si.size, 0},
        {"source smaller than the slot", XMC_ERR_INVALID_ARGUMENT, src.base, si.size - 1, 0},
        {"source of 0 bytes", XMC_ERR_INVALID_ARGUMENT, src.base, 0, 0},
        {"unknown flags", XMC_ERR_INVALID_ARGUMENT, src.base, si.size, 0x100},
        {"pageable source", XMC_ERR_NOT_PINNED_BASE, pageable.data(), si.size, 0},
        {"interior of a pinned block", XMC_ERR_NOT_PINNED_BASE, interior, si.size, 0},
        {"source running past its block", XMC_ERR_NOT_PINNED_BASE, src.base, src.size + 1, 0},
        {"source wrapping the address space", XMC_ERR_NOT_PINNED_BASE, src.base, SIZE_MAX, 0},
    };
    for (const Case &c : cases) {
        xmc_request *r = nullptr;
        XMC_EXPECT_REFUSED(c.want, api->slot_remap(inst, s, stream_, c.p, c.n, c.flags, &r), "slot_remap") << c.what;
        EXPECT_EQ(r, nullptr) << c.what;
    }
    xmc_request *r = nullptr;
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_remap(inst, s, stream_, src.base, si.size, 0, nullptr),
                       "slot_remap") << "NULL result";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_release(inst, s, stream_, nullptr), "slot_release")
        << "NULL result";
    EXPECT_EQ(free_memory(), free_before) << "a refused remap mapped device memory";
    EXPECT_TRUE(pins() == pins_before);
    // Still released: a good remap is taken.
    XMC_EXPECT_STATUS(XMC_OK, api->slot_remap(inst, s, stream_, src.base, si.size, 0, &r));
    if (r) {
        requests_.push_back(r);
        XMC_EXPECT_STATUS(XMC_OK, api->request_wait(inst, r, kWaitMs));
    }
    api->stream_synchronize(inst, stream_);
    for (auto *q : requests_) api->request_destroy(inst, q);
    requests_.clear();
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, src.base));
}

// The real extent of the pinned block at `p` (a backend may round a block up).
Span pinned_span(const xmc_backend *api, xmc_instance *inst, const void *p) {
    xmc_pin_info q{};
    api->pin_query(inst, p, 1, &q);
    return {reinterpret_cast<uintptr_t>(q.base), q.size};
}

// A remap's source at every boundary class (boundary.hpp) around two pinned
// blocks longer than the slot: taken exactly when the model says (the base of
// one block holding every byte, at least the slot's size), and then the slot
// holds that block's bytes; every refusal maps nothing. A backend that checks
// only that the source starts in a pinned block, or only its first and last
// byte, fails one of them.
TEST_P(VmmTest, VMM_REMAP_COPY_SourceAtEveryBoundaryClassAgreesWithTheModel) {
    Env &v = e();
    auto r = v.released_slot(1);
    ASSERT_NE(r.slot, nullptr);
    const size_t n = r.info.size, pg = page_size();
    void *pa = v.source(n + 2 * pg, 301), *pb = v.source(n + 2 * pg, 302);
    ASSERT_TRUE(pa && pb);
    Span lo = pinned_span(api, v.inst, pa), hi = pinned_span(api, v.inst, pb);
    int lo_tag = 301, hi_tag = 302;
    if (hi.base < lo.base) {
        std::swap(lo, hi);
        std::swap(lo_tag, hi_tag);
    }
    const uint64_t free_released = v.free_memory();
    for (const BoundaryRange &c : boundary_ranges(lo, hi, pg)) {
        SCOPED_TRACE(std::string(boundary_name(c.cls)) + ": " + c.what);
        SlotModel m;
        ASSERT_EQ(m.create(n), XMC_OK);
        m.release({0});
        m.wait(0);
        const Source k = source_class(c.addr, c.len, n, {lo, hi});
        const xmc_status want = m.remap({0}, {k}, {1}, 0);
        xmc_request *q = nullptr;
        const xmc_status got = v.remap(r.slot, v.io, reinterpret_cast<const void *>(c.addr), c.len, 0, &q);
        EXPECT_EQ(got, want) << "source " << source_name(k) << " (+" << c.addr - lo.base << ", " << c.len
                             << " bytes): got " << xmc_status_string(got) << ", the model says "
                             << xmc_status_string(want) << " " << v.error();
        if (got != XMC_OK) {
            EXPECT_EQ(v.free_memory(), free_released) << "a refused remap mapped memory";
            continue;
        }
        ASSERT_TRUE(v.ok(v.wait(q)));
        EXPECT_TRUE(holds(v.read(r.info), c.addr == lo.base ? lo_tag : hi_tag));
        ASSERT_TRUE(v.ok(v.destroy(q)));  // never adopted: the slot is released again
        EXPECT_EQ(v.free_memory(), free_released) << "the destroyed remap's mapping outlived it";
    }
}

// A source across two touching pinned blocks (where the backend places one
// right after another) is no one block's: refused. When none of a few touch,
// the class cannot be made and the test says so.
TEST_P(VmmTest, VMM_REMAP_COPY_SourceAcrossTwoTouchingBlocksIsRefused) {
    Env &v = e();
    auto r = v.released_slot(1);
    ASSERT_NE(r.slot, nullptr);
    std::vector<Span> blocks;
    for (int i = 0; i < 8; ++i) {
        void *p = v.source(r.info.size, 311 + i);
        ASSERT_NE(p, nullptr);
        blocks.push_back(pinned_span(api, v.inst, p));
    }
    const Span *first = nullptr, *second = nullptr;
    uintptr_t nearest = UINTPTR_MAX;
    for (const Span &a : blocks)
        for (const Span &b : blocks) {
            if (b.base == a.end()) first = &a, second = &b;
            if (b.base >= a.end()) nearest = std::min(nearest, b.base - a.end());
        }
    if (!first)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' placed none of 8 pinned blocks right after "
                                        "another (the nearest were " << nearest << " bytes apart): no source "
                                        "across two touching blocks can be made");
    const uint64_t free_released = v.free_memory();
    for (const BoundaryRange &c : boundary_ranges(*first, *second, 1)) {
        if (c.cls != Boundary::SpansAdjacent || c.len < r.info.size) continue;
        xmc_request *q = nullptr;
        EXPECT_TRUE(v.refused(XMC_ERR_NOT_PINNED_BASE,
                              v.remap(r.slot, v.io, reinterpret_cast<const void *>(c.addr), c.len, 0, &q),
                              "slot_remap"))
            << c.what;
    }
    EXPECT_EQ(v.free_memory(), free_released) << "a refused remap mapped memory";
}

TEST_P(VmmTest, VMM_REMAP_COPY_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Check, Release, Remap, Remap, Wait, Adopt, Destroy, CheckMemory>(
        kBadSource, GetParam(), "");
}

// ---- VMM-DEFERRED -----------------------------------------------------------

TEST_P(VmmTest, VMM_DEFERRED_CopyLaunchesOncePerSlot) {
    Env &v = e();
    auto a = v.released_slot(1), b = v.released_slot(1);
    ASSERT_TRUE(a.slot && b.slot);
    void *sa = v.source(a.info.size, 61), *sb = v.source(b.info.size, 62);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {sa, sb}, {a.info.size, b.info.size},
                                   XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 0u) << "a deferred remap started a copy by itself";
    EXPECT_NE(mismatch(v.read(a.info), 61), SIZE_MAX) << "the deferred copy ran before it was launched";
    xmc_stream *s = v.stream();
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, s)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_launch_copy(v.inst, m, 0, s), "request_launch_copy"))
        << "a second launch for one slot must be refused";
    EXPECT_EQ(v.query(m).copies_launched, 1u);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 1, v.io)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_launch_copy(v.inst, m, 1, s), "request_launch_copy"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 2u);
    EXPECT_TRUE(holds(v.read(a.info), 61));
    EXPECT_TRUE(holds(v.read(b.info), 62));
}

TEST_P(VmmTest, VMM_DEFERRED_LaunchWaitsForTheRemap) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    void *src = v.source(info.size, 71);
    xmc_stream *g = v.stream(), *b = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *m = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));  // held: the remap cannot map until the gate opens
    ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, XMC_REMAP_DEFER_COPY, &m)));
    std::atomic<bool> returned{false};
    std::atomic<int> done_at_return{-1};
    xmc_status launched = XMC_OK;
    std::thread t([&] {
        launched = api->request_launch_copy(v.inst, m, 0, b);
        xmc_request_info i{};
        api->request_query(v.inst, m, &i);
        done_at_return = i.done;
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    if (returned && done_at_return != 1) {
        ADD_FAILURE() << "request_launch_copy returned (" << xmc_status_string(launched)
                      << ") before the remap finished: the copy would land in unmapped memory";
        t.join();
        return leak();
    }
    gate->release();
    t.join();
    EXPECT_EQ(done_at_return, 1) << "the launch returned before the remap had finished";
    ASSERT_TRUE(v.ok(launched));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(info), 71));
}

TEST_P(VmmTest, VMM_DEFERRED_RefusesLaunchOfNonDeferredReleaseOrOutOfRange) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 81);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &m)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, m, 0, v.io),
                          "request_launch_copy"))
        << "a remap that copies by itself has no copy to launch";
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    xmc_request *rel = nullptr, *d = nullptr;
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, rel, 0, v.io),
                          "request_launch_copy"));
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, XMC_REMAP_DEFER_COPY, &d)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, d, 1, v.io),
                          "request_launch_copy"))
        << "slot index 1 of a one-slot request";
    ASSERT_TRUE(v.ok(v.wait(d)));
    EXPECT_EQ(v.query(d).copies_launched, 0u);
    ASSERT_TRUE(v.ok(v.destroy(d)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_launch_copy(v.inst, d, 0, v.io),
                          "request_launch_copy"));
}

TEST_P(VmmTest, VMM_DEFERRED_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, RemapBatch, Launch, Launch, Wait, Adopt, Destroy, Query>(
        kRelaunch, GetParam(), "");
}

// ---- VMM-STATE --------------------------------------------------------------

TEST_P(VmmTest, VMM_STATE_ReleaseWithReleasePendingIsBusy) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    const uint64_t free0 = v.free_memory();  // after the stream: only the releases are measured
    xmc_request *rel = nullptr, *again = reinterpret_cast<xmc_request *>(0x1);
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release")) << "while pending";
    EXPECT_EQ(again, reinterpret_cast<xmc_request *>(0x1));
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release")) << "once released";
    EXPECT_EQ(v.free_memory(), free0 + info.size) << "the memory must be returned once, by the first release";
}

TEST_P(VmmTest, VMM_STATE_RemapOfMappedSlotWithoutReleaseIsBusy) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 91));
    void *src = v.source(info.size, 92);
    const uint64_t free0 = v.free_memory();
    xmc_request *m = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(s, v.io, src, info.size, 0, &m), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap_batch({s}, v.io, {src}, {info.size}, 0, &m), "slot_remap_batch"));
    EXPECT_TRUE(holds(v.read(info), 91)) << "a refused remap changed the slot's bytes";
    EXPECT_EQ(v.free_memory(), free0);
}

TEST_P(VmmTest, VMM_STATE_RemapOrReleaseWithRemapPendingIsBusy) {
    Env &v = e();
    auto r = v.released_slot(1);
    ASSERT_NE(r.slot, nullptr);
    void *first = v.source(r.info.size, 93), *second = v.source(r.info.size, 94);
    xmc_request *m = nullptr, *refused = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, first, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(r.slot, v.io, second, r.info.size, 0, &refused), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &refused), "slot_release"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    // Still pending (until adopted): the refusals hold after the worker is done.
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(r.slot, v.io, second, r.info.size, 0, &refused), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &refused), "slot_release"));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, v.io)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(r.info), 93)) << "the pending remap must finish with its own source";
}

TEST_P(HostileVmmTest, VMM_STATE_HostileSlotAndRequestHandlesRefusedWithNothingChanged) {
    // Every handle the refusals are given is made before the snapshot of free
    // memory, after the driver's lazy allocations (warm_up): the check then
    // brackets the refused calls alone. (It used to create and destroy a
    // stream in between, and the H200's first stream creation keeps 2 MiB.)
    warm_up(api, inst);
    xmc_slot_info si{};
    xmc_slot *live = slot(4096, &si);
    ASSERT_NE(live, nullptr);
    xmc_slot_info gi{};
    xmc_slot *gone = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->slot_create(inst, 0, 4096, &gone, &gi));
    XMC_ASSERT_STATUS(XMC_OK, api->slot_close(inst, gone));
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    xmc_slot *foreign = nullptr;
    xmc_slot_info fi{};
    XMC_ASSERT_STATUS(XMC_OK, api->slot_create(other, 0, 4096, &foreign, &fi));

    // A live request to compare with, and a destroyed one.
    xmc_request *rel = nullptr, *gone_r = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->slot_release(inst, live, stream_, &rel));
    requests_.push_back(rel);
    XMC_ASSERT_STATUS(XMC_OK, api->request_wait(inst, rel, kWaitMs));
    xmc_slot *tmp = slot(4096, &gi);
    ASSERT_NE(tmp, nullptr);
    XMC_ASSERT_STATUS(XMC_OK, api->slot_release(inst, tmp, stream_, &gone_r));
    XMC_ASSERT_STATUS(XMC_OK, api->request_wait(inst, gone_r, kWaitMs));
    XMC_ASSERT_STATUS(XMC_OK, api->request_destroy(inst, gone_r));
    xmc_pin_result src{};
    const bool pin = has(XMC_CAP_PIN);
    if (pin) { XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, si.size, 64, XMC_NO_DEVICE, &src)); }
    xmc_stream *gone_s = nullptr;  // a destroyed stream
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &gone_s));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_destroy(inst, gone_s));
    closed_instance();  // an instance opened and closed, as the dead-instance refusals below make them
    const xmc_request_info rel_before = info(rel);
    const uint64_t free_before = free_memory();

    const std::pair<const char *, xmc_slot *> bad_slots[] = {
        {"NULL", nullptr}, {"never issued", never_issued<xmc_slot>(0x4000)}, {"closed", gone},
        {"of another instance", foreign},
    };
    for (const auto &[what, h] : bad_slots) {
        SCOPED_TRACE(std::string("slot ") + what);
        xmc_request *r = nullptr;
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_release(inst, h, stream_, &r), "slot_release");
        if (pin) {
            XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_remap(inst, h, stream_, src.base, src.size, 0, &r),
                               "slot_remap");
        }
        xmc_slot *const batch[] = {h};
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_release_batch(inst, batch, 1, stream_, &r),
                           "slot_release_batch");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_close(inst, h), "slot_close");
        EXPECT_EQ(r, nullptr);
    }
    const std::pair<const char *, xmc_request *> bad_requests[] = {
        {"NULL", nullptr}, {"never issued", never_issued<xmc_request>(0x5000)}, {"destroyed", gone_r},
    };
    for (const auto &[what, r] : bad_requests) {
        SCOPED_TRACE(std::string("request ") + what);
        xmc_request_info ri{};
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_launch_copy(inst, r, 0, stream_), "request_launch_copy");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_wait(inst, r, 0), "request_wait");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_adopt(inst, r), "request_adopt");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_query(inst, r, &ri), "request_query");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_stream_wait(inst, r, stream_), "request_stream_wait");
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->request_destroy(inst, r), "request_destroy");
    }
    // A live request of this instance is not another instance's.
    xmc_request_info ri{};
    EXPECT_EQ(api->request_query(other, rel, &ri), XMC_ERR_INVALID_HANDLE) << "request of another instance";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->request_query(inst, rel, nullptr), "request_query");
    // Arguments of a live request that do not fit it.
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(inst, rel, 0, stream_),
                       "request_launch_copy") << "a release request has no deferred copy";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(inst, rel, UINT32_MAX, stream_),
                       "request_launch_copy") << "slot index UINT32_MAX";
    // Streams that are not live, with a live slot and request.
    for (xmc_stream *s : {static_cast<xmc_stream *>(nullptr), gone_s, never_issued<xmc_stream>(0x6000)}) {
        SCOPED_TRACE("stream " + std::to_string(reinterpret_cast<uintptr_t>(s)));
        xmc_request *r = nullptr;
        if (pin) {
            XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_remap(inst, live, s, src.base, src.size, 0, &r),
                               "slot_remap");
        }
        EXPECT_EQ(r, nullptr);
    }
    // Calls through a NULL or closed instance.
    expect_dead_instances_refused("slot_release", [&](xmc_instance *i) {
        xmc_request *r = nullptr;
        return api->slot_release(i, live, stream_, &r);
    });
    expect_dead_instances_refused("slot_close", [&](xmc_instance *i) { return api->slot_close(i, live); });
    expect_dead_instances_refused("request_query", [&](xmc_instance *i) {
        xmc_request_info x{};
        return api->request_query(i, rel, &x);
    });
    expect_dead_instances_refused("request_wait", [&](xmc_instance *i) { return api->request_wait(i, rel, 0); });
    expect_dead_instances_refused("request_adopt", [&](xmc_instance *i) { return api->request_adopt(i, rel); });
    expect_dead_instances_refused("request_launch_copy", [&](xmc_instance *i) {
        return api->request_launch_copy(i, rel, 0, stream_);
    });
    expect_dead_instances_refused("request_stream_wait", [&](xmc_instance *i) {
        return api->request_stream_wait(i, rel, stream_);
    });
    expect_dead_instances_refused("request_destroy", [&](xmc_instance *i) { return api->request_destroy(i, rel); });
    expect_dead_instances_refused("slot_remap", [&](xmc_instance *i) {
        xmc_request *r = nullptr;
        return api->slot_remap(i, live, stream_, src.base, src.size, 0, &r);
    });

    // Nothing changed: the request reads the same, no device memory moved, and
    // the live slot (released) still takes a remap, the foreign one a release.
    EXPECT_TRUE(info(rel) == rel_before) << "refusals changed a live request";
    EXPECT_EQ(free_memory(), free_before) << "refusals changed the device's free memory";
    if (pin) {
        xmc_request *r = nullptr;
        XMC_EXPECT_STATUS(XMC_OK, api->slot_remap(inst, live, stream_, src.base, src.size, 0, &r));
        if (r) {
            requests_.push_back(r);
            XMC_EXPECT_STATUS(XMC_OK, api->request_wait(inst, r, kWaitMs));
        }
    }
    xmc_request *fr = nullptr;
    xmc_stream *other_stream = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(other, 0, &other_stream));
    XMC_EXPECT_STATUS(XMC_OK, api->slot_release(other, foreign, other_stream, &fr));
    if (fr) {
        XMC_EXPECT_STATUS(XMC_OK, api->request_wait(other, fr, kWaitMs));
        XMC_EXPECT_STATUS(XMC_OK, api->request_destroy(other, fr));
    }
    XMC_EXPECT_STATUS(XMC_OK, api->slot_close(other, foreign));
    XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(other, other_stream));
    if (pin) {
        api->stream_synchronize(inst, stream_);
        for (auto *r : requests_) api->request_destroy(inst, r);
        requests_.clear();
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, src.base));
    }
}

TEST_P(VmmTest, VMM_STATE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Release, Remap, Remap, Wait, Adopt, Destroy, Query>(kBusy, GetParam(),
                                                                                                      "");
}

// The slot state machine under concurrent callers (SPEC 3: every entry point is
// thread-safe). Each thread drives a slot of its own through release, remap, adopt and
// destroy on a stream of its own and checks what the model says right after each of
// its operations (accepted, the request's counts, done and clean after its wait, the
// slot's bytes those of the source); between cycles all threads release one shared
// slot at once, then remap it at once: of each, exactly one is accepted and the
// others are refused busy (VMM-STATE), and the winner's reload holds.
TEST_P(VmmTest, VMM_STATE_ConcurrentCallersEachSeeTheModelsStateAndOneWinsAContestedSlot) {
    constexpr int kThreads = 4, kCycles = 12;
    constexpr uint32_t kThreadWaitMs = 5000;  // a request that takes longer is stuck: the thread stops
    Env &v = e();
    struct Own {
        xmc_stream *stream = nullptr;
        xmc_slot *slot = nullptr;
        xmc_slot_info info{};
        void *src[2] = {nullptr, nullptr};  // two tags, alternating
        void *back = nullptr;               // where the thread reads its slot into
    };
    std::vector<Own> own(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        Own &o = own[t];
        o.stream = v.stream();
        const Env::Slot made = v.mapped_slot(1);
        o.slot = made.slot;
        o.info = made.info;
        ASSERT_NE(o.slot, nullptr);
        o.src[0] = v.source(o.info.size, 300 + 2 * t);
        o.src[1] = v.source(o.info.size, 301 + 2 * t);
        o.back = v.source(o.info.size, 0);
        ASSERT_TRUE(o.src[0] && o.src[1] && o.back);
    }
    auto [shared, shared_info] = v.mapped_slot(1);
    ASSERT_NE(shared, nullptr);
    std::vector<void *> shared_src;
    for (int t = 0; t < kThreads; ++t) shared_src.push_back(v.source(shared_info.size, 400 + t));

    std::mutex mu;
    std::vector<std::string> failures;
    std::atomic<int> release_wins{0}, remap_wins{0}, shared_tag{-1};
    SpinBarrier turn(kThreads);
    std::atomic<bool> stopped{false};  // a thread stuck or failed: the others stop at the next cycle
    auto worker = [&](int tid) {
        Own &o = own[tid];
        auto fail = [&](const std::string &what) {
            std::lock_guard<std::mutex> l(mu);
            if (failures.size() < 20) failures.push_back("thread " + std::to_string(tid) + ": " + what);
            stopped = true;
        };
        auto status = [&](xmc_status st) { return std::string(xmc_status_string(st)); };
        auto read_holds = [&](const xmc_slot_info &info, int tag) {
            std::memset(o.back, kPoison, info.size);
            xmc_copy_desc d = Env::linear(info.address, XMC_MEM_DEVICE, o.back, XMC_MEM_PINNED, info.size);
            const xmc_status st = api->copy(v.inst, &d, o.stream);
            const xmc_status sy = api->stream_synchronize(v.inst, o.stream);
            const char *p = static_cast<const char *>(o.back);
            return st == XMC_OK && sy == XMC_OK && holds(std::vector<char>(p, p + info.size), tag);
        };
        // Its own slot: mapped -> release pending -> remap pending -> mapped. False when the
        // thread must stop (a request stuck or refused): it then only keeps the others' pace.
        auto own_cycle = [&](int cycle) {
            const int tag = 300 + 2 * tid + cycle % 2;
            xmc_request *rel = nullptr, *rem = nullptr;
            xmc_status st = api->slot_release(v.inst, o.slot, o.stream, &rel);
            if (st != XMC_OK) return fail("release of its mapped slot: " + status(st)), false;
            xmc_request_info qi{};
            if (api->request_query(v.inst, rel, &qi) != XMC_OK || qi.slots != 1 || qi.status != XMC_OK)
                fail("right after its release, the request does not report one slot and no error");
            // The model: a second release while one is pending is busy.
            xmc_request *again = nullptr;
            if ((st = api->slot_release(v.inst, o.slot, o.stream, &again)) != XMC_ERR_BUSY)
                return fail("a release with a release pending answered " + status(st)), false;
            st = api->slot_remap(v.inst, o.slot, o.stream, o.src[cycle % 2], o.info.size, 0, &rem);
            if (st != XMC_OK) return fail("remap of its releasing slot: " + status(st)), false;
            if ((st = api->request_wait(v.inst, rem, kThreadWaitMs)) != XMC_OK)
                return fail("its remap did not finish cleanly: " + status(st)), false;
            if ((st = api->request_wait(v.inst, rel, kThreadWaitMs)) != XMC_OK)
                return fail("its release did not finish cleanly: " + status(st)), false;
            if (api->request_query(v.inst, rem, &qi) != XMC_OK || !qi.done || qi.status != XMC_OK ||
                qi.copies_launched != 1)
                fail("right after its remap's wait, the request is not done with its one copy");
            if ((st = api->request_adopt(v.inst, rem)) != XMC_OK) fail("adopt of its finished remap: " + status(st));
            api->request_destroy(v.inst, rel);
            api->request_destroy(v.inst, rem);
            if (!read_holds(o.info, tag)) fail("after its reload the slot does not hold the source's bytes");
            return true;
        };
        bool going = true;
        for (int cycle = 0; cycle < kCycles; ++cycle) {
            if (going && !stopped) going = own_cycle(cycle);
            // The shared slot: every thread releases it at once, then remaps it at once. Every
            // thread passes every turn, also one that stopped, so that none waits for ever.
            turn.arrive_and_wait();
            const bool run = !stopped;
            xmc_request *srel = nullptr, *srem = nullptr;
            xmc_status st = XMC_OK;
            if (run) {
                st = api->slot_release(v.inst, shared, o.stream, &srel);
                if (st == XMC_OK) ++release_wins;
                else if (st != XMC_ERR_BUSY) fail("a contested release answered " + status(st));
            }
            turn.arrive_and_wait();
            if (run && tid == 0 && release_wins != 1)
                fail(std::to_string(release_wins.load()) + " of " + std::to_string(kThreads) +
                     " releases of one mapped slot made at once were accepted; exactly one may");
            if (run && srel && (st = api->request_wait(v.inst, srel, kThreadWaitMs)) != XMC_OK)
                fail("the contested release did not finish cleanly: " + status(st));
            turn.arrive_and_wait();
            if (run) {
                st = api->slot_remap(v.inst, shared, o.stream, shared_src[tid], shared_info.size, 0, &srem);
                if (st == XMC_OK) {
                    ++remap_wins;
                    shared_tag = 400 + tid;
                } else if (st != XMC_ERR_BUSY) {
                    fail("a contested remap answered " + status(st));
                }
            }
            turn.arrive_and_wait();
            if (run && tid == 0 && remap_wins != 1)
                fail(std::to_string(remap_wins.load()) + " of " + std::to_string(kThreads) +
                     " remaps of one released slot made at once were accepted; exactly one may");
            if (run && srem) {
                if ((st = api->request_wait(v.inst, srem, kThreadWaitMs)) != XMC_OK)
                    fail("the contested remap did not finish cleanly: " + status(st));
                else if ((st = api->request_adopt(v.inst, srem)) != XMC_OK)
                    fail("adopt of the contested remap: " + status(st));
                else if (!read_holds(shared_info, shared_tag))
                    fail("the contested slot does not hold the winner's source");
            }
            if (run && srel) api->request_destroy(v.inst, srel);
            if (run && srem) api->request_destroy(v.inst, srem);
            turn.arrive_and_wait();
            if (tid == 0) release_wins = remap_wins = 0;
            turn.arrive_and_wait();
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    for (auto &t : threads) t.join();
    for (const auto &f : failures) ADD_FAILURE() << f;
    if (!failures.empty()) leak();  // a request may be stuck: closing its slot could wait for ever
}

// ---- VMM-BATCH --------------------------------------------------------------

TEST_P(VmmTest, VMM_BATCH_RefusesSlotNamedTwice) {
    Env &v = e();
    auto [a, ia] = v.mapped_slot(1);
    auto [b, ib] = v.mapped_slot(1);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(v.write(ia, 101) && v.write(ib, 102));
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    // Accepted, the batch releases the slots: reading them below would fault.
    ASSERT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH, v.release_batch({a, b, a}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH, v.release_batch({b, b}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    EXPECT_EQ(v.free_memory(), free0) << "a refused batch released a slot";
    EXPECT_TRUE(holds(v.read(ia), 101));
    EXPECT_TRUE(holds(v.read(ib), 102));
    // Both still mapped and not pending: the batch without the duplicate is accepted.
    ASSERT_TRUE(v.ok(v.release_batch({a, b}, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.free_memory(), free0 + ia.size + ib.size);
    void *sa = v.source(ia.size, 103), *sb = v.source(ib.size, 104);
    EXPECT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH,
                          v.remap_batch({a, b, b}, v.io, {sa, sb, sb}, {ia.size, ib.size, ib.size}, 0, &r),
                          "slot_remap_batch"));
    EXPECT_EQ(v.free_memory(), free0 + ia.size + ib.size) << "a refused batch remapped a slot";
    ASSERT_TRUE(v.ok(v.remap_batch({a, b}, v.io, {sa, sb}, {ia.size, ib.size}, 0, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_TRUE(holds(v.read(ia), 103));
    EXPECT_TRUE(holds(v.read(ib), 104));
}

TEST_P(VmmTest, VMM_BATCH_RefusesWholeBatchWhenOneSlotIsBusy) {
    Env &v = e();
    auto [a, ia] = v.mapped_slot(1);
    auto b = v.released_slot(1);
    ASSERT_TRUE(a && b.slot);
    ASSERT_TRUE(v.write(ia, 111));
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release_batch({a, b.slot}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    EXPECT_EQ(v.free_memory(), free0) << "the mapped slot of a refused batch was released";
    EXPECT_TRUE(holds(v.read(ia), 111));
    ASSERT_TRUE(v.ok(v.release(a, v.io, &r))) << "the mapped slot must still be releasable";
    ASSERT_TRUE(v.ok(v.wait(r)));
}

TEST_P(VmmTest, VMM_BATCH_RefusesEmptyBatch) {
    Env &v = e();
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_release_batch(v.inst, nullptr, 0, v.io, &r),
                          "slot_release_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT,
                          api->slot_remap_batch(v.inst, nullptr, 0, v.io, nullptr, nullptr, 0, &r),
                          "slot_remap_batch"));
}

TEST_P(VmmTest, VMM_BATCH_ReleasesAndRemapsEverySlot) {
    Env &v = e();
    std::vector<xmc_slot *> s(3);
    std::vector<xmc_slot_info> info(3);
    for (int i = 0; i < 3; ++i) ASSERT_NE(s[i] = v.create(size_t(i + 1) << 20, &info[i]), nullptr);
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release_batch(s, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.query(r).slots, 3u);
    EXPECT_EQ(v.free_memory(), free0 + info[0].size + info[1].size + info[2].size);
    std::vector<const void *> src;
    std::vector<size_t> n;
    for (int i = 0; i < 3; ++i) {
        src.push_back(v.source(info[i].size, 120 + i));
        n.push_back(info[i].size);
    }
    ASSERT_TRUE(v.ok(v.remap_batch(s, v.io, src, n, 0, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.query(r).copies_launched, 3u);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(holds(v.read(info[i]), 120 + i)) << "slot " << i;
}

TEST_P(HostileVmmTest, VMM_BATCH_HostileBatchesRefusedBeforeAnyChange) {
    xmc_slot_info si{};
    xmc_slot *a = slot(4096, &si);
    xmc_slot *b = slot(4096, &si);
    ASSERT_TRUE(a && b);
    warm_up(api, inst);
    closed_instance();  // an instance opened and closed, as the dead-instance refusals below make them
    const uint64_t free_before = free_memory();
    xmc_request *r = nullptr;
    xmc_slot *const two[] = {a, b};
    xmc_slot *const with_bad[] = {a, never_issued<xmc_slot>(0x7000)};
    xmc_slot *const with_null[] = {a, nullptr};
    xmc_slot *const twice[] = {a, b, a};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_release_batch(inst, two, 0, stream_, &r),
                       "slot_release_batch") << "empty batch";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_release_batch(inst, nullptr, 2, stream_, &r),
                       "slot_release_batch") << "NULL slots";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_release_batch(inst, two, 2, stream_, nullptr),
                       "slot_release_batch") << "NULL result";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_release_batch(inst, with_bad, 2, stream_, &r),
                       "slot_release_batch") << "one never-issued slot";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_release_batch(inst, with_null, 2, stream_, &r),
                       "slot_release_batch") << "one NULL slot";
    XMC_EXPECT_REFUSED(XMC_ERR_DUPLICATE_IN_BATCH, api->slot_release_batch(inst, twice, 3, stream_, &r),
                       "slot_release_batch") << "a slot twice";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_release_batch(inst, two, 2, nullptr, &r),
                       "slot_release_batch") << "NULL stream";
    const void *srcs[] = {nullptr, nullptr};
    const size_t sizes[] = {si.size, si.size};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_remap_batch(inst, two, 0, stream_, srcs, sizes, 0, &r),
                       "slot_remap_batch") << "empty batch";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_remap_batch(inst, two, 2, stream_, nullptr, sizes, 0, &r),
                       "slot_remap_batch") << "NULL sources";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_remap_batch(inst, two, 2, stream_, srcs, nullptr, 0, &r),
                       "slot_remap_batch") << "NULL sizes";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->slot_remap_batch(inst, nullptr, 2, stream_, srcs, sizes, 0, &r),
                       "slot_remap_batch") << "NULL slots";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_HANDLE, api->slot_remap_batch(inst, with_bad, 2, stream_, srcs, sizes, 0, &r),
                       "slot_remap_batch") << "one never-issued slot";
    EXPECT_EQ(r, nullptr);
    expect_dead_instances_refused("slot_release_batch", [&](xmc_instance *i) {
        xmc_request *x = nullptr;
        return api->slot_release_batch(i, two, 2, stream_, &x);
    });
    expect_dead_instances_refused("slot_remap_batch", [&](xmc_instance *i) {
        xmc_request *x = nullptr;
        return api->slot_remap_batch(i, two, 2, stream_, srcs, sizes, 0, &x);
    });
    EXPECT_EQ(free_memory(), free_before);
    // Both slots are still mapped: the whole batch is taken now.
    XMC_EXPECT_STATUS(XMC_OK, api->slot_release_batch(inst, two, 2, stream_, &r));
    if (r) {
        requests_.push_back(r);
        XMC_EXPECT_STATUS(XMC_OK, api->request_wait(inst, r, kWaitMs));
        xmc_request_info ri = info(r);
        EXPECT_EQ(ri.slots, 2u);
    }
}

TEST_P(VmmTest, VMM_BATCH_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, ReleaseBatch, ReleaseBatch, RemapBatch, RemapBatch, Wait, Adopt,
                 Destroy, Launch, Query>(kDup, GetParam(), "");
}

// ---- VMM-CLOSE --------------------------------------------------------------

TEST_P(VmmTest, VMM_CLOSE_WaitsForAnInFlightCopy) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 131);
    ASSERT_NE(r.slot, nullptr);
    // What the release left queued on io runs first: the gate below is a host function that
    // holds a driver's callback thread, which other streams' host functions may share (the
    // fake has one), so one still queued on io would wait behind it and the remap on io with
    // it (broken_cuda_vmm_query_in_callback's host function timed this test out 1 run in 8).
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    xmc_stream *l = v.stream();
    auto gate = v.gate(l);  // holds l: nothing else runs on it
    const uint64_t free_released = v.free_memory();  // after the stream: only the slot's work is measured
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, l)));  // queued behind the gate
    std::atomic<bool> returned{false};
    xmc_status closed = XMC_OK;
    std::thread t([&] {
        closed = api->slot_close(v.inst, r.slot);
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    if (returned) {
        ADD_FAILURE() << "slot_close returned (" << xmc_status_string(closed)
                      << ") while a copy into the slot was still queued: the copy would write into unmapped memory";
        t.join();
        return leak();
    }
    gate->release();
    t.join();
    ASSERT_TRUE(v.ok(closed));
    v.slots.clear();
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 1u);
    EXPECT_EQ(v.free_memory(), free_released) << "close must give the slot's memory back";
}

TEST_P(VmmTest, VMM_CLOSE_WaitsForAPendingRelease) {
    Env &v = e();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    const uint64_t free0 = v.free_memory();  // after the stream: only the release and close are measured
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    std::atomic<bool> returned{false};
    std::atomic<int> release_done{-1};
    xmc_status closed = XMC_OK;
    std::thread t([&, s = s] {  // s by value: clang before 16 cannot capture a structured binding
        closed = api->slot_close(v.inst, s);
        xmc_request_info i{};
        api->request_query(v.inst, rel, &i);
        release_done = i.done;
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    gate->release();
    t.join();
    ASSERT_TRUE(v.ok(closed));
    v.slots.clear();
    EXPECT_EQ(release_done, 1) << "slot_close returned while the slot's release was still pending";
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_EQ(v.free_memory(), free0 + info.size);
}

TEST_P(VmmTest, VMM_CLOSE_ClosedSlotIsRefusedEverywhere) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    auto [s, info] = v.mapped_slot(1);
    ASSERT_NE(s, nullptr);
    void *src = v.source(info.size, 141);
    ASSERT_TRUE(v.ok(v.close(s)));
    EXPECT_EQ(v.free_memory(), free0);
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, s), "slot_close"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release(s, v.io, &r), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.remap(s, v.io, src, info.size, 0, &r), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release_batch({s}, v.io, &r), "slot_release_batch"));
    EXPECT_EQ(v.free_memory(), free0);
}

// After release, remap and adopt, close unmaps and frees the slot's whole
// range: no mapping covers a byte of it that did not before the slot was
// created (/proc/self/maps, where slots are memfds mapped into the process:
// the host and the fakes), no memfd mapping the slot made is left, no
// address reservation or mapping of it is left in a fake driver's ledger, and
// the device has its memory back. A slot whose remap put its memory elsewhere
// leaves its original reservation behind on close.
TEST_P(VmmTest, VMM_CLOSE_FreesTheWholeRangeAfterReleaseAndRemap) {
    Env &v = e();
    const std::vector<std::string> before = read_maps();
    const size_t memfds = memfd_mappings();
    const uint64_t free0 = v.free_memory();
    xmc_slot_info info{};
    xmc_slot *s = v.create(3 << 20, &info);
    ASSERT_NE(s, nullptr);
    const bool host_mapped = memfd_backed(info.address, info.size);
    const DriverControl *control = driver_control(api, nullptr);
    if (control) {
        // The check after close can fail: the ledger shows the live slot's range.
        EXPECT_FALSE(ledger_ranges_overlapping(*control, info.address, info.size).empty())
            << "the fake's ledger shows nothing of a live slot's range:\n" << control->ledger_text();
    }
    void *src = v.source(info.size, 261);
    for (int cycle = 0; cycle < 2; ++cycle) {
        xmc_request *rel = nullptr, *rem = nullptr;
        ASSERT_TRUE(v.ok(v.release(s, v.io, &rel)));
        ASSERT_TRUE(v.ok(v.wait(rel)));
        ASSERT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &rem)));
        ASSERT_TRUE(v.ok(v.wait(rem)));
        ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
        ASSERT_TRUE(v.ok(v.destroy(rem)));
        ASSERT_TRUE(v.ok(v.destroy(rel)));
    }
    ASSERT_TRUE(v.ok(v.close(s)));
    v.free_source(src);
    EXPECT_EQ(v.free_memory(), free0) << "close did not give the slot's memory back";
    if (host_mapped) {
        const std::vector<std::string> was = maps_overlapping(before, info.address, info.size);
        for (const std::string &line : maps_overlapping(read_maps(), info.address, info.size))
            EXPECT_TRUE(std::find(was.begin(), was.end(), line) != was.end())
                << "after close a mapping still covers part of the slot's range [" << info.address << ", +"
                << info.size << "): " << line;
        EXPECT_EQ(memfd_mappings(), memfds) << "after close a memfd mapping the slot made is left";
    }
    if (control) {
        for (const std::string &line : ledger_ranges_overlapping(*control, info.address, info.size))
            ADD_FAILURE() << "after close the driver still holds, in the slot's range: " << line;
    }
}

TEST_P(VmmTest, VMM_CLOSE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, Remap, Launch, Launch, Wait, Adopt, Destroy, Close, Query,
                 CheckMemory>(kCloseAny, GetParam(), "");
}

// ---- VMM-ADOPT --------------------------------------------------------------

TEST_P(VmmTest, VMM_ADOPT_DestroyingTheRequestKeepsAnAdoptedMapping) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 151);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    EXPECT_EQ(v.query(m).adopted, 1u);
    ASSERT_TRUE(v.ok(v.wait(m)));
    const uint64_t free_mapped = v.free_memory();
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_EQ(v.free_memory(), free_mapped) << "destroying the request unmapped the adopted mapping";
    EXPECT_TRUE(holds(v.read(r.info), 151));
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel))) << "an adopted slot is mapped and releasable";
    ASSERT_TRUE(v.ok(v.wait(rel)));
}

TEST_P(VmmTest, VMM_ADOPT_DestroyingAnUnadoptedRequestRollsBackItsMapping) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 161);
    ASSERT_NE(r.slot, nullptr);
    const uint64_t free_released = v.free_memory();
    xmc_request *m = nullptr, *x = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_EQ(v.free_memory(), free_released) << "a mapping never adopted belongs to its request and goes with it";
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &x), "slot_release")) << "the slot must be released";
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &x)));
    ASSERT_TRUE(v.ok(v.wait(x)));
    EXPECT_TRUE(holds(v.read(r.info), 161));
}

TEST_P(VmmTest, VMM_ADOPT_RefusesSecondAdoptAndReleaseRequests) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 171);
    ASSERT_NE(r.slot, nullptr);
    xmc_request *m = nullptr, *rel = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_adopt(v.inst, m), "request_adopt"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_adopt(v.inst, rel), "request_adopt"));
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_adopt(v.inst, m), "request_adopt"));
}

// ---- VMM-SERIAL -------------------------------------------------------------

TEST_P(VmmTest, VMM_SERIAL_RemapWaitingOnALaterReleaseCompletes) {
    ASSERT_TRUE(reopen("vmm_workers=1"));
    Env &v = e();
    auto [a, ia] = v.mapped_slot(1);
    auto [c, ic] = v.mapped_slot(1);
    ASSERT_TRUE(a && c);
    void *src = v.source(ia.size, 181);
    xmc_stream *g = v.stream(), *b = v.stream(), *d = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel_a = nullptr, *rem_a = nullptr, *rel_c = nullptr;
    ASSERT_TRUE(v.ok(v.release(a, g, &rel_a)));  // queued to the worker only when the gate opens
    ASSERT_TRUE(v.ok(v.remap(a, b, src, ia.size, 0, &rem_a)));
    // The remap reaches the one worker first, and must not hold it.
    EXPECT_TRUE(eventually([&] { return v.query(rem_a).callback_fired == 1; }, 2000ms))
        << "the remap's stream never reached it";
    ASSERT_TRUE(v.ok(v.release(c, d, &rel_c)));
    if (xmc_status st = v.wait(rel_c, 3000); st != XMC_OK) {
        ADD_FAILURE() << "serial mode: an unrelated release did not complete while a remap waited for its own "
                         "release (" << xmc_status_string(st) << "): the one worker is held by the waiting remap";
        return leak();
    }
    gate->release();
    if (xmc_status st = v.wait(rem_a, 5000); st != XMC_OK) {
        ADD_FAILURE() << "serial mode: the remap did not complete within 5 s of its release being queued ("
                      << xmc_status_string(st) << " " << v.error() << "): deadlock on the one worker";
        return leak();
    }
    EXPECT_TRUE(holds(v.read(ia), 181));
}

TEST_P(VmmTest, VMM_SERIAL_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, Check, Release, Remap, ReleaseBatch, RemapBatch, Launch, Wait, Wait,
                 Adopt, Adopt, Destroy, Close, Query, CheckMemory>(kOneStream, GetParam(), "vmm_workers=1");
}

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


// ---- VMM-UNMAPPED-FAULTS: copies through the backend ------------------------

// A copy that names a released slot's range is refused before anything is
// enqueued (cuMemcpyAsync into one crashed the H200's driver, SIGSEGV; the
// host's memcpy faults), and the stream takes the next copy as before.
TEST_P(VmmTest, VMM_UNMAPPED_FAULTS_CopyIntoReleasedSlotIsRefused) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 261);
    ASSERT_NE(r.slot, nullptr);
    std::vector<char> data = pattern(262, r.info.size);
    xmc_copy_desc d = Env::linear(data.data(), XMC_MEM_HOST, r.info.address, XMC_MEM_DEVICE, r.info.size);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->copy(v.inst, &d, v.io), "copy")) << "a copy into the whole slot";
    // One byte at its end: any overlap is refused.
    d = Env::linear(data.data(), XMC_MEM_HOST, static_cast<char *>(r.info.address) + r.info.size - 1,
                    XMC_MEM_DEVICE, 1);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->copy(v.inst, &d, v.io), "copy")) << "a copy into its last byte";
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    // Remapped, the same copies on the same stream go through.
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &q)));
    ASSERT_TRUE(v.ok(v.wait(q)));
    ASSERT_TRUE(v.write(r.info, 263));
    EXPECT_TRUE(holds(v.read(r.info), 263));
}

TEST_P(VmmTest, VMM_UNMAPPED_FAULTS_CopyFromReleasedSlotIsRefused) {
    Env &v = e();
    auto r = v.released_slot_with_source(1, 271);
    ASSERT_NE(r.slot, nullptr);
    std::vector<char> got(r.info.size, kPoison);
    xmc_copy_desc d = Env::linear(r.info.address, XMC_MEM_DEVICE, got.data(), XMC_MEM_HOST, r.info.size);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->copy(v.inst, &d, v.io), "copy"));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    EXPECT_EQ(got, std::vector<char>(r.info.size, kPoison)) << "a refused copy wrote its destination";
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, r.source, r.info.size, 0, &q)));
    ASSERT_TRUE(v.ok(v.wait(q)));
    EXPECT_TRUE(holds(v.read(r.info), 271));
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


// ---- the fault sweep of slots (VMM-CREATE, VMM-ASYNC-ERROR, VMM-DEFERRED, ---------
// ---- VMM-BATCH-PARTIAL, VMM-CLOSE; VMM-ERROR-CLEAR in every run) ---------------------

// One run of the slot scenario (fault_sweep.hpp): three slots, A and B for the single and
// batch requests, C closed with its reload copy in flight; the instance closed with a release
// of A pending. A phase's steps are named "<phase> <call>"; each test sweeps its phases. Calls a
// slot worker makes count in the step the clean run saw them in. After a reported fault every
// slot must be where the slot model puts it (a failed release leaves it mapped with its bytes,
// a failed remap rolls back to released; in a batch, the slot named by "(batch index i)" so,
// each other one mapped or released, never half), and the next requests on the same slots and
// stream must succeed (VMM-ERROR-CLEAR): the run goes on through every later phase.
class SlotSweep {
public:
    explicit SlotSweep(Run &r) : r_(r), api_(r.api) {}

    void run() {
        if (!r_.inst) return;
        if (create() && setup()) {
            phases();
            in_flight();
        }
        // With A's release pending (in_flight), and whatever a failure left. The pinned sources go
        // with the last instance (PIN-CLOSE), after close has waited for the copies that read them.
        r_.close();
    }

private:
    struct Slot {
        xmc_slot *h = nullptr;
        xmc_slot_info info{};
        int tag = kNoTag;  // the bytes it holds while mapped (kNoTag: released)
    };

    bool create() {
        for (int k = 0; k < 3; ++k) {
            r_.step("create slot_create");
            const size_t before = r_.env().control->objects_besides_contexts();
            Slot x;
            if (!r_.ok(api_->slot_create(r_.inst, 0, 1, &x.h, &x.info), "slot_create")) {
                // VMM-CREATE: a failed create leaves nothing: no reservation, no memory, no mapping.
                r_.check(r_.env().control->objects_besides_contexts() == before,
                         "the failed slot_create left driver objects behind:\n" + r_.env().control->ledger_text());
                return false;
            }
            r_.check(x.info.address != nullptr && x.info.size >= 1, "slot_create answered OK with no slot");
            slots_.push_back(x);
        }
        return true;
    }

    // The stream, the sources (one pinned block per tag) and A's and B's first bytes.
    bool setup() {
        r_.step("setup stream_create");
        if (!r_.ok(api_->stream_create(r_.inst, 0, &s_), "stream_create")) return false;
        for (int t = 1; t <= kTags; ++t) {
            r_.step("setup pin_alloc");
            xmc_pin_result pr{};
            if (!r_.ok(api_->pin_alloc(r_.inst, size(), 64, XMC_NO_DEVICE, &pr), "pin_alloc")) return false;
            pinned_.push_back(pr.base);
            fill(static_cast<char *>(pr.base), size(), t);
        }
        xmc_pin_result pr{};
        const int32_t dev = (api_->capabilities & XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
        r_.step("setup pin_alloc");
        if (!r_.ok(api_->pin_alloc(r_.inst, size(), 64, dev, &pr), "pin_alloc")) return false;
        pinned_.push_back(pr.base);
        readback_ = static_cast<char *>(pr.base);
        for (int k = 0; k < 2; ++k)
            if (!write(k, 1 + k)) return false;
        return true;
    }

    void phases() {
        // Each phase leaves every slot it used as it found it: A and B mapped.
        release("release", {0});
        if (stuck()) return;
        remap("remap", {0}, 3, false);
        if (stuck()) return;
        release("deferred", {0});
        if (stuck()) return;
        remap("deferred", {0}, 4, true);
        if (stuck()) return;
        release("batch", {0, 1});
        if (stuck()) return;
        remap("batch", {0, 1}, 5, false);
    }

    // VMM-CLOSE: C is closed with its reload copy in flight, then the instance with A's release
    // pending. Whatever fails, nothing may be left in the driver.
    void in_flight() {
        if (stuck()) return;
        release("close", {2});
        if (stuck()) return;
        xmc_request *q = nullptr;
        r_.step("close slot_remap");
        if (r_.ok(api_->slot_remap(r_.inst, slots_[2].h, s_, source(7), size(), 0, &q), "slot_remap"))
            slots_[2].tag = 7;
        r_.step("close slot_close");
        if (!r_.ok(api_->slot_close(r_.inst, slots_[2].h), "slot_close")) {
            // A failed close changes nothing: the slot is still open, and a second close closes it.
            r_.must_succeed(api_->slot_close(r_.inst, slots_[2].h), "slot_close", "the retry of a failed close");
        }
        if (q) {
            r_.step("close request_destroy");
            r_.ok(api_->request_destroy(r_.inst, q), "request_destroy");
        }
        r_.step("close slot_release");
        xmc_request *rel = nullptr;
        r_.ok(api_->slot_release(r_.inst, slots_[0].h, s_, &rel), "slot_release");
    }

    static constexpr int kTags = 7;  // 1, 2: A's and B's first bytes; 3..7: the remaps'
    size_t size() const { return slots_.front().info.size; }
    void *source(int tag) const { return pinned_[static_cast<size_t>(tag - 1)]; }
    // A check failed: the later phases would only repeat it.
    bool stuck() const { return !r_.problems.empty(); }

    // Slot k gets tag's bytes (a copy on s).
    bool write(int k, int tag) {
        r_.step("setup copy");
        const xmc_copy_desc d = Env::linear(source(tag), XMC_MEM_PINNED, slots_[size_t(k)].info.address,
                                            XMC_MEM_DEVICE, size());
        if (!r_.ok(api_->copy(r_.inst, &d, s_), "copy")) return false;
        r_.step("setup stream_synchronize");
        if (!r_.ok(api_->stream_synchronize(r_.inst, s_), "stream_synchronize")) return false;
        slots_[size_t(k)].tag = tag;
        return true;
    }

    // Reads slot k: XMC_OK and its bytes compared with its tag's; XMC_ERR_BUSY when it has no
    // memory mapped (the copy is refused before anything is enqueued); another status when the
    // fault met the read (reported through ok()).
    xmc_status read(int k, const char *why) {
        Slot &x = slots_[size_t(k)];
        r_.step("check copy");
        std::memset(readback_, kPoison, size());
        const xmc_copy_desc d = Env::linear(x.info.address, XMC_MEM_DEVICE, readback_, XMC_MEM_PINNED, size());
        const xmc_status st = api_->copy(r_.inst, &d, s_);
        if (st == XMC_ERR_BUSY) return st;
        if (!r_.ok(st, "copy")) return st;
        r_.step("check stream_synchronize");
        if (const xmc_status w = api_->stream_synchronize(r_.inst, s_); !r_.ok(w, "stream_synchronize")) return w;
        const std::vector<char> got(readback_, readback_ + size());
        if (x.tag != kNoTag && mismatch(got, x.tag) != SIZE_MAX)
            r_.problem(std::string("slot ") + "ABC"[k] + " does not hold the bytes it must (" + why + "): " +
                       holds(got, x.tag).message());
        return XMC_OK;
    }
    // Slot k is mapped and holds its bytes, as the model says.
    void expect_mapped(int k, const char *why) {
        const xmc_status st = read(k, why);
        if (st == XMC_ERR_BUSY) r_.problem(std::string("slot ") + "ABC"[k] + " has no memory mapped (" + why + ")");
    }

    // Waits for q; true when it succeeded. A failure is the fault, reported by request_wait with
    // the driver's code, and by request_query alike (VMM-ASYNC-ERROR).
    bool wait(const std::string &phase, xmc_request *q, std::string *message = nullptr) {
        r_.step(phase + " request_wait");
        const xmc_status st = api_->request_wait(r_.inst, q, kWaitMs);
        if (st == XMC_OK) return true;
        xmc_error_info e{};
        api_->last_error(r_.inst, &e);
        if (message) *message = e.message;
        r_.ok(st, "request_wait");
        xmc_request_info i{};
        if (api_->request_query(r_.inst, q, &i) != XMC_OK) {
            r_.problem("request_query of the failed request failed");
        } else if (i.done != 1 || i.status != st || i.native_code != r_.code()) {
            r_.problem("request_query says done " + std::to_string(i.done) + ", status " +
                       xmc_status_string(i.status) + ", native " + std::to_string(i.native_code) +
                       " of a request whose wait failed with " + xmc_status_string(st) + " and native " +
                       std::to_string(e.native_code));
        }
        return false;
    }
    void destroy(const std::string &phase, xmc_request *q) {
        r_.step(phase + " request_destroy");
        r_.ok(api_->request_destroy(r_.inst, q), "request_destroy");
    }
    // The slot index a batch's failure names ("(batch index i)"); 0 for one slot.
    size_t failed_at(const std::string &message, size_t n) {
        if (n == 1) return 0;
        const size_t at = message.find("(batch index ");
        if (at == std::string::npos) {
            r_.problem("VMM-BATCH-PARTIAL: the failure does not name the slot it failed at: " + message);
            return n;
        }
        const size_t i = std::strtoul(message.c_str() + at + 13, nullptr, 10);
        if (i >= n) r_.problem("VMM-BATCH-PARTIAL: the failure names batch index " + std::to_string(i) + " of " +
                               std::to_string(n) + ": " + message);
        return i;
    }

    std::vector<xmc_slot *> handles(const std::vector<int> &which) const {
        std::vector<xmc_slot *> h;
        for (int k : which) h.push_back(slots_[size_t(k)].h);
        return h;
    }
    xmc_status submit_release(const std::vector<int> &which, xmc_request **q) {
        if (which.size() == 1) return api_->slot_release(r_.inst, slots_[size_t(which[0])].h, s_, q);
        const std::vector<xmc_slot *> h = handles(which);
        return api_->slot_release_batch(r_.inst, h.data(), h.size(), s_, q);
    }
    xmc_status submit_remap(const std::vector<int> &which, int tag, uint32_t flags, xmc_request **q) {
        if (which.size() == 1)
            return api_->slot_remap(r_.inst, slots_[size_t(which[0])].h, s_, source(tag), size(), flags, q);
        const std::vector<xmc_slot *> h = handles(which);
        std::vector<const void *> src;
        std::vector<size_t> n;
        for (size_t i = 0; i < which.size(); ++i) src.push_back(source(tag + int(i))), n.push_back(size());
        return api_->slot_remap_batch(r_.inst, h.data(), h.size(), s_, src.data(), n.data(), flags, q);
    }

    // After the fault: a request that must succeed (VMM-ERROR-CLEAR), waited for and destroyed.
    void release_again(int k, const char *why) {
        xmc_request *q = nullptr;
        r_.must_succeed(api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &q), "slot_release", why);
        if (!q) return;
        r_.must_succeed(api_->request_wait(r_.inst, q, kWaitMs), "request_wait", why);
        r_.must_succeed(api_->request_destroy(r_.inst, q), "request_destroy", why);
        slots_[size_t(k)].tag = kNoTag;
    }
    void remap_again(int k, int tag, const char *why) {
        xmc_request *q = nullptr;
        r_.must_succeed(api_->slot_remap(r_.inst, slots_[size_t(k)].h, s_, source(tag), size(), 0, &q), "slot_remap",
                        why);
        if (!q) return;
        r_.must_succeed(api_->request_wait(r_.inst, q, kWaitMs), "request_wait", why);
        r_.must_succeed(api_->request_adopt(r_.inst, q), "request_adopt", why);
        r_.must_succeed(api_->request_destroy(r_.inst, q), "request_destroy", why);
        slots_[size_t(k)].tag = tag;
        expect_mapped(k, why);
    }

    // Releases `which` (one slot, or a batch) on s and waits. Every slot of it ends released.
    void release(const std::string &phase, const std::vector<int> &which) {
        const char *call = which.size() == 1 ? "slot_release" : "slot_release_batch";
        const char *again = "VMM-ERROR-CLEAR: the next release on the slot and stream after the failed one";
        xmc_request *q = nullptr;
        r_.step(phase + " " + call);
        if (!r_.ok(submit_release(which, &q), call)) {
            // Refused before any change: every slot still mapped with its bytes.
            for (int k : which) {
                expect_mapped(k, "a refused release changes nothing");
                release_again(k, again);
            }
            return;
        }
        std::string message;
        const bool done = wait(phase, q, &message);
        destroy(phase, q);
        if (done) {
            for (int k : which) slots_[size_t(k)].tag = kNoTag;
            return;
        }
        // VMM-ASYNC-ERROR, VMM-BATCH-PARTIAL: the slot it failed at is mapped with its bytes; each
        // other one is released or mapped with its bytes, never half.
        const size_t at = failed_at(message, which.size());
        for (size_t i = 0; i < which.size(); ++i) {
            const int k = which[i];
            const xmc_status st = read(k, "a failed release leaves the slot mapped with its bytes");
            if (st == XMC_ERR_BUSY && i != at) {
                slots_[size_t(k)].tag = kNoTag;  // released by the batch
                xmc_request *p = nullptr;
                r_.refused_as(XMC_ERR_BUSY, api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &p), "slot_release",
                              "a slot with no memory mapped is released: a second release is refused");
                continue;
            }
            if (st == XMC_ERR_BUSY)
                r_.problem(std::string("slot ") + "ABC"[k] + ", whose release failed, has no memory mapped");
            release_again(k, again);
        }
    }

    // Remaps `which` from the sources of tag, tag + 1, ... (deferred: each copy launched), waits,
    // adopts, destroys. Every slot of it ends mapped with its source's bytes.
    void remap(const std::string &phase, const std::vector<int> &which, int tag, bool defer) {
        const char *call = which.size() == 1 ? "slot_remap" : "slot_remap_batch";
        const char *again = "VMM-ERROR-CLEAR: the next remap on the slot and stream after the failed one";
        xmc_request *q = nullptr;
        r_.step(phase + " " + call);
        if (!r_.ok(submit_remap(which, tag, defer ? XMC_REMAP_DEFER_COPY : 0, &q), call)) {
            for (size_t i = 0; i < which.size(); ++i) remap_again(which[i], tag + int(i), again);
            return;
        }
        bool failed = false;
        for (uint32_t i = 0; defer && !failed && i < which.size(); ++i) {
            r_.step(phase + " request_launch_copy");
            const xmc_status st = api_->request_launch_copy(r_.inst, q, i, s_);
            xmc_request_info info{};
            if (st == XMC_ERR_BUSY && api_->request_query(r_.inst, q, &info) == XMC_OK && info.done &&
                info.status != XMC_OK) {
                failed = true;  // the remap failed: nothing to copy into; request_wait reports it
            } else if (!r_.ok(st, "request_launch_copy")) {
                r_.must_succeed(api_->request_launch_copy(r_.inst, q, i, s_), "request_launch_copy",
                                "VMM-ERROR-CLEAR: the launch after a failed launch of the same copy");
            }
        }
        std::string message;
        if (wait(phase, q, &message)) {
            r_.step(phase + " request_adopt");
            if (r_.ok(api_->request_adopt(r_.inst, q), "request_adopt")) {
                destroy(phase, q);
                for (size_t i = 0; i < which.size(); ++i) {
                    slots_[size_t(which[i])].tag = tag + int(i);
                    expect_mapped(which[i], "after the remap and its copy");
                }
                return;
            }
            // An adopt that failed leaves the mapping with the request: destroying it rolls back.
            destroy(phase, q);
        } else {
            // VMM-ASYNC-ERROR: a failed remap has nothing to adopt, and its mappings are rolled back.
            r_.refused_as(XMC_ERR_BUSY, api_->request_adopt(r_.inst, q), "request_adopt",
                          "a failed remap has nothing to adopt");
            destroy(phase, q);
        }
        failed_at(message, which.size());
        for (size_t i = 0; i < which.size(); ++i) {
            const int k = which[i];
            slots_[size_t(k)].tag = kNoTag;
            xmc_request *p = nullptr;
            const xmc_status st = api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &p);
            if (st != XMC_ERR_BUSY) {
                r_.problem(std::string("slot ") + "ABC"[k] + ": the failed remap's mapping was not rolled back " +
                           "(a release of it was answered " + xmc_status_string(st) + ", not busy)");
                if (p) {
                    api_->request_wait(r_.inst, p, kWaitMs);
                    api_->request_destroy(r_.inst, p);
                }
            }
            remap_again(k, tag + int(i), again);
        }
    }

    Run &r_;
    const xmc_backend *api_;
    xmc_stream *s_ = nullptr;
    std::vector<Slot> slots_;
    std::vector<void *> pinned_;  // the sources by tag, then the read-back buffer
    char *readback_ = nullptr;
};

void slot_scenario(Run &r) { SlotSweep(r).run(); }
// Serial mode (VMM-SERIAL): every driver call of a request is made by the one worker (with
// more, a request on an idle stream runs on the caller's thread).
const Scenario kSlots{"slots", slot_scenario, "vmm_workers=1"};

// Entry points whose number of calls depends on timing, on each fake (SweepOptions).
SweepOptions slot_sweep_options(const FakeHooks &h) {
    SweepOptions o;
    if (h.cuda) {
        const char *polls = "the watcher thread polls the events of stream points and reload copies until they "
                            "complete, and request_wait polls its request's copies for a while: how often depends on "
                            "when the fake's stream thread finishes them";
        o.timing_dependent = {{"cuEventQuery", polls},
                              {"cuCtxPushCurrent", std::string(polls) + " (each poll in the event's context)"},
                              {"cuCtxPopCurrent", std::string(polls) + " (each poll in the event's context)"}};
        // A request submitted while its stream still runs earlier work takes an event for its
        // stream point (from the spare events or new): whether it still runs depends on timing.
        const char *point = "a request submitted while its stream still runs earlier work records an event for "
                            "its stream point, one kept from an earlier point or a new one: whether the stream "
                            "still runs, and whether a spare event is there, depends on timing";
        for (const char *e : {"cuEventRecord", "cuEventCreate", "cuEventDestroy"}) o.timing_dependent[e] = point;
    } else {
        o.timing_dependent = {{"zeEventQueryStatus",
                               "the completion thread polls the reload copies' events until they complete: how "
                               "often depends on when the fake's command list runs them"}};
    }
    return o;
}

TEST_P(FaultSweep, VMM_CREATE_FaultSweepOfCreateLeavesNothingBehind) {
    sweep(kSlots, {"create"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_ASYNC_ERROR_FaultSweepOfReleaseAndRemapReportsOnTheRequestAndRollsBack) {
    sweep(kSlots, {"release", "remap"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_DEFERRED_FaultSweepOfADeferredRemapAndItsLaunchReportsAndRollsBack) {
    sweep(kSlots, {"deferred"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_BATCH_PARTIAL_FaultSweepOfBatchesLeavesEverySlotMappedOrReleased) {
    sweep(kSlots, {"batch"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_CLOSE_FaultSweepOfClosesWithWorkInFlightLeavesNothing) {
    sweep(kSlots, {"close"}, slot_sweep_options(hooks_));
}

} // namespace
} // namespace xmc::conformance
