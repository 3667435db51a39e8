// PIN-REFS, PIN-DEVICE, PIN-KINDS, PIN-POOL, PIN-FAIL-CLEAN, PIN-CLOSE (SPEC 5): references,
// registration with a device and its fault sweep, the pinning methods and their pools, clean
// failures of hostile sizes, and close. The first PIN requirements are in test_pin.cpp; the
// fixtures and commands are the same (pin_env.hpp, reg_env.hpp, pin_commands.hpp).
#include "driver_control.hpp"
#include "boundary.hpp"
#include "absent_platform.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "os_facts.hpp"
#include "pin_commands.hpp"
#include "pin_env.hpp"
#include "pin_model.hpp"
#include "reg_env.hpp"
#include "spin_barrier.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace xmc::conformance {
namespace {

using model::PinAddr;
using model::PinModel;
using namespace pin_commands;

// ---- PIN-REFS ---------------------------------------------------------------

TEST_P(PinTest, PIN_REFS_StatefulSequencesAgreeWithModel) {
    run_stateful<Alloc, FreeBase, Ref, Unref, Unref>(GetParam());
}

TEST_P(PinTest, PIN_REFS_ReleasedOnlyWithLastReference) {
    XMC_SKIP_IF_LOCKS_UNOBSERVABLE();  // checks lock state, which sanitizers (or no driver) hide
    xmc_pin_result r = alloc(2 * page_size());
    ASSERT_NE(r.base, nullptr);
    auto *b = static_cast<char *>(r.base);
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, b + 10));          // through an interior address
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, b + r.size - 1));
    // Each step's accounting is bracketed by its own snapshot: a check against
    // a snapshot from before the block existed would depend on the peak that
    // earlier tests left (a counter that never goes down escaped that way).
    const xmc_pin_stats held = stats();
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, r.base));         // the owner's reference
    EXPECT_EQ(query(b).pinned, 1) << "released while two references were held";
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, b + 5));
    EXPECT_EQ(query(b).pinned, 1) << "released on the first of two references";
    EXPECT_TRUE(locked(b, r.size));
    EXPECT_EQ(stats().bytes_now, held.bytes_now) << "the block's bytes left the count while a reference was held";
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, b));
    EXPECT_EQ(query(b).pinned, 0) << "not released with the last reference";
    release_pool();  // PIN-POOL: a pooled block stays pinned until the pool lets it go
    EXPECT_FALSE(any_locked(b, r.size)) << "the last reference went and the pages are still locked";
    EXPECT_EQ(stats().bytes_now, held.bytes_now - r.size)
        << "the last reference went and bytes pinned did not drop by the block's size";
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_unref(inst, b), "pin_unref");
}

TEST_P(PinTest, PIN_REFS_ReleaseThroughRecordedBaseAfterPointerMoved) {
    xmc_pin_result a = alloc(page_size()), other = alloc(page_size());
    ASSERT_NE(a.base, nullptr);
    char *cursor = static_cast<char *>(a.base) + 100;   // the caller's own pointer
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, cursor));
    void *recorded = a.base;
    cursor = static_cast<char *>(other.base);           // ... later redirected elsewhere
    const xmc_pin_stats held = stats();                 // the accounting of this release alone
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, recorded));
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, recorded));
    EXPECT_EQ(query(recorded).pinned, 0) << "the original block was never released";
    EXPECT_EQ(query(cursor).pinned, 1) << "releasing through the recorded base touched another block";
    EXPECT_EQ(stats().bytes_now, held.bytes_now - a.size) << "the release through the recorded base did not take "
                                                             "exactly the original block's bytes off the count";
    api->pin_free(inst, other.base);
}

TEST_P(HostileTest, PIN_REFS_HostileAddressesRefusedWithNothingChanged) {
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, page_size(), 1, XMC_NO_DEVICE, &r));
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

// ---- PIN-DEVICE -------------------------------------------------------------

TEST_P(PinDeviceTest, PIN_DEVICE_EveryDeviceRegistersItsBlockOrSaysWhy) {
    XMC_SKIP_IF_LOCKS_UNOBSERVABLE();  // checks the block stays locked, which sanitizers (or no driver) hide
    for (int32_t d = 0; d < devices_; ++d) {
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 3 * page_size(), 1, d, &r));
        EXPECT_TRUE(pinned_state(api, r.base, r.size).all_locked);
        if (r.registered) {
            EXPECT_EQ(r.reg_status, XMC_OK);
            if (has(XMC_CAP_STREAM | XMC_CAP_COPY)) {
                // Pinned memory registered with d is read by d.
                std::memset(r.base, 0, r.size);
                check_device_reads(static_cast<char *>(r.base), r.size, d);
            }
        } else {
            EXPECT_NE(r.reg_status, XMC_OK) << "lock-only without saying why: a silent degradation";
        }
        if (control_) {
            EXPECT_TRUE(r.registered) << "the fake driver registers every block; got "
                                      << xmc_status_string(r.reg_status);
        }
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    }
}

TEST_P(PinDeviceTest, PIN_DEVICE_DriverRejectionDegradesToLockOnlyWithItsCode) {
    XMC_SKIP_IF_LOCKS_UNOBSERVABLE();  // checks the block stays locked, which sanitizers (or no driver) hide
    XMC_REQUIRE_FAULTS();
    const xmc_pin_stats before = stats();
    ASSERT_EQ(control_->set_faults(control_->reject_register), 0);
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 1, 0, &r));
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(r.registered, 0);
    EXPECT_EQ(r.reg_status, XMC_ERR_DRIVER) << "the degradation does not say the driver refused";
    EXPECT_EQ(r.reg_native_code, control_->reject_register_code) << "the driver's code is not carried";
    EXPECT_TRUE(pinned_state(api, r.base, r.size).all_locked) << "a lock-only block must still be locked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    const xmc_pin_stats held = stats();
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    EXPECT_EQ(stats().blocks_now, before.blocks_now) << "the lock-only block outlived its free";
    EXPECT_EQ(stats().bytes_now, held.bytes_now - r.size) << "its free did not take the block's bytes off the count";
}

TEST_P(PinDeviceTest, PIN_DEVICE_NonIdentityRegistrationDegradesToLockOnly) {
    XMC_REQUIRE_FAULTS();
    ASSERT_EQ(control_->set_faults(control_->nonidentity_register), 0);
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 1, 0, &r));
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(r.registered, 0);
    EXPECT_EQ(r.reg_status, XMC_ERR_NON_IDENTITY);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the non-identity registration was not undone:\n"
                                                        << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

TEST_P(PinDeviceTest, PIN_DEVICE_FailedDriverReleaseKeepsTheBlock) {
    XMC_SKIP_IF_LOCKS_UNOBSERVABLE();  // checks the block stays locked, which sanitizers (or no driver) hide
    XMC_REQUIRE_FAULTS();
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 1, 0, &r));
    ASSERT_EQ(r.registered, 1) << "device 0 did not register the block";
    const xmc_pin_stats before = stats();
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->pin_free(inst, r.base), "pin_free");
    ASSERT_EQ(control_->set_faults(""), 0);
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->fail_unregister_code) << "the driver's code is not carried";
    xmc_pin_info q{};
    api->pin_query(inst, r.base, r.size, &q);
    EXPECT_EQ(q.pinned, 1) << "success reported over a failed release: the block is gone while the device maps it";
    EXPECT_TRUE(pinned_state(api, r.base, r.size).all_locked);
    EXPECT_EQ(stats().bytes_now, before.bytes_now) << "a failed free changed bytes pinned";
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));  // the retry releases it
    api->pin_query(inst, r.base, 1, &q);
    EXPECT_EQ(q.pinned, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

TEST_P(PinDeviceTest, PIN_DEVICE_RefusesDeviceOutOfRangeAndChangesNothing) {
    const xmc_pin_stats before = stats();
    xmc_pin_result r{};
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->pin_alloc(inst, page_size(), 1, devices_, &r), "pin_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->pin_alloc(inst, page_size(), 1, -7, &r), "pin_alloc");
    EXPECT_EQ(stats().bytes_now, before.bytes_now);
    EXPECT_EQ(stats().blocks_now, before.blocks_now);
}

// Pin with a device, then free, on every device (PIN-DEVICE).
void pin_scenario(Run &r) {
    const SweepEnv &env = r.env();
    const size_t n = 3 * page_size();
    for (int32_t d = 0; r.inst && d < env.devices; ++d) {
        const std::string dev = " dev " + std::to_string(d);
        r.step("pin_alloc" + dev);
        xmc_pin_result res{};
        const xmc_status st = r.api->pin_alloc(r.inst, n, 1, d, &res);
        if (!r.ok(st, "pin_alloc")) {
            r.problem("PIN-DEVICE: when registration fails the allocation still succeeds, lock-only");
            continue;
        }
        if (!res.registered) {
            // Lock-only, never silently: the reason and the driver's code.
            r.reported_in_result(res.reg_status, res.reg_native_code, "pin_alloc's lock-only result");
            r.check_nothing_but_contexts("the failed registration");
        }
        r.check(r.pinned(res.base, res.size), "the block is not reported pinned");
        // Under a sanitizer mlock is a no-op (mlock_ignored_reason): the lock
        // state is unobservable there, and the rest of the sweep still runs.
        if (!lock_unobservable_reason(r.api))
            r.check(pinned_state(r.api, res.base, res.size).all_locked, "the block's pages are not locked");
        r.step("pin_free" + dev);
        if (!r.ok(r.api->pin_free(r.inst, res.base), "pin_free")) {
            // The driver still maps it: the block stays, and a retry frees it.
            r.check(r.pinned(res.base, res.size), "a block whose driver release failed is gone");
            r.must_succeed(r.api->pin_free(r.inst, res.base), "pin_free", "the retry after a failed release");
        }
        r.check(!r.pinned(res.base, 1), "still pinned after pin_free");
    }
    r.close();
}
const Scenario kPin{"pin", pin_scenario};

// PIN-DEVICE's degradation in every qualification of a driver backend: a block asked to
// be registered where the driver, its devices or its extension are hidden in a child
// (absent_platform.hpp) is lock-only and says why; it never claims a registration.
TEST_P(AbsentPlatform, PIN_DEVICE_EveryHiddenPlatformInAChildDegradesToLockOnlySayingWhy) {
    each_hiding([&](Hiding::What) {
        const DriverControl *c = driver_control(api, nullptr);
        const size_t objects = c ? c->objects_besides_contexts() : 0;
        xmc_pin_stats before{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_stats(inst, &before));
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 64, 0, &r));
        EXPECT_EQ(r.registered, 0) << "pretended: a block registered with a device the platform does not have";
        // Exactly unsupported: no driver answered, so no driver code may be invented for it.
        EXPECT_EQ(r.reg_status, XMC_ERR_UNSUPPORTED)
            << "lock-only saying " << xmc_status_string(r.reg_status) << " (native " << r.reg_native_code
            << "): the platform is hidden, so the registration is unsupported";
        xmc_pin_info q{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_query(inst, r.base, r.size, &q));
        EXPECT_EQ(q.pinned, 1) << "the lock-only block is not pinned";
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
        xmc_pin_stats after{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_stats(inst, &after));
        EXPECT_EQ(after.bytes_now, before.bytes_now);
        if (c) {
            EXPECT_EQ(c->objects_besides_contexts(), objects) << "the degraded block left driver objects:\n" << c->ledger_text();
        }
    });
}

TEST_P(FaultSweep, PIN_DEVICE_FaultSweepDegradesWithTheCodeAndLeavesNothing) {
    sweep(kPin, {"pin_alloc", "pin_free"});
}


// ---- PIN-KINDS --------------------------------------------------------------

TEST_P(PinTest, PIN_KINDS_BlocksHaveTheDeclaredMinimumAndTheAskedAlignment) {
    const size_t min = min_align_;
    ASSERT_TRUE(min != 0 && (min & (min - 1)) == 0) << "pin_min_alignment " << min << " is not a power of two";
    // Up to the declared minimum every alignment is honoured: a block has it anyway.
    for (size_t align = 1; align <= min; align *= 2) {
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 100, align, XMC_NO_DEVICE, &r)) << "alignment " << align;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(r.base) % min, 0u)
            << "block " << r.base << " is not aligned to the declared minimum " << min << " (asked " << align << ")";
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    }
    // Above it: honoured, or refused as an invalid argument; never weakened.
    const xmc_pin_stats before = stats();
    for (size_t align : {2 * min, size_t{1} << 21, size_t{1} << 22, size_t{1} << 26, size_t{1} << 30, size_t{1} << 40,
                         size_t{1} << 62, size_t{1} << 63}) {
        if (align <= min) continue;
        xmc_pin_result r{};
        const xmc_status st = api->pin_alloc(inst, 100, align, XMC_NO_DEVICE, &r);
        if (st == XMC_OK) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(r.base) % align, 0u)
                << "alignment " << align << " asked, block " << r.base << " given: the alignment was weakened";
            XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
            continue;
        }
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, st, "pin_alloc")
            << "alignment " << align << ": one the backend cannot honour is an invalid argument";
        EXPECT_EQ(r.base, nullptr);
        const xmc_pin_stats now = stats();
        EXPECT_TRUE(now.bytes_now == before.bytes_now && now.blocks_now == before.blocks_now)
            << "a refused alignment " << align << " changed pin_stats";
    }
}

TEST_P(PinTest, PIN_KINDS_LockStateIsTheDeclaredMethods) {
    XMC_SKIP_IF_LOCKS_UNOBSERVABLE();
    const char *method = has(XMC_CAP_PIN_DRIVER) ? "the driver's report (pin_driver)" : "smaps' Locked: (mlock)";
    const size_t n = 5 * page_size() + 1;
    xmc_pin_result r = alloc(n);
    ASSERT_NE(r.base, nullptr);
    // Every page of the block, the interior and the last byte included.
    EXPECT_TRUE(locked(r.base, n)) << "the block is not locked by " << method;
    EXPECT_TRUE(locked(static_cast<char *>(r.base) + n - 1, 1)) << "the block's last byte is not locked by " << method;
    // (After the free, PIN-AFTER-FREE's body checks the same method's state.)
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

// ---- PIN-POOL ---------------------------------------------------------------

TEST_P(PinTest, PIN_POOL_FreedBlockIsPooledNotLiveAndStaysPinned) {
    const xmc_pin_pool_stats empty = pool();
    const size_t n = 3 * page_size();
    xmc_pin_result r = alloc(n);
    ASSERT_NE(r.base, nullptr);
    const xmc_pin_stats live = stats();
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    const xmc_pin_stats after = stats();
    EXPECT_EQ(after.bytes_now, live.bytes_now - r.size) << "a pooled block still counts as live";
    EXPECT_EQ(after.blocks_now, live.blocks_now - 1);
    const xmc_pin_pool_stats pooled = pool();
    EXPECT_EQ(pooled.blocks_pooled, empty.blocks_pooled + 1) << "the freed block is not reported pooled";
    EXPECT_GE(pooled.bytes_pooled, empty.bytes_pooled + r.size) << "the pool does not count the freed block's bytes";
    EXPECT_EQ(query(r.base).pinned, 0) << "a pooled block is reported pinned, as if it were live";
    EXPECT_EQ(query(static_cast<char *>(r.base) + n - 1).pinned, 0);
    if (!lock_unobservable_reason(api)) {
        EXPECT_TRUE(locked(r.base, n)) << "a pooled block's pages were unpinned before the pool's release";
    }
    XMC_ASSERT_STATUS(XMC_OK, api->pin_pool_release(inst));
    const xmc_pin_pool_stats released = pool();
    EXPECT_EQ(released.blocks_pooled, 0u);
    EXPECT_EQ(released.bytes_pooled, 0u);
    EXPECT_EQ(stats().bytes_now, after.bytes_now) << "the pool's release changed the live blocks";
    // PIN-AFTER-FREE, now that the pool is released.
    if (!lock_unobservable_reason(api)) {
        EXPECT_FALSE(any_locked(r.base, n)) << "the pool's release left the block's pages pinned";
    }
    EXPECT_EQ(query(r.base).pinned, 0);
}

TEST_P(PinTest, PIN_POOL_NeverHandedToTwoOwners) {
    // Blocks of a few sizes, small and large, freed and asked for again so that
    // the pool hands them out; every live block holds its own pattern, and no
    // two live blocks ever share a byte.
    struct Live { xmc_pin_result r; size_t n; uint8_t tag; };
    std::vector<Live> live;
    uint8_t next_tag = 1;
    auto check_all = [&](const std::string &after) {
        for (size_t i = 0; i < live.size(); ++i) {
            const auto a = reinterpret_cast<uintptr_t>(live[i].r.base);
            for (size_t j = i + 1; j < live.size(); ++j) {
                const auto b = reinterpret_cast<uintptr_t>(live[j].r.base);
                EXPECT_FALSE(a < b + live[j].n && b < a + live[i].n)
                    << "after " << after << ": live blocks " << live[i].r.base << " (+" << live[i].n << ") and "
                    << live[j].r.base << " (+" << live[j].n << ") overlap: one block handed to two owners";
            }
            const auto *p = static_cast<const uint8_t *>(live[i].r.base);
            for (size_t k = 0; k < live[i].n; k += 4093)
                if (p[k] != live[i].tag) {
                    ADD_FAILURE() << "after " << after << ": block " << live[i].r.base
                                  << " lost its contents (another owner wrote it)";
                    break;
                }
        }
    };
    auto take = [&](size_t n) {
        xmc_pin_result r{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_alloc(inst, n, 1, XMC_NO_DEVICE, &r)) << "pin_alloc(" << n << ")";
        if (!r.base) return;
        live.push_back({r, n, next_tag});
        std::memset(r.base, next_tag++, n);
        check_all("pin_alloc(" + std::to_string(n) + ")");
    };
    auto give = [&](size_t i) {
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, live[i].r.base));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    };
    const size_t page = page_size();
    const size_t sizes[] = {page, 3 * page, size_t{256} << 10, size_t{1} << 20, size_t{2} << 20};
    for (int round = 0; round < 3; ++round) {
        for (size_t n : sizes) take(n);
        for (size_t n : sizes) take(n);
        for (size_t i = 0; i < live.size();) {  // every other block back to the pool
            if (i % 2 == 0) give(i); else ++i;
        }
        // Smaller and equal sizes again: each may come from the pool, none twice.
        for (size_t n : sizes) take(n);
        for (size_t n : sizes) take(n > page ? n / 2 : n);
    }
    // A block someone still references is not free: it must not be handed out
    // (PIN-REFS' last reference, PIN-POOL's one owner).
    if (has(XMC_CAP_PIN_REFS)) {
        take(3 * page);
        Live held = live.back();
        live.pop_back();
        XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, static_cast<char *>(held.r.base) + 1));
        XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, held.r.base));  // the owner goes, the reference stays
        live.push_back(held);                                          // still in use, through the reference
        for (int i = 0; i < 4; ++i) take(3 * page);
        XMC_EXPECT_STATUS(XMC_OK, api->pin_unref(inst, held.r.base));
        for (size_t i = 0; i < live.size(); ++i)
            if (live[i].r.base == held.r.base) {
                live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
                break;
            }
    }
    while (!live.empty()) give(live.size() - 1);
    release_pool();
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
}

TEST_P(PinTest, PIN_POOL_ReleaseUnpinsEveryPooledBlockAndNoLiveOne) {
    const bool see_locks = lock_unobservable_reason(api) == nullptr;
    const size_t page = page_size();
    std::vector<xmc_pin_result> kept, pooled;
    for (size_t n : {page, 2 * page, size_t{1} << 20}) {
        kept.push_back(alloc(n));
        pooled.push_back(alloc(n));
    }
    for (auto &b : pooled) XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, b.base));
    const xmc_pin_stats live = stats();
    EXPECT_GE(pool().blocks_pooled, pooled.size());
    XMC_ASSERT_STATUS(XMC_OK, api->pin_pool_release(inst));
    EXPECT_EQ(pool().blocks_pooled, 0u) << "blocks are left in the pool after its release";
    const xmc_pin_stats now = stats();
    EXPECT_EQ(now.bytes_now, live.bytes_now) << "the pool's release changed the live blocks";
    EXPECT_EQ(now.blocks_now, live.blocks_now);
    for (auto &b : kept) {
        EXPECT_EQ(query(b.base, b.size).pinned, 1) << "the pool's release took a live block " << b.base;
        if (see_locks) {
            EXPECT_TRUE(locked(b.base, b.size)) << "the pool's release unpinned a live block " << b.base;
        }
    }
    for (auto &b : pooled) {
        EXPECT_EQ(query(b.base).pinned, 0);
        if (see_locks) {
            EXPECT_FALSE(any_locked(b.base, b.size)) << "the pool's release left block " << b.base << " pinned";
        }
    }
    // A release with nothing pooled is a no-op, and a live block freed after it is pooled again.
    XMC_EXPECT_STATUS(XMC_OK, api->pin_pool_release(inst));
    for (auto &b : kept) XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, b.base));
    EXPECT_EQ(pool().blocks_pooled, kept.size());
    XMC_EXPECT_STATUS(XMC_OK, api->pin_pool_release(inst));
    for (auto &b : kept)
        if (see_locks) {
            EXPECT_FALSE(any_locked(b.base, b.size)) << "block " << b.base << " pinned after the second release";
        }
}

TEST_P(PinTest, PIN_POOL_StatefulSequencesAgreeWithModel) {
    run_stateful<Alloc, Alloc, FreeBase, Query, PoolRelease, CheckPool, CheckLocks, CheckStats>(GetParam());
}

// ---- PIN-FAIL-CLEAN ---------------------------------------------------------

// The pinning modes of the backend: no device, and each device it can
// register a block with (pin_register).
std::vector<int32_t> pin_modes(const xmc_backend *api, xmc_instance *inst) {
    std::vector<int32_t> modes{XMC_NO_DEVICE};
    int32_t devices = 0;
    if ((api->capabilities & XMC_CAP_PIN_REGISTER) && api->device_count(inst, &devices) == XMC_OK)
        for (int32_t d = 0; d < devices; ++d) modes.push_back(d);
    return modes;
}
std::string mode_name(int32_t mode) {
    return mode == XMC_NO_DEVICE ? "no device" : "device " + std::to_string(mode);
}

TEST_P(PinTest, PIN_FAIL_CLEAN_HugeSizesRefusedInEveryModeLeavingNothing) {
    std::string no_control;
    const DriverControl *control = driver_control(api, &no_control);
    const std::vector<int32_t> modes = pin_modes(api, inst);
    const size_t page = page_size();
    struct Size { const char *what; size_t bytes; };
    const Size sizes[] = {{"SIZE_MAX", SIZE_MAX},
                          {"SIZE_MAX - page + 2 (overflows rounding)", SIZE_MAX - page + 2},
                          {"2^63 + 1", (size_t{1} << 63) + 1},
                          {"2^63", size_t{1} << 63},
                          {"2^62", size_t{1} << 62},
                          {"1 PiB", size_t{1} << 50}};
    // Warm-up: the first refusal of each mode may make lazy allocations
    // (error slots, the driver's state); the check brackets the rest.
    for (int32_t mode : modes) {
        xmc_pin_result r{};
        if (api->pin_alloc(inst, SIZE_MAX, 1, mode, &r) == XMC_OK) api->pin_free(inst, r.base);
    }
    const xmc_pin_stats before = stats();
    const xmc_pin_pool_stats pool_before = pool();
    const size_t objects_before = control ? control->objects_besides_contexts() : 0;
    const size_t heap_before = heap_bytes_in_use();
    for (int32_t mode : modes) {
        for (const Size &sz : sizes) {
            for (size_t align : {size_t{1}, min_align_}) {
                const std::string what = std::string(sz.what) + ", " + mode_name(mode) + ", alignment " + std::to_string(align);
                xmc_pin_result r{};
                const xmc_status st = api->pin_alloc(inst, sz.bytes, align, mode, &r);
                if (st == XMC_OK) {
                    ADD_FAILURE() << what << ": pin_alloc succeeded (block " << r.base << ", " << r.size << " bytes)";
                    api->pin_free(inst, r.base);
                    continue;
                }
                EXPECT_TRUE(PinModel::is_refusal(st))
                    << what << ": refused with " << xmc_status_string(st)
                    << ", not a refusal's own status (out_of_memory, memlock_limit, too_large, driver_error, "
                       "invalid_argument)";
                EXPECT_TRUE(refused(st, st, "pin_alloc")) << what;
                EXPECT_EQ(r.base, nullptr) << what << ": a refusal returned a block";
                const xmc_pin_stats now = stats();
                EXPECT_TRUE(now.bytes_now == before.bytes_now && now.blocks_now == before.blocks_now &&
                            now.bytes_peak == before.bytes_peak)
                    << what << ": the refusal changed pin_stats";
                const xmc_pin_pool_stats p = pool();
                EXPECT_TRUE(p.bytes_pooled == pool_before.bytes_pooled && p.blocks_pooled == pool_before.blocks_pooled)
                    << what << ": the refusal changed the pool";
                if (control) {
                    EXPECT_EQ(control->objects_besides_contexts(), objects_before)
                        << what << ": the refusal left driver objects:\n" << control->ledger_text();
                }
            }
        }
    }
    const size_t heap_after = heap_bytes_in_use();
    EXPECT_LE(heap_after, heap_before + 64 * 1024)
        << "the refusals leaked " << heap_after - heap_before << " bytes of heap";
    for (int32_t mode : modes)
        EXPECT_EQ(next_allocation_succeeds(api, inst, mode, mode != XMC_NO_DEVICE && control != nullptr), "")
            << mode_name(mode);
}

TEST_P(PinTest, PIN_FAIL_CLEAN_MemlockRefusalLeavesNothingOnAnyThread) {
    if (has(XMC_CAP_PIN_DRIVER))
        XMC_SKIP(SkipKind::Unsupported, "the memlock limit does not bind driver pinning, which backend '"
                                            << api->name << "' declares (PIN-KINDS); its driver's refusals are "
                                               "PIN_FAIL_CLEAN_DriverRefusalsLeaveNothingBehind's");
    XMC_SKIP_IF_MLOCK_IGNORED();  // RLIMIT_MEMLOCK is never hit under a sanitizer
    const size_t limit = 16 * page_size();
    ChildResult res = run_limited_child(limit, [&]() -> std::string {
        xmc_pin_stats before{}, after{};
        xmc_pin_pool_stats pool_before{}, pool_after{};
        api->pin_stats(inst, &before);
        if (has(XMC_CAP_PIN_CACHE)) api->pin_pool_stats(inst, &pool_before);
        const size_t heap_before = heap_bytes_in_use();
        for (int i = 0; i < 8; ++i) {
            xmc_pin_result r{};
            const xmc_status st = api->pin_alloc(inst, 256 * page_size(), 1, XMC_NO_DEVICE, &r);
            if (st != XMC_ERR_MEMLOCK) return std::string("expected memlock_limit, got ") + xmc_status_string(st);
            xmc_error_info e{};
            api->last_error(inst, &e);
            if (e.status != XMC_ERR_MEMLOCK || std::strcmp(e.call, "pin_alloc") != 0 || e.native_code == 0)
                return std::string("the refusal's detail must carry its status, the call and errno; got: ") + e.message;
            if (r.base) return "a refusal returned a block";
        }
        const size_t heap_after = heap_bytes_in_use();
        api->pin_stats(inst, &after);
        if (has(XMC_CAP_PIN_CACHE)) api->pin_pool_stats(inst, &pool_after);
        if (after.bytes_now != before.bytes_now || after.blocks_now != before.blocks_now ||
            after.bytes_peak != before.bytes_peak)
            return "the refusals changed pin_stats";
        if (pool_after.blocks_pooled != pool_before.blocks_pooled || pool_after.bytes_pooled != pool_before.bytes_pooled)
            return "the refusals changed the pool";
        if (heap_after > heap_before + 16 * 1024)
            return "the refusals leaked " + std::to_string(heap_after - heap_before) + " bytes of heap";
        return next_allocation_succeeds(api, inst, XMC_NO_DEVICE, false);
    });
    ASSERT_TRUE(WIFEXITED(res.status)) << "the child died by signal "
                                       << (WIFSIGNALED(res.status) ? WTERMSIG(res.status) : 0)
                                       << ": the backend aborted on a refused allocation";
    EXPECT_EQ(WEXITSTATUS(res.status), 0) << res.message;
}

TEST_P(PinTest, PIN_FAIL_CLEAN_DriverRefusalsLeaveNothingBehind) {
    std::string no_control;
    const DriverControl *control = driver_control(api, &no_control);
    if (!control) XMC_SKIP(SkipKind::Unsupported, no_control);
    // The modes whose pinning asks the driver: driver pinning itself, and a
    // block registered with a device.
    std::vector<int32_t> modes;
    if (has(XMC_CAP_PIN_DRIVER)) modes.push_back(XMC_NO_DEVICE);
    for (int32_t m : pin_modes(api, inst))
        if (m != XMC_NO_DEVICE) modes.push_back(m);
    if (modes.empty())
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name
                                                    << "' pins without its driver (neither pin_driver nor pin_register)");
    ASSERT_NE(control->register_entry, nullptr);
    const std::string code = control->reject_register_name;
    const std::string scripts[] = {
        "exhaust:" + std::string(control->register_entry) + ":0:" + code,          // no registration left
        "size_limit:" + std::string(control->register_entry) + ":64K:" + code,     // a per-call limit
    };
    const size_t n = size_t{4} << 20;  // large enough that a leaked buffer shows in the heap
    for (const std::string &script : scripts) {
        for (int32_t mode : modes) {
            const std::string what = "'" + script + "', " + mode_name(mode);
            // Warm-up with the fault in place, then the refusal under test.
            ASSERT_EQ(control->set_faults(script.c_str()), 0) << script;
            {
                xmc_pin_result r{};
                if (api->pin_alloc(inst, n, 1, mode, &r) == XMC_OK) api->pin_free(inst, r.base);
            }
            const xmc_pin_stats before = stats();
            const xmc_pin_pool_stats pool_before = pool();
            const size_t objects_before = control->objects_besides_contexts();
            const size_t heap_before = heap_bytes_in_use();
            xmc_pin_result r{};
            const xmc_status st = api->pin_alloc(inst, n, 1, mode, &r);
            xmc_error_info e{};
            api->last_error(inst, &e);
            ASSERT_EQ(control->set_faults(""), 0);
            if (st == XMC_OK && mode != XMC_NO_DEVICE) {
                // Degraded to lock-only: PIN-DEVICE's rule, whose body checks how it says so.
                EXPECT_EQ(r.registered, 0) << what << ": registered although the driver refused";
                XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
            } else if (st == XMC_OK) {
                ADD_FAILURE() << what << ": the driver refused the pinning, yet pin_alloc succeeded";
                api->pin_free(inst, r.base);
            } else {
                EXPECT_TRUE(PinModel::is_refusal(st)) << what << ": refused with " << xmc_status_string(st);
                EXPECT_TRUE(refused(st, st, "pin_alloc")) << what;
                EXPECT_EQ(e.native_code, control->reject_register_code) << what << ": the driver's code is not carried";
                EXPECT_EQ(r.base, nullptr) << what;
                const xmc_pin_stats now = stats();
                EXPECT_TRUE(now.bytes_now == before.bytes_now && now.blocks_now == before.blocks_now &&
                            now.bytes_peak == before.bytes_peak)
                    << what << ": the refusal changed pin_stats";
                const xmc_pin_pool_stats p = pool();
                EXPECT_TRUE(p.bytes_pooled == pool_before.bytes_pooled && p.blocks_pooled == pool_before.blocks_pooled)
                    << what << ": the refusal changed the pool";
            }
            const size_t heap_after = heap_bytes_in_use();  // a lock-only block is freed by now
            EXPECT_LE(heap_after, heap_before + 64 * 1024)
                << what << ": the refusal leaked " << heap_after - heap_before << " bytes of heap";
            EXPECT_EQ(control->objects_besides_contexts(), objects_before)
                << what << ": the refusal left driver objects:\n" << control->ledger_text();
            // The driver serves again: the next block is pinned (and registered) on every thread.
            EXPECT_EQ(next_allocation_succeeds(api, inst, mode, mode != XMC_NO_DEVICE), "") << what;
            if (mode == XMC_NO_DEVICE && !lock_unobservable_reason(api)) {
                xmc_pin_result ok{};
                XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 1, mode, &ok));
                EXPECT_TRUE(locked(ok.base, 2 * page_size())) << what << ": the next block is not driver-locked";
                XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, ok.base));
            }
        }
    }
}

TEST_P(PinTest, PIN_FAIL_CLEAN_StatefulRefusalsChangeNothing) {
    run_stateful<Alloc, FreeBase, AllocHuge, AllocHuge>(GetParam());
}

// ---- PIN-CLOSE --------------------------------------------------------------

// Skips with the declared reason where the backend's table ends before close_report.
#define XMC_REQUIRE_CLOSE_REPORT()                                                                           \
    do {                                                                                                     \
        if (!this->api->close_report)                                                                        \
            XMC_SKIP(SkipKind::Unsupported, "backend '" << this->api->name                                   \
                                                        << "' has no close_report (its table ends before it)"); \
    } while (0)

TEST_P(PinTest, PIN_CLOSE_LastCloseReleasesEveryBlockAndReportsHowMany) {
    XMC_REQUIRE_CLOSE_REPORT();
    ASSERT_TRUE(extra_.empty());
    std::string no_control;
    const DriverControl *control = driver_control(api, &no_control);
    const bool see_locks = lock_unobservable_reason(api) == nullptr;
    model::PinModel m(pin_commands::pin_rules(*backend_));
    std::vector<xmc_pin_result> blocks;
    auto take = [&](size_t n, int32_t device) {
        xmc_pin_result r{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_alloc(inst, n, 1, device, &r));
        if (!r.base) return;
        m.alloc(n, 1);
        blocks.push_back(r);
    };
    for (size_t n : {page_size(), 3 * page_size() + 1, size_t{1} << 20}) take(n, XMC_NO_DEVICE);
    const std::vector<int32_t> modes = pin_modes(api, inst);
    for (int32_t d : modes)
        if (d != XMC_NO_DEVICE) take(2 * page_size(), d);  // registered with a device: released with the block
    if (has(XMC_CAP_PIN_REFS) && !blocks.empty()) {  // a block whose owner went, one reference still held
        XMC_EXPECT_STATUS(XMC_OK, api->pin_ref(inst, static_cast<char *>(blocks[0].base) + 7));
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, blocks[0].base));
        m.ref(PinAddr{0, PinAddr::Base, 7});
        m.free(PinAddr{0, PinAddr::Base, 0});
    }
    take(page_size(), XMC_NO_DEVICE);  // freed (into the pool, under pin_cache) before the close
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, blocks.back().base));
    m.free(PinAddr{static_cast<int>(blocks.size()) - 1, PinAddr::Base, 0});
    size_t slots = 0;
    int32_t devices = 0;
    if (has(XMC_CAP_VMM) && api->device_count(inst, &devices) == XMC_OK && devices > 0) {
        xmc_slot *slot = nullptr;
        xmc_slot_info info{};
        XMC_EXPECT_STATUS(XMC_OK, api->slot_create(inst, 0, page_size(), &slot, &info));
        slots = slot ? 1 : 0;
    }
    const xmc_pin_stats before = stats();
    uint64_t live_bytes = 0;
    std::vector<xmc_pin_result> held;  // live or pooled: what the close must release
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (m.blocks()[i].live) live_bytes += blocks[i].size;
        if (m.expect_locked(static_cast<int>(i))) held.push_back(blocks[i]);
    }
    const size_t expected = m.close(true);
    xmc_close_report report{};
    xmc_instance *closing = inst;
    inst = nullptr;  // closed here, not by TearDown
    XMC_ASSERT_STATUS(XMC_OK, api->close_report(closing, &report));
    EXPECT_EQ(report.last_instance, 1u) << "the only open instance was closed, but the backend says others are open";
    EXPECT_EQ(report.pinned_blocks, baseline_.blocks_now + expected) << "blocks released by the last close";
    // Blocks left by an earlier test add their bytes, which this one does not know.
    if (baseline_.blocks_now == 0) {
        EXPECT_EQ(report.pinned_bytes, live_bytes) << "bytes released by the last close";
    } else {
        EXPECT_GE(report.pinned_bytes, live_bytes) << "bytes released by the last close";
    }
    EXPECT_EQ(before.blocks_now, baseline_.blocks_now + expected);
    EXPECT_EQ(report.slots, slots) << "slots closed with the instance";
    for (const auto &b : held)
        if (see_locks) {
            EXPECT_FALSE(any_locked(b.base, b.size)) << "block " << b.base << " still pinned after the last close";
        }
    if (control) {
        EXPECT_EQ(control->live_objects(), 0u) << "the last close left driver objects behind:\n" << control->ledger_text();
    }
    // A new instance finds nothing: no block, nothing pooled, no address pinned.
    xmc_open_params params{sizeof params, nullptr};
    XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &inst));
    EXPECT_EQ(stats().blocks_now, 0u) << "blocks outlived the last close";
    EXPECT_EQ(pool().blocks_pooled, 0u) << "the pool outlived the last close";
    for (const auto &b : blocks) EXPECT_EQ(query(b.base).pinned, 0) << "block " << b.base << " outlived the last close";
}

TEST_P(PinTest, PIN_CLOSE_ClosingOneOfTwoReleasesNothingTheOtherReaches) {
    XMC_REQUIRE_CLOSE_REPORT();
    xmc_instance *other = nullptr;
    xmc_open_params params{sizeof params, nullptr};
    XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &other));
    std::vector<xmc_pin_result> blocks;
    for (int32_t mode : pin_modes(api, inst)) {
        xmc_pin_result r{};
        XMC_EXPECT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 1, mode, &r)) << mode_name(mode);
        if (r.base) blocks.push_back(r);
    }
    const xmc_pin_stats before = stats();
    xmc_close_report report{};
    xmc_instance *closing = inst;
    inst = other;  // TearDown closes the survivor
    XMC_ASSERT_STATUS(XMC_OK, api->close_report(closing, &report));
    EXPECT_EQ(report.last_instance, 0u) << "another instance is open";
    EXPECT_EQ(report.pinned_blocks, 0u) << "closing one instance released blocks the other can reach";
    EXPECT_EQ(report.registrations, 0u);
    const xmc_pin_stats now = stats();
    EXPECT_EQ(now.bytes_now, before.bytes_now);
    EXPECT_EQ(now.blocks_now, before.blocks_now);
    const bool see_locks = lock_unobservable_reason(api) == nullptr;
    for (const auto &b : blocks) {
        EXPECT_EQ(query(b.base, b.size).pinned, 1) << "block " << b.base << " is gone for the other instance";
        if (see_locks) {
            EXPECT_TRUE(locked(b.base, b.size)) << "block " << b.base << " was unpinned";
        }
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, b.base));
    }
}

TEST_P(PinTest, PIN_CLOSE_PlainCloseReleasesTheSame) {
    XMC_REQUIRE_CLOSE_REPORT();
    ASSERT_TRUE(extra_.empty());
    std::vector<xmc_pin_result> blocks;
    for (size_t n : {page_size(), size_t{1} << 20}) blocks.push_back(alloc(n));
    xmc_instance *closing = inst;
    inst = nullptr;
    XMC_ASSERT_STATUS(XMC_OK, api->close(closing));
    if (!lock_unobservable_reason(api)) {
        for (const auto &b : blocks) EXPECT_FALSE(any_locked(b.base, b.size)) << "block " << b.base << " outlived close";
    }
    xmc_open_params params{sizeof params, nullptr};
    XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &inst));
    EXPECT_EQ(stats().blocks_now, 0u) << "close of the last instance left blocks; close_report's rules are close's";
    for (const auto &b : blocks) EXPECT_EQ(query(b.base).pinned, 0);
}

} // namespace
} // namespace xmc::conformance
