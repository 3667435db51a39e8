// REG-*: registration of existing host memory (SPEC 5). The test bodies of
// REG-IDENTITY .. REG-UNAVAILABLE (the rest are in test_register_use.cpp), run
// on every selected backend: the fixed tests, the
// hostile inputs (HostileRegTest), the fault sweeps of REG-FAIL and
// REG-UNREG-FAIL, and the stateful properties against the registration model.
// Registered memory comes from mmap, so its pages belong to the test alone.
// Where a requirement needs the driver to misbehave, the fault hook
// (driver_control.hpp) injects it; a backend without one skips those tests
// with a declared reason. The fixtures are in the harness (reg_env.hpp,
// hostile.hpp, fault_sweep.hpp), the stateful commands in reg_commands.hpp.
#include "boundary.hpp"
#include "absent_platform.hpp"
#include "driver_control.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "os_facts.hpp"
#include "reg_commands.hpp"
#include "reg_env.hpp"
#include "reg_model.hpp"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace xmc::conformance {
namespace {

// The registration oracle lives in reference/model/reg_model.hpp.
using model::RegModel;
using namespace reg_commands;

// ---- REG-IDENTITY -----------------------------------------------------------

TEST_P(RegTest, REG_IDENTITY_RangeIsRecordedAtTheSameAddress) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        const size_t n = 4 * page_size();
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p, n, d, &info));
        EXPECT_EQ(info.registered, 1);
        EXPECT_EQ(info.base, p) << "registration recorded at another address";
        EXPECT_EQ(info.size, n);
        EXPECT_EQ(info.device, d);
        for (size_t off : {size_t{0}, size_t{1}, n / 2, n - 1}) {
            xmc_reg_info q = query(p + off);
            EXPECT_EQ(q.registered, 1) << "offset " << off;
            EXPECT_EQ(q.base, p);
            EXPECT_EQ(q.size, n);
            EXPECT_EQ(q.device, d);
        }
        EXPECT_EQ(query(p + n).registered, 0) << "base+size is outside the registration";
        EXPECT_EQ(query(p - 1).registered, 0);
        check_device_reads(p, n, d);  // accessible at the same address
    }
}

TEST_P(RegTest, REG_IDENTITY_NonIdentityMappingIsRefusedAndNothingStays) {
    XMC_REQUIRE_FAULTS();
    char *p = page(0);
    const size_t n = 4 * page_size();
    ASSERT_EQ(control_->set_faults(control_->nonidentity_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_NON_IDENTITY, reg(p, n, 0), "reg_register");
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(query(p).registered, 0) << "a refused registration is still tracked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the driver still holds something:\n"
                                                        << control_->ledger_text();
    // The driver kept nothing: the same range registers again.
    XMC_EXPECT_STATUS(XMC_OK, reg(p, n, 0));
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
}

// ---- REG-DEVICE -------------------------------------------------------------

TEST_P(RegTest, REG_DEVICE_EveryDeviceCopiesFromItsOwnRegistration) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 4 * page_size(), d));
        check_device_reads(p, 4 * page_size(), d);
        check_device_reads(p + page_size() + 100, 1000, d);  // an interior part, unaligned
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
}

TEST_P(RegTest, REG_DEVICE_RefusesDeviceOutOfRange) {
    for (int32_t d : {devices_, devices_ + 5, int32_t{-1}}) {
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, reg(page(0), page_size(), d), "reg_register") << "device " << d;
        EXPECT_EQ(query(page(0)).registered, 0);
    }
}

// "A registration lives in a context of device d only": the driver's own
// records (never the backend's) say which device's context holds each
// registration. The registrations for the n devices must be held by n
// different devices, each by one device only (which device has which UUID is
// REG-UUID's check). A copy cannot show this where the driver maps a
// registration for every context (CUDA's unified addressing).
TEST_P(RegTest, REG_DEVICE_EachDevicesRegistrationLivesInAContextOfItsOwn) {
    XMC_REQUIRE_FAULTS();  // the driver's records come through the same hook
    std::vector<std::vector<uint8_t>> holders;
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * page_size(), d));
        uint8_t uuid[16];
        std::string why;
        ASSERT_TRUE(control_->registration_uuid(*control_, p, uuid, &why)) << "device " << d << ": " << why;
        std::vector<uint8_t> u(uuid, uuid + 16);
        for (size_t other = 0; other < holders.size(); ++other)
            EXPECT_NE(u, holders[other]) << "the registrations for devices " << other << " and " << d
                                         << " live in the context of the same device";
        holders.push_back(u);
    }
    for (int32_t d = 0; d < devices_; ++d) XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, page(8 * d)));
}

// ---- REG-UUID ---------------------------------------------------------------

TEST_P(RegTest, REG_UUID_DevicesAreNamedByIndexAndDistinctUuid) {
    std::vector<std::vector<uint8_t>> seen;
    for (int32_t d = 0; d < devices_; ++d) {
        xmc_device_info info{};
        XMC_ASSERT_STATUS(XMC_OK, api->device_info(inst, d, &info));
        EXPECT_EQ(info.index, d);
        std::vector<uint8_t> u(info.uuid, info.uuid + 16);
        EXPECT_NE(u, std::vector<uint8_t>(16, 0)) << "device " << d << " has an all-zero UUID";
        for (const auto &o : seen) EXPECT_NE(u, o) << "two devices share a UUID";
        seen.push_back(u);
    }
    xmc_device_info info{};
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_info(inst, devices_, &info), "device_info");
}

TEST_P(RegTest, REG_UUID_RegistrationIsServedByTheDeviceWithItsUuid) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * page_size(), d));
        EXPECT_EQ(query(p).device, d);
        xmc_device_info info{};
        XMC_ASSERT_STATUS(XMC_OK, api->device_info(inst, d, &info));
        if (control_) {
            // The driver's own record: the context holding the registration is
            // the one of the device whose UUID device_info(d) reports.
            uint8_t uuid[16];
            std::string why;
            ASSERT_TRUE(control_->registration_uuid(*control_, p, uuid, &why)) << why;
            EXPECT_EQ(std::memcmp(uuid, info.uuid, 16), 0)
                << "the registration for device " << d << " lives in another device's context";
        }
        check_device_reads(p, 2 * page_size(), d);
    }
}

// ---- REG-DOUBLE -------------------------------------------------------------

TEST_P(RegTest, REG_DOUBLE_RefusesOverlappingRange) {
    const size_t pg = page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(page(8), 8 * pg, 0));
    struct Case { size_t first, pages; const char *what; };
    for (const Case &c : {Case{8, 8, "the same range"}, Case{12, 8, "overlapping its end"},
                          Case{4, 8, "overlapping its start"}, Case{10, 2, "contained in it"},
                          Case{4, 16, "containing it"}, Case{15, 1, "its last page"}}) {
        for (int32_t d = 0; d < devices_; ++d)
            XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(page(c.first), c.pages * pg, d), "reg_register")
                << c.what << ", device " << d;
    }
    xmc_reg_info q = query(page(9));
    EXPECT_EQ(q.base, page(8)) << "a refused registration changed the recorded one";
    EXPECT_EQ(q.size, 8 * pg);
    EXPECT_EQ(query(page(4)).registered, 0) << "a refused registration left a range behind";
    EXPECT_EQ(query(page(16)).registered, 0);
    // Adjacent ranges do not overlap.
    XMC_EXPECT_STATUS(XMC_OK, reg(page(16), 2 * pg, 0));
    XMC_EXPECT_STATUS(XMC_OK, reg(page(6), 2 * pg, 0));
}

TEST_P(RegTest, REG_DOUBLE_RefusesRangeInsideAPinnedBlockRegisteredWithADevice) {
    // Beyond the row's capability: a block pinned and registered in one call.
    if (!has(XMC_CAP_PIN_REGISTER))
        XMC_SKIP(SkipKind::Unsupported, "capability 'pin_register' not declared by backend '" << api->name
                                            << "': no pinned block is registered with a device");
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 4 * page_size(), page_size(), 0, &r));
    if (r.registered)
        XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(r.base, 2 * page_size(), 0), "reg_register")
            << "a pinned block registered with device 0 was registered again";
    else
        ADD_FAILURE() << "pin_alloc with device 0 did not register: " << xmc_status_string(r.reg_status);
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

// Two registrations laid out for the boundary classes (boundary.hpp), in
// arena pages: touching, or with a gap between them; four pages after the
// second are no registration's.
struct RegLayout {
    size_t first, first_pages, second, second_pages;
    const char *what;
};
const RegLayout kRegLayouts[] = {{8, 4, 12, 4, "two touching registrations"},
                                 {24, 4, 30, 4, "two registrations two pages apart"}};

// REG-DOUBLE at every boundary class around two registrations: refused
// (already registered) exactly when the model says the range overlaps one, and
// a refusal changes neither; a range that only touches one (it starts at its
// end) is taken. A backend that compares ends inclusively, checks only the
// start, or only against the registration below the range fails one of them.
TEST_P(RegTest, REG_DOUBLE_EveryBoundaryClassAgreesWithTheModel) {
    const size_t pg = page_size();
    for (const RegLayout &l : kRegLayouts) {
        SCOPED_TRACE(l.what);
        RegModel m;
        const Span a{l.first * pg, l.first_pages * pg}, b{l.second * pg, l.second_pages * pg};
        ASSERT_NO_FATAL_FAILURE(registered_model(m, {a, b}));
        for (const BoundaryRange &c : boundary_ranges(a, b, 4, pg)) {
            RegModel next = m;
            const xmc_status want = next.reg(c.addr, c.len, 0);
            xmc_reg_info info{};
            const xmc_status got = reg(arena_.base + c.addr, c.len, 0, &info);
            EXPECT_EQ(got, want) << boundary_name(c.cls) << ": " << c.what << " (pages +" << c.addr / pg << ", "
                                 << c.len / pg << "): got " << xmc_status_string(got) << ", the model says "
                                 << xmc_status_string(want) << " " << last_error();
            if (got == XMC_OK) {
                XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, info.base));
            }
            for (const Span &x : {a, b}) {
                const xmc_reg_info q = query(arena_.base + x.base);
                EXPECT_TRUE(q.registered && q.base == arena_.base + x.base && q.size == x.size)
                    << boundary_name(c.cls) << ": " << c.what << ": a refused registration changed another";
            }
        }
        for (const Span &x : {a, b}) XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, arena_.base + x.base));
    }
}

TEST_P(RegTest, REG_DOUBLE_StatefulSequencesAgreeWithModel) {
    run_stateful<Register, Register, Query>(GetParam(), api, inst, devices_);
}

// ---- REG-UNREG-BASE ---------------------------------------------------------

TEST_P(RegTest, REG_UNREG_BASE_RefusesAnythingButTheRecordedBase) {
    const size_t pg = page_size();
    char *p = page(4);
    XMC_ASSERT_STATUS(XMC_OK, reg(p, 4 * pg, 0));
    char unknown[64];
    for (void *bad : {static_cast<void *>(p + pg), static_cast<void *>(p + 1), static_cast<void *>(p + 4 * pg - 1),
                      static_cast<void *>(p - pg), static_cast<void *>(unknown), static_cast<void *>(nullptr)}) {
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, bad), "reg_unregister") << bad;
        xmc_reg_info q = query(p + 2 * pg);
        EXPECT_EQ(q.registered, 1) << "a refused unregister changed the registration";
        EXPECT_EQ(q.base, p);
        EXPECT_EQ(q.size, 4 * pg);
    }
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    EXPECT_EQ(query(p).registered, 0);
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, p), "reg_unregister")
        << "a second unregister";
    // Released: the range registers again.
    XMC_EXPECT_STATUS(XMC_OK, reg(p, 4 * pg, 0));
}

// REG-UNREG-BASE at every boundary class: the first byte, the last byte and
// the end of each range of boundary_ranges() around two registrations (their
// bases, interior bytes, last bytes, ends, the gap, the memory after them) are
// unregistered as the model says: only a recorded base is taken, and it
// removes that registration alone (where two touch, the end of the first is
// the second's base); every refusal leaves both as they were.
TEST_P(RegTest, REG_UNREG_BASE_EveryBoundaryClassButTheRecordedBaseIsRefused) {
    const size_t pg = page_size();
    for (const RegLayout &l : kRegLayouts) {
        SCOPED_TRACE(l.what);
        RegModel m;
        const Span a{l.first * pg, l.first_pages * pg}, b{l.second * pg, l.second_pages * pg};
        ASSERT_NO_FATAL_FAILURE(registered_model(m, {a, b}));
        std::vector<std::pair<size_t, std::string>> addrs;
        for (const BoundaryRange &c : boundary_ranges(a, b, 4, pg)) {
            const std::string what = std::string(boundary_name(c.cls)) + ": " + c.what;
            addrs.emplace_back(c.addr, what + ", its first byte");
            addrs.emplace_back(c.addr + 1, what + ", its second byte");
            if (c.len) addrs.emplace_back(c.addr + c.len - 1, what + ", its last byte");
            addrs.emplace_back(c.addr + c.len, what + ", its end");
        }
        for (const auto &[off, what] : addrs) {
            RegModel next = m;
            const xmc_status want = next.unreg(off);
            const xmc_status got = api->reg_unregister(inst, arena_.base + off);
            EXPECT_EQ(got, want) << what << " (+" << off << "): got " << xmc_status_string(got) << ", the model says "
                                 << xmc_status_string(want) << " " << last_error();
            if (got != XMC_OK) {
                for (const Span &x : {a, b}) {
                    const xmc_reg_info q = query(arena_.base + x.base);
                    EXPECT_TRUE(q.registered && q.base == arena_.base + x.base && q.size == x.size)
                        << what << ": a refused unregister changed a registration";
                }
                continue;
            }
            // Taken: that registration went, the other stayed; put it back.
            for (const Span &x : {a, b}) {
                const xmc_reg_info q = query(arena_.base + x.base);
                if (x.base == off) {
                    EXPECT_EQ(q.registered, 0) << what << ": unregistered, and still registered";
                } else {
                    EXPECT_TRUE(q.registered && q.base == arena_.base + x.base && q.size == x.size)
                        << what << ": unregistering one registration changed the other";
                }
            }
            XMC_ASSERT_STATUS(XMC_OK, reg(arena_.base + off, m.live.at(off).size, 0));
        }
        for (const Span &x : {a, b}) XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, arena_.base + x.base));
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

TEST_P(RegTest, REG_UNREG_BASE_StatefulSequencesAgreeWithModel) {
    run_stateful<Register, Unregister, Unregister, Query>(GetParam(), api, inst, devices_);
}

// ---- the fault sweep of registration (REG-UNREG-FAIL, REG-FAIL) -------------

// Register, query, unregister, on every device (REG-FAIL, REG-UNREG-FAIL).
void register_scenario(Run &r) {
    const SweepEnv &env = r.env();
    const size_t n = 4 * page_size();
    for (int32_t d = 0; r.inst && d < env.devices; ++d) {
        char *p = env.page(8 * static_cast<size_t>(d));
        const std::string dev = " dev " + std::to_string(d);
        r.step("reg_register" + dev);
        xmc_reg_info info{};
        if (!r.ok(r.api->reg_register(r.inst, p, n, d, 0, &info), "reg_register")) {
            // REG-FAIL: no tracking entry, and nothing in the driver but contexts.
            r.check(r.reg_query(p).registered == 0, "a rejected registration is tracked");
            r.check_nothing_but_contexts("the rejected registration");
            continue;
        }
        r.check(info.registered == 1 && info.base == p && info.size == n && info.device == d,
                "reg_register answered OK with a wrong result");
        r.step("reg_query" + dev);
        xmc_reg_info q = r.reg_query(p + 1);
        r.check(q.registered == 1 && q.base == p && q.size == n && q.device == d,
                "the registration made is not reported by reg_query");
        r.step("reg_unregister" + dev);
        if (!r.ok(r.api->reg_unregister(r.inst, p), "reg_unregister")) {
            // REG-UNREG-FAIL: still tracked and queryable; a retry removes it.
            q = r.reg_query(p + 1);
            r.check(q.registered == 1 && q.base == p && q.size == n,
                    "after a failed unregister the registration is no longer tracked (the device may still map it)");
            r.must_succeed(r.api->reg_unregister(r.inst, p), "reg_unregister", "the retry after a failed release");
        }
        r.check(r.reg_query(p).registered == 0, "still registered after unregister");
    }
    r.close();
}
const Scenario kRegister{"register", register_scenario};

// ---- REG-UNREG-FAIL ---------------------------------------------------------

TEST_P(RegTest, REG_UNREG_FAIL_FailedReleaseIsReportedAndRegistrationKept) {
    XMC_REQUIRE_FAULTS();
    char *p = page(4);
    const size_t n = 4 * page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(p, n, 0));
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->reg_unregister(inst, p), "reg_unregister")
        << "success reported over a driver failure";
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->fail_unregister_code) << "the driver's code is not carried";
    xmc_reg_info q = query(p + 1);
    EXPECT_EQ(q.registered, 1) << "a registration the driver still holds is no longer tracked";
    EXPECT_EQ(q.base, p);
    EXPECT_EQ(q.size, n);
    XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(p, n, 0), "reg_register");
    // The fault was for one call: the retry succeeds and removes it.
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    EXPECT_EQ(query(p).registered, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

TEST_P(FaultSweep, REG_UNREG_FAIL_FaultSweepOfUnregisterReportsAndKeeps) {
    sweep(kRegister, {"reg_unregister"});
}

// ---- REG-FAIL ---------------------------------------------------------------

TEST_P(RegTest, REG_FAIL_DriverRejectionGivesItsCodeAndLeavesNothing) {
    XMC_REQUIRE_FAULTS();
    char *p = page(4);
    ASSERT_EQ(control_->set_faults(control_->reject_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, reg(p, 4 * page_size(), 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->reject_register_code) << "the driver's code is not carried";
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(query(p).registered, 0) << "a rejected registration is tracked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the rejection left driver objects behind:\n"
                                                        << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, reg(p, 4 * page_size(), 0));
}

TEST_P(RegTest, REG_FAIL_UnmappedRangeIsRejectedAndLeavesNothing) {
    const size_t n = 4 * page_size();
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(munmap(p, n), 0);  // now memory that nothing maps
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, reg(p, n, 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_NE(e.native_code, 0) << "the native code of the rejection is missing";
    EXPECT_EQ(query(p).registered, 0);
    if (control_) {
        EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    }
}

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

TEST_P(FaultSweep, REG_FAIL_FaultSweepOfRegisterLeavesNothingBehind) {
    sweep(kRegister, {"reg_register"});
}

// ---- REG-SAME-CONTEXT -------------------------------------------------------

TEST_P(RegTest, REG_SAME_CONTEXT_UnregisterFromAnotherThreadAndInstanceReleasesIt) {
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        const size_t n = 4 * page_size();
        XMC_ASSERT_STATUS(XMC_OK, reg(p, n, d));
        // Work on another device in between: whatever context that makes
        // current must not be the one the release uses.
        if (has(XMC_CAP_STREAM)) {
            xmc_stream *s = nullptr;
            XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, (d + 1) % devices_, &s));
            XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(inst, s));
        }
        xmc_status st = XMC_ERR_DRIVER;
        std::thread([&] { st = api->reg_unregister(other, p); }).join();
        EXPECT_EQ(st, XMC_OK) << "unregister from another thread and instance: " << xmc_status_string(st);
        EXPECT_EQ(query(p).registered, 0);
        // The driver released it: the range registers again, on another device.
        XMC_EXPECT_STATUS(XMC_OK, reg(p, n, (d + 1) % devices_));
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
    if (control_) {
        EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    }
}

// ---- REG-ALIGN --------------------------------------------------------------

TEST_P(RegTest, REG_ALIGN_DeclaredPolicyHoldsAndUnregisterTakesTheRecordedBase) {
    const size_t pg = page_size();
    ASSERT_TRUE(policy_ == XMC_REG_ALIGN_REFUSE || policy_ == XMC_REG_ALIGN_ROUND)
        << "reg_align_policy answered " << static_cast<int>(policy_) << ", not a declared policy";
    char *p = page(4);
    if (policy_ == XMC_REG_ALIGN_REFUSE) {
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p + 8, pg, 0), "reg_register") << "unaligned address";
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p, pg + 100, 0), "reg_register") << "unaligned size";
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p + 100, 200, 0), "reg_register") << "both";
        EXPECT_EQ(query(p).registered, 0);
        EXPECT_EQ(query(p + pg).registered, 0);
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * pg, 0, &info));
        EXPECT_EQ(info.base, p);
        EXPECT_EQ(info.size, 2 * pg);
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    } else {
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p + 8, pg + 100, 0, &info));
        EXPECT_EQ(info.base, p) << "the recorded base is not the address rounded down to its page";
        EXPECT_EQ(info.size, 2 * pg) << "the recorded size is not rounded out to whole pages";
        xmc_reg_info q = query(p);
        EXPECT_EQ(q.registered, 1) << "the rounded-out first page is not recorded";
        EXPECT_EQ(q.base, p);
        EXPECT_EQ(query(p + 2 * pg - 1).registered, 1) << "the rounded-out last page is not recorded";
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, p + 8), "reg_unregister")
            << "unregister must take the recorded base, not the address asked for";
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
    EXPECT_EQ(query(p).registered, 0);
}

TEST_P(RegTest, REG_ALIGN_RefusesNullZeroSizeUnknownFlagsAndWrap) {
    xmc_reg_info info{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(nullptr, page_size(), 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0), 0, 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, page(0), page_size(), 0, 0x80, &info),
                       "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, page(0), page_size(), 0, 0, nullptr),
                       "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0), SIZE_MAX - page_size() + 1, 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_query(inst, page(0), nullptr), "reg_query");
    EXPECT_EQ(query(page(0)).registered, 0);
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

// ---- REG-UNAVAILABLE --------------------------------------------------------

TEST_P(RegUnavailable, REG_UNAVAILABLE_WithoutDeviceRegistrationIsUnsupported) {
    if (devices_ > 0)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' has " << devices_
                     << " device(s); registration without a driver or device is checked where there is none");
    XMC_EXPECT_REFUSED(XMC_ERR_UNSUPPORTED, reg(page(0), page_size(), 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_GT(std::strlen(e.message), 20u) << "the refusal does not say why registration is unavailable";
    EXPECT_EQ(query(page(0)).registered, 0) << "pretended: a registration is recorded without a driver";
    if (has(XMC_CAP_PIN_REGISTER)) {
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, page_size(), 64, 0, &r));
        EXPECT_EQ(r.registered, 0) << "pretended: a pinned block registered without a driver";
        EXPECT_EQ(r.reg_status, XMC_ERR_UNSUPPORTED)
            << "lock-only saying " << xmc_status_string(r.reg_status) << " (native " << r.reg_native_code
            << "): without a driver or device the registration is unsupported, never an invented driver error";
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    }
}

TEST_P(RegUnavailable, REG_UNAVAILABLE_UnsupportedByTheDeviceIsReportedNeverPretended) {
    if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    XMC_REQUIRE_FAULTS();
    ASSERT_EQ(control_->set_faults(control_->unsupported_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_UNSUPPORTED, reg(page(0), page_size(), 0), "reg_register");
    EXPECT_EQ(query(page(0)).registered, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

// In every qualification of a driver backend, whatever the machine has: the backend
// again in a child with no driver library, with a driver that lists no device, and
// with devices whose driver lacks the registration extension (absent_platform.hpp).
TEST_P(AbsentPlatform, REG_UNAVAILABLE_EveryHiddenPlatformInAChildIsUnsupportedNeverPretended) {
    each_hiding([&](Hiding::What) {
        const size_t page = page_size();
        void *p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        const DriverControl *c = driver_control(api, nullptr);
        const size_t objects = c ? c->objects_besides_contexts() : 0;
        xmc_reg_info info{};
        XMC_EXPECT_REFUSED(XMC_ERR_UNSUPPORTED, api->reg_register(inst, p, page, 0, 0, &info), "reg_register");
        xmc_error_info e{};
        api->last_error(inst, &e);
        EXPECT_GT(std::strlen(e.message), 20u) << "the refusal does not say why registration is unavailable";
        xmc_reg_info q{};
        XMC_EXPECT_STATUS(XMC_OK, api->reg_query(inst, p, &q));
        EXPECT_EQ(q.registered, 0) << "pretended: a registration is recorded where the platform has none";
        if (c) {
            EXPECT_EQ(c->objects_besides_contexts(), objects) << "the refused registration left driver objects:\n" << c->ledger_text();
        }
        munmap(p, page);
    });
}

} // namespace
} // namespace xmc::conformance
