// Hostile input at every entry point of the ABI (issue 7, SPEC 3): NULL
// results, handles and descriptors; zero, huge and overflowing sizes;
// misaligned addresses; handles never issued, already destroyed, of another
// instance or of a closed instance; wrong struct_size. Each input must be
// refused with its own status code, the refusal must name the call in
// last_error, and it must change nothing: pin_stats, reg_query, free device
// memory, slot and request states and the bytes of every buffer are compared
// before and after. One test per requirement the input belongs to.
//
// A NULL or closed instance has no instance to record the detail on, so those
// refusals are checked by status alone (docs/abi.md, "Instances").
#include "fixture.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace xmc::conformance {
namespace {

constexpr uint32_t kWaitMs = 10000;
constexpr int32_t kBadDevice = 1 << 20;  // no backend has this many devices

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// Addresses that were never handed out by anything: for handles they are
// only compared, never dereferenced, by a conforming backend.
template <class T> T *never_issued(uintptr_t v) { return reinterpret_cast<T *>(v); }

bool operator==(const xmc_pin_stats &a, const xmc_pin_stats &b) {
    return a.bytes_now == b.bytes_now && a.bytes_peak == b.bytes_peak && a.blocks_now == b.blocks_now;
}
bool operator==(const xmc_reg_info &a, const xmc_reg_info &b) {
    return a.registered == b.registered && a.base == b.base && a.size == b.size && a.device == b.device;
}
bool operator==(const xmc_request_info &a, const xmc_request_info &b) {
    return a.callback_fired == b.callback_fired && a.done == b.done && a.status == b.status &&
           a.native_code == b.native_code && a.slots == b.slots && a.copies_launched == b.copies_launched &&
           a.adopted == b.adopted;
}

class HostileTest : public BackendTest {
protected:
    void TearDown() override {
        for (auto &[p, n] : maps_) munmap(p, n);
        maps_.clear();
        BackendTest::TearDown();
    }

    int32_t devices() {
        int32_t n = 0;
        EXPECT_EQ(api->device_count(inst, &n), XMC_OK) << last_error();
        return n;
    }

    xmc_pin_stats pins() const {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK) << last_error();
        return s;
    }

    // Page-aligned anonymous memory, unmapped in TearDown.
    char *pages(size_t n) {
        void *p = mmap(nullptr, n * page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(p, MAP_FAILED);
        if (p == MAP_FAILED) return nullptr;
        maps_.emplace_back(p, n * page_size());
        std::memset(p, 0x5A, n * page_size());
        return static_cast<char *>(p);
    }

    // An instance of this backend that was opened and closed again.
    xmc_instance *closed_instance() {
        xmc_instance *other = nullptr;
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        EXPECT_EQ(api->open(&params, &other), XMC_OK);
        EXPECT_EQ(api->close(other), XMC_OK);
        return other;
    }

    // `call(i)` for a NULL instance and a closed one: invalid_handle, no crash.
    // NULL and closed instances: only the in-tree backends (and the self-test's
    // broken copies of them) define what happens (docs/abi.md, "Instances");
    // for any other backend it is a caller error, so it is not asked.
    bool in_tree() const {
        const std::string n = api->name;
        return n == "host" || n == "cuda" || n == "level_zero" || n.rfind("broken_", 0) == 0;
    }
    void expect_dead_instances_refused(const char *what, const std::function<xmc_status(xmc_instance *)> &call) {
        if (!in_tree()) return;
        xmc_instance *closed = closed_instance();
        EXPECT_EQ(call(nullptr), XMC_ERR_INVALID_HANDLE) << what << " with a NULL instance";
        EXPECT_EQ(call(closed), XMC_ERR_INVALID_HANDLE) << what << " with a closed instance";
    }

    std::vector<std::pair<void *, size_t>> maps_;
};

// ---- pinning ------------------------------------------------------------------

TEST_P(HostileTest, PIN_ALLOC_HostileSizesRefusedWithNothingChanged) {
    const size_t page = page_size();
    xmc_pin_stats before = pins();  // refreshed where a block may raise the peak
    xmc_pin_result r{};
    struct Case { const char *what; size_t bytes; size_t alignment; };
    const Case invalid[] = {
        {"size 0", 0, 64},
        {"size SIZE_MAX", SIZE_MAX, 64},
        {"size overflowing when rounded up to a page", SIZE_MAX - page + 2, 64},
        {"alignment 3", page, 3},
        {"alignment 0", page, 0},
        {"alignment page + 1", page, page + 1},
        {"alignment SIZE_MAX", page, SIZE_MAX},
        {"alignment 2^63 + 1", page, (size_t{1} << 63) + 1},
    };
    for (const Case &c : invalid) {
        r = xmc_pin_result{};
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_alloc(inst, c.bytes, c.alignment, XMC_NO_DEVICE, &r),
                           "pin_alloc") << c.what;
        EXPECT_EQ(r.base, nullptr) << c.what << ": a refusal returned a block";
        EXPECT_TRUE(pins() == before) << c.what << ": a refusal changed pin_stats";
    }
    // A NULL result: refused before anything is allocated (the block could
    // never be freed).
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_alloc(inst, page, 64, XMC_NO_DEVICE, nullptr), "pin_alloc");
    EXPECT_TRUE(pins() == before) << "pin_alloc with a NULL result leaked a block";
    // Huge but representable: the memory is not there (or may not be locked).
    r = xmc_pin_result{};
    const xmc_status huge = api->pin_alloc(inst, size_t{1} << 50, 64, XMC_NO_DEVICE, &r);
    EXPECT_TRUE(huge == XMC_ERR_OUT_OF_MEMORY || huge == XMC_ERR_MEMLOCK)
        << "pin_alloc of 1 PiB: expected out_of_memory or memlock_limit, got " << xmc_status_string(huge) << " "
        << last_error();
    if (huge == XMC_OK) {
        api->pin_free(inst, r.base);
    } else {
        EXPECT_TRUE(refused(huge, huge, "pin_alloc"));
    }
    EXPECT_TRUE(pins() == before) << "a refused 1 PiB pin_alloc changed pin_stats";
    // A device that cannot exist: no_device where devices can be asked for,
    // unsupported where the backend cannot register at all.
    const xmc_status want = has(XMC_CAP_PIN_REGISTER) ? XMC_ERR_NO_DEVICE : XMC_ERR_UNSUPPORTED;
    int32_t devices = 0;
    ASSERT_EQ(api->device_count(inst, &devices), XMC_OK) << last_error();
    for (int32_t dev : {kBadDevice, -7}) {
        r = xmc_pin_result{};
        if (dev >= 0 && devices == 0 && has(XMC_CAP_PIN_REGISTER)) {
            // No driver: a device it cannot tell from one it cannot reach.
            // Lock-only, and the result says so (PIN-DEVICE), or refused.
            const xmc_status st = api->pin_alloc(inst, page, 64, dev, &r);
            if (st == XMC_OK) {
                EXPECT_NE(r.reg_status, XMC_OK) << "device " << dev << " registered with no device present";
                EXPECT_EQ(api->pin_free(inst, r.base), XMC_OK) << last_error();
                // Nothing left behind; the peak may have risen with the block.
                const xmc_pin_stats now = pins();
                EXPECT_TRUE(now.bytes_now == before.bytes_now && now.blocks_now == before.blocks_now)
                    << "pin_alloc for device " << dev << " left a block behind";
                before = now;
            } else {
                EXPECT_TRUE(refused(XMC_ERR_NO_DEVICE, st, "pin_alloc")) << "device " << dev;
                EXPECT_TRUE(pins() == before) << "pin_alloc for device " << dev << " changed pin_stats";
            }
            continue;
        }
        XMC_EXPECT_REFUSED(want, api->pin_alloc(inst, page, 64, dev, &r), "pin_alloc") << "device " << dev;
        EXPECT_TRUE(pins() == before) << "pin_alloc for device " << dev << " changed pin_stats";
    }
    expect_dead_instances_refused("pin_alloc", [&](xmc_instance *i) {
        xmc_pin_result rr{};
        return api->pin_alloc(i, page, 64, XMC_NO_DEVICE, &rr);
    });
    EXPECT_TRUE(pins() == before);
}

TEST_P(HostileTest, PIN_FREE_HostileAddressesRefusedWithNothingChanged) {
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 3 * page_size(), 64, XMC_NO_DEVICE, &r));
    char *base = static_cast<char *>(r.base);
    const xmc_pin_stats before = pins();
    char local = 0;
    const std::pair<const char *, void *> bad[] = {
        {"NULL", nullptr},
        {"address 1", never_issued<void>(1)},
        {"the top of the address space", never_issued<void>(UINTPTR_MAX & ~uintptr_t{0xFFF})},
        {"a stack address", &local},
        {"base + 1 (misaligned interior)", base + 1},
        {"base + one page", base + page_size()},
        {"one past the end", base + r.size},
    };
    for (const auto &[what, addr] : bad) {
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, addr), "pin_free") << what;
        EXPECT_TRUE(pins() == before) << what << ": a refused free changed pin_stats";
        xmc_pin_info q{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_query(inst, base, r.size, &q));
        EXPECT_EQ(q.pinned, 1) << what << ": the block is no longer pinned after a refused free";
    }
    expect_dead_instances_refused("pin_free", [&](xmc_instance *i) { return api->pin_free(i, base); });
    EXPECT_TRUE(pins() == before) << "pin_free through a dead instance freed the block";
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, base));
    const xmc_pin_stats after = pins();
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, base), "pin_free") << "second free";
    EXPECT_TRUE(pins() == after) << "a second free changed pin_stats";
}

TEST_P(HostileTest, PIN_QUERY_HostileArgumentsAnsweredOrRefused) {
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, page_size(), 64, XMC_NO_DEVICE, &r));
    const xmc_pin_stats before = pins();
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_query(inst, r.base, 1, nullptr), "pin_query");
    // Extents that wrap the address space or leave the block are answered "not pinned".
    struct Case { const char *what; const void *addr; size_t len; };
    const Case notpinned[] = {
        {"NULL", nullptr, 0},
        {"the last byte of the address space", never_issued<void>(UINTPTR_MAX), 1},
        {"a base with length SIZE_MAX (wraps)", r.base, SIZE_MAX},
        {"the top of the address space, wrapping", never_issued<void>(UINTPTR_MAX - 10), 100},
        {"the block plus one byte", r.base, r.size + 1},
    };
    for (const Case &c : notpinned) {
        xmc_pin_info q{1, never_issued<void>(1), 1};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_query(inst, c.addr, c.len, &q)) << c.what;
        EXPECT_EQ(q.pinned, 0) << c.what;
    }
    expect_dead_instances_refused("pin_query", [&](xmc_instance *i) {
        xmc_pin_info q{};
        return api->pin_query(i, r.base, 1, &q);
    });
    EXPECT_TRUE(pins() == before);
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

TEST_P(HostileTest, PIN_ACCOUNT_StatsRefusesNullResultAndDeadInstances) {
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_stats(inst, nullptr), "pin_stats");
    expect_dead_instances_refused("pin_stats", [&](xmc_instance *i) {
        xmc_pin_stats s{};
        return api->pin_stats(i, &s);
    });
}

TEST_P(HostileTest, PIN_REFS_HostileAddressesRefusedWithNothingChanged) {
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, page_size(), 64, XMC_NO_DEVICE, &r));
    const xmc_pin_stats before = pins();
    char local = 0;
    for (const void *addr : {static_cast<const void *>(nullptr), static_cast<const void *>(&local),
                             static_cast<const void *>(static_cast<char *>(r.base) + r.size),
                             static_cast<const void *>(never_issued<void>(UINTPTR_MAX))}) {
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_ref(inst, addr), "pin_ref") << addr;
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_unref(inst, addr), "pin_unref") << addr;
    }
    // An unref with no reference taken would drop the owner's.
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_unref(inst, r.base), "pin_unref");
    expect_dead_instances_refused("pin_ref", [&](xmc_instance *i) { return api->pin_ref(i, r.base); });
    expect_dead_instances_refused("pin_unref", [&](xmc_instance *i) { return api->pin_unref(i, r.base); });
    EXPECT_TRUE(pins() == before);
    // The owner reference is intact: one free releases the block.
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    xmc_pin_info q{};
    XMC_EXPECT_STATUS(XMC_OK, api->pin_query(inst, r.base, 1, &q));
    EXPECT_EQ(q.pinned, 0) << "refused refs left a reference behind";
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_ref(inst, r.base), "pin_ref") << "after free";
}

// ---- registration -------------------------------------------------------------

class HostileRegTest : public HostileTest {
protected:
    void SetUp() override {
        HostileTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        if (devices() == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    }
    xmc_reg_info query(const void *addr) {
        xmc_reg_info q{};
        EXPECT_EQ(api->reg_query(inst, addr, &q), XMC_OK) << last_error();
        return q;
    }
};

TEST_P(HostileRegTest, REG_FAIL_HostileArgumentsRefusedLeaveNothingBehind) {
    const size_t page = page_size();
    char *mem = pages(4);
    ASSERT_NE(mem, nullptr);
    const xmc_reg_info unreg = query(mem);
    ASSERT_EQ(unreg.registered, 0);
    const xmc_pin_stats pins_before = has(XMC_CAP_PIN) ? pins() : xmc_pin_stats{};
    xmc_reg_info out{};
    struct Case { const char *what; xmc_status want; void *addr; size_t bytes; int32_t device; uint32_t flags; };
    const Case cases[] = {
        {"NULL address", XMC_ERR_INVALID_ARGUMENT, nullptr, page, 0, 0},
        {"size 0", XMC_ERR_INVALID_ARGUMENT, mem, 0, 0, 0},
        {"unknown flags", XMC_ERR_INVALID_ARGUMENT, mem, page, 0, 0x80000000u},
        {"device out of range", XMC_ERR_NO_DEVICE, mem, page, kBadDevice, 0},
        {"negative device", XMC_ERR_NO_DEVICE, mem, page, -3, 0},
    };
    for (const Case &c : cases) {
        out = xmc_reg_info{};
        XMC_EXPECT_REFUSED(c.want, api->reg_register(inst, c.addr, c.bytes, c.device, c.flags, &out), "reg_register")
            << c.what;
        EXPECT_EQ(out.registered, 0) << c.what;
        EXPECT_TRUE(query(mem) == unreg) << c.what << ": a refused registration left a range behind";
    }
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, mem, page, 0, 0, nullptr), "reg_register")
        << "NULL result";
    EXPECT_TRUE(query(mem) == unreg) << "a registration with a NULL result was kept";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_query(inst, mem, nullptr), "reg_query");
    expect_dead_instances_refused("reg_register", [&](xmc_instance *i) {
        xmc_reg_info o{};
        return api->reg_register(i, mem, page, 0, 0, &o);
    });
    expect_dead_instances_refused("reg_query", [&](xmc_instance *i) {
        xmc_reg_info o{};
        return api->reg_query(i, mem, &o);
    });
    EXPECT_TRUE(query(mem) == unreg);
    if (has(XMC_CAP_PIN)) { EXPECT_TRUE(pins() == pins_before) << "a refused registration changed pin_stats"; }
}

TEST_P(HostileRegTest, REG_ALIGN_MisalignedAndOverflowingRangesRefused) {
    const size_t page = page_size();
    char *mem = pages(4);
    ASSERT_NE(mem, nullptr);
    const xmc_reg_info unreg = query(mem);
    // Whatever the policy: a range that wraps the address space, or whose
    // rounding out to pages would, is invalid.
    struct Case { const char *what; void *addr; size_t bytes; };
    std::vector<Case> cases = {
        {"size SIZE_MAX", mem, SIZE_MAX},
        {"page-multiple size wrapping the address space", mem, SIZE_MAX - page + 1},
        {"size overflowing when rounded up to a page", mem + 1, SIZE_MAX - page + 2},
        {"range ending past the top of the address space", never_issued<void>(UINTPTR_MAX & ~uintptr_t(page - 1)),
         2 * page},
    };
    if (api->reg_align_policy(inst) == XMC_REG_ALIGN_REFUSE) {
        cases.push_back({"misaligned address", mem + 1, page});
        cases.push_back({"misaligned size", mem, page + 1});
        cases.push_back({"misaligned address and size", mem + 8, 8});
    }
    for (const Case &c : cases) {
        xmc_reg_info out{};
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, c.addr, c.bytes, 0, 0, &out),
                           "reg_register")
            << c.what;
        EXPECT_EQ(out.registered, 0) << c.what;
        EXPECT_TRUE(query(mem) == unreg) << c.what << ": a refused registration left a range behind";
    }
}

TEST_P(HostileRegTest, REG_UNREG_BASE_HostileBasesRefusedRegistrationKept) {
    const size_t page = page_size();
    char *mem = pages(4);
    ASSERT_NE(mem, nullptr);
    xmc_reg_info reg{};
    XMC_ASSERT_STATUS(XMC_OK, api->reg_register(inst, mem, 2 * page, 0, 0, &reg));
    const xmc_reg_info before = query(mem);
    ASSERT_EQ(before.registered, 1);
    char local = 0;
    const std::pair<const char *, void *> bad[] = {
        {"NULL", nullptr},
        {"a stack address", &local},
        {"base + 1", static_cast<char *>(reg.base) + 1},
        {"interior page", static_cast<char *>(reg.base) + page},
        {"one past the end", static_cast<char *>(reg.base) + reg.size},
        {"the top of the address space", never_issued<void>(UINTPTR_MAX)},
    };
    for (const auto &[what, addr] : bad) {
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, addr), "reg_unregister") << what;
        EXPECT_TRUE(query(mem) == before) << what << ": a refused unregister changed the registration";
    }
    expect_dead_instances_refused("reg_unregister", [&](xmc_instance *i) { return api->reg_unregister(i, reg.base); });
    EXPECT_TRUE(query(mem) == before) << "unregister through a dead instance removed the registration";
    XMC_ASSERT_STATUS(XMC_OK, api->reg_unregister(inst, reg.base));
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, reg.base), "reg_unregister")
        << "second unregister";
    EXPECT_EQ(query(mem).registered, 0);
}

// ---- streams, events, device memory (capability stream) -------------------------

class HostileStreamTest : public HostileTest {
protected:
    void SetUp() override {
        HostileTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        if (devices() == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    }
};

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

// ---- copies ---------------------------------------------------------------------

class HostileCopyTest : public HostileStreamTest {
protected:
    void SetUp() override {
        HostileStreamTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &stream_));
    }
    void TearDown() override {
        if (stream_) { EXPECT_EQ(api->stream_destroy(inst, stream_), XMC_OK) << last_error(); }
        stream_ = nullptr;
        HostileStreamTest::TearDown();
    }
    xmc_stream *stream_ = nullptr;
};

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

// ---- slots (capability vmm) -------------------------------------------------------

class HostileVmmTest : public HostileStreamTest {
protected:
    void SetUp() override {
        HostileStreamTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &stream_));
    }
    void TearDown() override {
        if (stream_) {
            api->stream_synchronize(inst, stream_);
            for (auto *r : requests_) api->request_destroy(inst, r);
            for (auto *s : slots_) api->slot_close(inst, s);
            EXPECT_EQ(api->stream_destroy(inst, stream_), XMC_OK) << last_error();
        }
        requests_.clear();
        slots_.clear();
        stream_ = nullptr;
        HostileStreamTest::TearDown();
    }
    xmc_slot *slot(size_t bytes, xmc_slot_info *info) {
        xmc_slot *s = nullptr;
        EXPECT_EQ(api->slot_create(inst, 0, bytes, &s, info), XMC_OK) << last_error();
        if (s) slots_.push_back(s);
        return s;
    }
    uint64_t free_memory() {
        uint64_t f = 0, t = 0;
        EXPECT_EQ(api->device_free_memory(inst, 0, &f, &t), XMC_OK) << last_error();
        return f;
    }
    xmc_request_info info(xmc_request *r) {
        xmc_request_info i{};
        EXPECT_EQ(api->request_query(inst, r, &i), XMC_OK) << last_error();
        return i;
    }
    xmc_stream *stream_ = nullptr;
    std::vector<xmc_slot *> slots_;
    std::vector<xmc_request *> requests_;
};

TEST_P(HostileVmmTest, VMM_CREATE_HostileSizesRefusedWithNothingChanged) {
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

TEST_P(HostileVmmTest, VMM_STATE_HostileSlotAndRequestHandlesRefusedWithNothingChanged) {
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
    const xmc_request_info rel_before = info(rel);
    const uint64_t free_before = free_memory();

    const std::pair<const char *, xmc_slot *> bad_slots[] = {
        {"NULL", nullptr}, {"never issued", never_issued<xmc_slot>(0x4000)}, {"closed", gone},
        {"of another instance", foreign},
    };
    xmc_pin_result src{};
    const bool pin = has(XMC_CAP_PIN);
    if (pin) { XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, si.size, 64, XMC_NO_DEVICE, &src)); }
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
    xmc_stream *gone_s = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &gone_s));
    XMC_ASSERT_STATUS(XMC_OK, api->stream_destroy(inst, gone_s));
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

TEST_P(HostileVmmTest, VMM_BATCH_HostileBatchesRefusedBeforeAnyChange) {
    xmc_slot_info si{};
    xmc_slot *a = slot(4096, &si);
    xmc_slot *b = slot(4096, &si);
    ASSERT_TRUE(a && b);
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

// ---- transfer ---------------------------------------------------------------------

// A group of one: every collective is a copy.
int solo_send(void *, int32_t, const void *, size_t, uint64_t) { return XMC_ERR_INVALID_ARGUMENT; }
int solo_recv(void *, int32_t, void *, size_t, uint64_t) { return XMC_ERR_INVALID_ARGUMENT; }
int solo_all_gather(void *, const void *in, void *out, size_t bytes, uint32_t) {
    std::memcpy(out, in, bytes);
    return 0;
}

TEST_P(HostileTest, AFF_REFUSE_BEFORE_WRITE_HostileArgumentsRefusedNothingWritten) {
    constexpr int64_t kN = 16;
    std::vector<int32_t> src(kN), tgt(kN, -1);
    for (int64_t i = 0; i < kN; ++i) src[size_t(i)] = int32_t(i);
    const std::vector<int32_t> tgt_before = tgt;
    xmc_segment seg{};
    seg.src_rank = seg.tgt_rank = 0;
    seg.ndim = 1;
    seg.extents[0] = kN;
    seg.src_strides[0] = seg.tgt_strides[0] = 1;
    auto buffer = [&](void *p) {
        xmc_shard_buffer b{};
        b.ptr = p;
        b.kind = XMC_MEM_HOST;
        b.capacity = kN;
        b.ndim = 1;
        b.shape[0] = kN;
        b.strides[0] = 1;
        return b;
    };
    const int32_t ranks[] = {0};
    const xmc_transport tp{nullptr, solo_send, solo_recv, solo_all_gather, "solo"};
    const xmc_group group{0, 1, ranks, &tp, 5000};
    xmc_transfer_args good{};
    good.struct_size = sizeof good;
    good.plan = xmc_plan_view{&seg, 1, 0};
    good.source = buffer(src.data());
    good.target = buffer(tgt.data());
    good.elem_size = sizeof(int32_t);
    good.staging_budget = 1 << 20;
    good.group = &group;

    xmc_transfer_stats stats{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, nullptr, &stats), "transfer_execute")
        << "NULL args";
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, &good, nullptr), "transfer_execute")
        << "NULL stats";
    const int32_t dup_ranks[] = {0, 0};
    const int32_t neg_ranks[] = {-1};
    const xmc_transport no_gather{nullptr, solo_send, solo_recv, nullptr, "no-gather"};
    struct Case { const char *what; std::function<void(xmc_transfer_args &, xmc_group &)> edit; };
    const Case cases[] = {
        {"struct_size 0", [](xmc_transfer_args &a, xmc_group &) { a.struct_size = 0; }},
        {"struct_size one byte short",
         [](xmc_transfer_args &a, xmc_group &) { a.struct_size = sizeof(xmc_transfer_args) - 1; }},
        {"struct_size of the first member only",
         [](xmc_transfer_args &a, xmc_group &) { a.struct_size = sizeof(uint32_t); }},
        {"NULL group", [](xmc_transfer_args &a, xmc_group &) { a.group = nullptr; }},
        {"group size 0", [](xmc_transfer_args &, xmc_group &g) { g.size = 0; }},
        {"group size -1", [](xmc_transfer_args &, xmc_group &g) { g.size = -1; }},
        {"my_index -1", [](xmc_transfer_args &, xmc_group &g) { g.my_index = -1; }},
        {"my_index == size", [](xmc_transfer_args &, xmc_group &g) { g.my_index = 1; }},
        {"NULL ranks", [](xmc_transfer_args &, xmc_group &g) { g.ranks = nullptr; }},
        {"negative rank label", [&](xmc_transfer_args &, xmc_group &g) { g.ranks = neg_ranks; }},
        {"duplicate rank labels", [&](xmc_transfer_args &, xmc_group &g) { g.ranks = dup_ranks; g.size = 2; }},
        {"NULL transport", [](xmc_transfer_args &, xmc_group &g) { g.transport = nullptr; }},
        {"transport without all_gather", [&](xmc_transfer_args &, xmc_group &g) { g.transport = &no_gather; }},
        {"timeout 0", [](xmc_transfer_args &, xmc_group &g) { g.timeout_ms = 0; }},
    };
    for (const Case &c : cases) {
        xmc_transfer_args a = good;
        xmc_group g = group;
        a.group = &g;
        c.edit(a, g);
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->transfer_execute(inst, &a, &stats), "transfer_execute")
            << c.what;
        EXPECT_TRUE(tgt == tgt_before) << c.what << ": a refused transfer wrote the target";
    }
    // Requests a group of one can agree on, but that are invalid: refused, nothing written.
    const Case refused_cases[] = {
        {"element size 0", [](xmc_transfer_args &a, xmc_group &) { a.elem_size = 0; }},
        {"NULL plan with segments", [](xmc_transfer_args &a, xmc_group &) { a.plan.segments = nullptr; }},
        {"target capacity too small", [](xmc_transfer_args &a, xmc_group &) { a.target.capacity = kN - 1; }},
        {"segment extent past the source", [](xmc_transfer_args &a, xmc_group &) { a.source.shape[0] = kN / 2; }},
        {"NULL target buffer", [](xmc_transfer_args &a, xmc_group &) { a.target.ptr = nullptr; }},
        {"ndim above XMC_MAX_DIMS", [](xmc_transfer_args &a, xmc_group &) { a.target.ndim = XMC_MAX_DIMS + 1; }},
    };
    for (const Case &c : refused_cases) {
        xmc_transfer_args a = good;
        xmc_group g = group;
        a.group = &g;
        c.edit(a, g);
        const xmc_status st = api->transfer_execute(inst, &a, &stats);
        EXPECT_TRUE(st == XMC_ERR_REFUSED || st == XMC_ERR_INVALID_ARGUMENT)
            << c.what << ": expected refused, got " << xmc_status_string(st) << " " << last_error();
        if (st != XMC_OK) { EXPECT_TRUE(refused(st, st, "transfer_execute")) << c.what; }
        EXPECT_TRUE(tgt == tgt_before) << c.what << ": a refused transfer wrote the target";
    }
    expect_dead_instances_refused("transfer_execute", [&](xmc_instance *i) {
        return api->transfer_execute(i, &good, &stats);
    });
    EXPECT_TRUE(tgt == tgt_before);
    // The good request is taken (where the backend has a device to run it on:
    // a device backend without its driver refuses every transfer).
    int32_t devices = 0;
    const bool runs = api->device_count(inst, &devices) == XMC_OK && (devices > 0 || !has(XMC_CAP_STREAM));
    if (runs) {
        XMC_EXPECT_STATUS(XMC_OK, api->transfer_execute(inst, &good, &stats));
        EXPECT_TRUE(tgt == src);
    }
}

// ---- the instance itself: open, close, device_count, device_info, last_error -------
// CORE-INSTANCE: the entry points every backend has (capability `always`).

TEST_P(HostileTest, CORE_INSTANCE_OpenRefusesHostileParameters) {
    xmc_instance *o = nullptr;
    EXPECT_EQ(api->open(nullptr, nullptr), XMC_ERR_INVALID_ARGUMENT) << "open with a NULL result";
    xmc_open_params p{sizeof(xmc_open_params), nullptr};
    EXPECT_EQ(api->open(&p, nullptr), XMC_ERR_INVALID_ARGUMENT) << "open with a NULL result";
    // Every struct_size below ABI version 1's structure: `options` would be read past the caller's structure.
    for (uint32_t size : {0u, 1u, 3u, 4u, uint32_t(offsetof(xmc_open_params, options)),
                          uint32_t(sizeof(xmc_open_params) - 1)}) {
        p = xmc_open_params{size, "no_such_key=1"};
        EXPECT_EQ(api->open(&p, &o), XMC_ERR_INVALID_ARGUMENT) << "struct_size " << size;
        EXPECT_EQ(o, nullptr) << "struct_size " << size;
    }
    for (const char *opts : {"no_such_key=1", "=", "vmm_workers", "vmm_workers=", "vmm_workers=0",
                             "vmm_workers=-1", "vmm_workers=99999999999999999999999", "vmm_workers=1x",
                             "vmm_workers=1;no_such_key=2"}) {
        p = xmc_open_params{sizeof(xmc_open_params), opts};
        EXPECT_EQ(api->open(&p, &o), XMC_ERR_INVALID_ARGUMENT) << "options '" << opts << "'";
        EXPECT_EQ(o, nullptr) << "options '" << opts << "'";
    }
    // NULL params, and a newer caller's larger structure, are accepted.
    XMC_EXPECT_STATUS(XMC_OK, api->open(nullptr, &o));
    if (o) { XMC_EXPECT_STATUS(XMC_OK, api->close(o)); }
    struct Newer { xmc_open_params p; uint64_t future; } newer{{sizeof(Newer), nullptr}, 42};
    o = nullptr;
    XMC_EXPECT_STATUS(XMC_OK, api->open(&newer.p, &o));
    if (o) { XMC_EXPECT_STATUS(XMC_OK, api->close(o)); }
}

TEST_P(HostileTest, CORE_INSTANCE_ClosedOrNullInstanceRefused) {
    if (!in_tree()) XMC_SKIP(SkipKind::Unsupported, "only the in-tree backends define calls on a NULL or closed instance (docs/abi.md)");
    xmc_instance *closed = closed_instance();
    int32_t n = -1;
    xmc_device_info d{};
    for (xmc_instance *i : {static_cast<xmc_instance *>(nullptr), closed}) {
        SCOPED_TRACE(i ? "closed instance" : "NULL instance");
        EXPECT_EQ(api->close(i), XMC_ERR_INVALID_HANDLE);
        EXPECT_EQ(api->device_count(i, &n), XMC_ERR_INVALID_HANDLE);
        EXPECT_EQ(n, -1);
        EXPECT_EQ(api->device_info(i, 0, &d), XMC_ERR_INVALID_HANDLE);
        // last_error of a dead instance: nothing (all zero), never a read of it.
        xmc_error_info e{};
        std::memset(&e, 0x7F, sizeof e);
        api->last_error(i, &e);
        EXPECT_EQ(e.status, XMC_OK);
        EXPECT_EQ(e.call[0], 0);
    }
    api->last_error(inst, nullptr);  // no crash
    // The live instance is untouched by all of this.
    XMC_EXPECT_STATUS(XMC_OK, api->device_count(inst, &n));
}

TEST_P(HostileTest, CORE_INSTANCE_DeviceQueriesRefuseHostileArguments) {
    int32_t n = 0;
    XMC_ASSERT_STATUS(XMC_OK, api->device_count(inst, &n));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_count(inst, nullptr), "device_count");
    xmc_device_info d{};
    if (n > 0) { XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_info(inst, 0, nullptr), "device_info"); }
    for (int32_t index : {n, -1, INT32_MIN, INT32_MAX}) {
        std::memset(&d, 0x33, sizeof d);
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_info(inst, index, &d), "device_info") << "index " << index;
    }
    // Values a C caller may pass that name no status (within the enum's value
    // range: a C++ caller cannot portably form others).
    for (int v : {int(XMC_STATUS_COUNT_), 20, 31}) {
        const char *name = api->status_name(static_cast<xmc_status>(v));
        ASSERT_NE(name, nullptr) << "status_name(" << v << ")";
        EXPECT_STREQ(name, "unknown_status") << "status_name(" << v << ")";
    }
}

XMC_INSTANTIATE_FOR_BACKENDS(HostileTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileRegTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileStreamTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileCopyTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileVmmTest);

} // namespace
} // namespace xmc::conformance
