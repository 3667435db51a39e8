// VMM-*: fixed-address slots (SPEC 5), one of five files (by requirement; each body runs on
// every selected backend): here the slot's own life: VMM-CREATE, VMM-STABLE, VMM-RELEASE-ORDER,
// VMM-UNMAPPED-FAULTS and VMM-REMAP-COPY. The fixed tests, the hostile inputs (HostileVmmTest)
// and the stateful properties, whose oracle is the slot model (reference/model/slot_model.hpp).
// How slot bytes and memory facts are observed, and how gates hold a stream: vmm_env.hpp; the
// stateful commands: vmm_commands.hpp. Each requirement's property names its mix of commands and
// the refusals it draws. The others: test_vmm_requests.cpp (requests and their states),
// test_vmm_errors.cpp (failures and waits), test_vmm_graph.cpp, test_vmm_fault_sweep.cpp.
#include "vmm_tests.hpp"

namespace xmc::conformance {
namespace {

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

} // namespace
} // namespace xmc::conformance
