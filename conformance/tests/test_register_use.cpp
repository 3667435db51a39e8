// REG-REUSE, REG-LARGE, REG-ARGS, REG-PORTABLE, REG-THREADS, REG-CLOSE (SPEC 5): registrations
// over their life: an address registered again after its memory went, ranges too large for one
// driver call, unaligned ranges, portable registrations, many threads, and close. The first REG
// requirements are in test_register.cpp; the fixtures and commands are the same (reg_env.hpp,
// reg_commands.hpp).
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

using model::RegModel;
using namespace reg_commands;

// ---- REG-REUSE (0.2) --------------------------------------------------------

// Fresh pages of its own, outside the fixture's arena, unmapped at the end;
// MAP_NORESERVE so that a range above a driver's per-call limit costs nothing
// until touched.
struct Mapping {
    char *p = nullptr;
    size_t n = 0;
    explicit Mapping(size_t bytes) : n(bytes) {
        void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        p = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
    }
    ~Mapping() {
        if (p) munmap(p, n);
    }
    // The pages are freed and handed out again at the same address: mmap
    // MAP_FIXED replaces them with fresh ones in one step (a munmap first would
    // leave a window in which another thread's mmap could take the address).
    bool remap() { return mmap(p, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p; }
};

// After an unregister the driver maps nothing of the range, and the query
// reports nothing; the same address, freed and mapped again, registers again.
TEST_P(RegTest, REG_REUSE_RangeFreedAndMappedAgainAtTheSameAddressRegistersAgain) {
    const size_t n = 4 * page_size();
    for (int32_t d = 0; d < devices_; ++d) {
        Mapping m(n);
        ASSERT_NE(m.p, nullptr);
        for (int round = 0; round < 3; ++round) {
            std::memset(m.p, 0x30 + round, n);
            xmc_reg_info info{};
            XMC_ASSERT_STATUS(XMC_OK, reg(m.p, n, d, &info)) << "device " << d << ", round " << round
                                                             << ": the range, freed and mapped again, does not register";
            observe_locking(m.p, n);
            EXPECT_EQ(query(m.p + n / 2).registered, 1);
            const long long mapped = driver_mapped(m.p, n);
            if (mapped >= 0) { EXPECT_EQ(mapped, static_cast<long long>(n)) << "the driver does not map the registration"; }
            XMC_ASSERT_STATUS(XMC_OK, api->reg_unregister(inst, m.p));
            EXPECT_EQ(query(m.p).registered, 0);
            EXPECT_EQ(query(m.p + n - 1).registered, 0);
            const long long left = driver_mapped(m.p, n);
            if (left >= 0) {
                EXPECT_EQ(left, 0) << "device " << d << ", round " << round
                                   << ": the driver still maps the range after unregister reported it released"
                                   << (control_ ? ":\n" + control_->ledger_text() : std::string(" (pages still locked)"));
            }
            ASSERT_TRUE(m.remap()) << "mmap MAP_FIXED at " << static_cast<void *>(m.p) << " failed";
        }
    }
    if (control_) { EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text(); }
}

// The C heap hands the same address out again: free, then malloc until it
// does (the blocks missed are kept until the end, so the heap moves on).
TEST_P(RegTest, REG_REUSE_FreedAndAllocatedAgainByTheHeapRegistersAgain) {
    const size_t pg = page_size(), n = 4 * pg;
    void *first = nullptr;
    ASSERT_EQ(posix_memalign(&first, pg, n), 0);
    std::memset(first, 1, n);
    XMC_ASSERT_STATUS(XMC_OK, reg(first, n, 0));
    observe_locking(first, n);
    XMC_ASSERT_STATUS(XMC_OK, api->reg_unregister(inst, first));
    const long long left = driver_mapped(first, n);
    if (left >= 0) { EXPECT_EQ(left, 0) << "the driver still maps the range after unregister"; }
    std::free(first);
    std::vector<void *> missed;
    void *again = nullptr;
    for (int i = 0; i < 64; ++i) {
        void *p = nullptr;
        ASSERT_EQ(posix_memalign(&p, pg, n), 0);
        if (p == first) {
            again = p;
            break;
        }
        missed.push_back(p);
    }
    if (again) {
        std::memset(again, 2, n);
        XMC_EXPECT_STATUS(XMC_OK, reg(again, n, 0)) << "the heap's block at the same address does not register";
        xmc_reg_info q = query(static_cast<char *>(again) + 1);
        EXPECT_EQ(q.registered, 1);
        EXPECT_EQ(q.base, again);
        EXPECT_EQ(q.size, n);
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, again));
        const long long gone = driver_mapped(again, n);
        if (gone >= 0) { EXPECT_EQ(gone, 0) << "the driver still maps the range after the second unregister"; }
        std::free(again);
    }
    for (void *p : missed) std::free(p);
    if (!again) XMC_SKIP(SkipKind::Unsupported, "the C heap did not hand " << first << " out again in 64 allocations");
}

// A query never reports a registration the driver no longer maps, and the
// driver never maps one the query does not report: after a failed release,
// both still hold it; after the retry, neither does.
TEST_P(RegTest, REG_REUSE_QueryAndDriverAgreeThroughAFailedRelease) {
    XMC_REQUIRE_FAULTS();
    char *p = page(8);
    const size_t n = 4 * page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(p, n, 0));
    EXPECT_EQ(driver_mapped(p, n), static_cast<long long>(n));
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    EXPECT_NE(api->reg_unregister(inst, p), XMC_OK);
    ASSERT_EQ(control_->set_faults(""), 0);
    const bool reported = query(p).registered == 1;
    const long long mapped = driver_mapped(p, n);
    EXPECT_EQ(reported, mapped > 0) << "after a failed release the query says " << (reported ? "" : "not ")
                                    << "registered and the driver maps " << mapped << " bytes";
    if (reported) { XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p)); }
    EXPECT_EQ(query(p).registered, 0);
    EXPECT_EQ(driver_mapped(p, n), 0) << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, reg(p, n, 0)) << "the range does not register again";
}

TEST_P(RegTest, REG_REUSE_StatefulSequencesAgreeWithModel) {
    run_stateful<Register, Register, Unregister, Unregister, Reuse, Reuse, Query, Query>(GetParam(), api, inst,
                                                                                         devices_);
}

// ---- REG-LARGE (0.2) --------------------------------------------------------

xmc_reg_large_info large_policy(const xmc_backend *api, xmc_instance *inst) {
    xmc_reg_large_info info{};
    EXPECT_EQ(api->reg_large_policy(inst, &info), XMC_OK);
    return info;
}

const char *large_name(xmc_reg_large_policy p) {
    switch (p) {
    case XMC_REG_LARGE_NO_LIMIT: return "no limit";
    case XMC_REG_LARGE_SPLIT: return "split";
    case XMC_REG_LARGE_REFUSE: return "refuse";
    }
    return "?";
}

TEST_P(RegTest, REG_LARGE_DeclaredPolicyIsOneOfTheThreeWithItsLimit) {
    const xmc_reg_large_info info = large_policy(api, inst);
    switch (info.policy) {
    case XMC_REG_LARGE_NO_LIMIT: EXPECT_EQ(info.limit, 0u) << "no limit declared with a limit"; break;
    case XMC_REG_LARGE_SPLIT:
    case XMC_REG_LARGE_REFUSE:
        EXPECT_GT(info.limit, 0u) << large_name(info.policy) << " without a limit";
        EXPECT_EQ(info.limit % page_size(), 0u) << "a limit that is not whole pages";
        break;
    default: ADD_FAILURE() << "reg_large_policy answered " << static_cast<int>(info.policy) << ", not a policy";
    }
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_large_policy(inst, nullptr), "reg_large_policy");
}

// The driver's per-call limit imposed at the declared chunk size: a range of
// two chunks and a page registers as one range, made of three driver
// registrations none above the limit, and unregister releases all three.
TEST_P(RegTest, REG_LARGE_SplitRegistrationIsOneRangeOfChunksReleasedWhole) {
    const xmc_reg_large_info info = large_policy(api, inst);
    if (info.policy != XMC_REG_LARGE_SPLIT)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' declares the large-registration policy '"
                                                    << large_name(info.policy) << "', not split");
    XMC_REQUIRE_FAULTS();
    const size_t limit = static_cast<size_t>(info.limit), n = 2 * limit + page_size();
    Mapping m(n);
    ASSERT_NE(m.p, nullptr);
    const std::string script = std::string("size_limit:") + control_->register_entry + ":" + std::to_string(limit) +
                               ":" + control_->reject_register_name;
    ASSERT_EQ(control_->set_faults(script.c_str()), 0) << script;
    xmc_reg_info got{};
    XMC_ASSERT_STATUS(XMC_OK, reg(m.p, n, 0, &got)) << "a registration above the driver's limit was not split";
    EXPECT_EQ(got.base, m.p);
    EXPECT_EQ(got.size, n) << "the split registration is not recorded as one range";
    for (size_t off : {size_t{0}, limit - 1, limit, 2 * limit, n - 1}) {
        xmc_reg_info q = query(m.p + off);
        EXPECT_EQ(q.registered, 1) << "+" << off;
        EXPECT_EQ(q.base, m.p) << "+" << off << ": a chunk is reported as a registration of its own";
        EXPECT_EQ(q.size, n) << "+" << off;
    }
    const auto chunks = driver_registrations_in(*control_, m.p, n);
    EXPECT_EQ(chunks.size(), 3u) << control_->ledger_text();
    size_t covered = 0;
    for (const DriverReg &c : chunks) {
        EXPECT_LE(c.size, limit) << "a driver registration above the declared chunk size";
        covered += c.size;
    }
    EXPECT_EQ(covered, n) << "the chunks do not cover the range exactly";
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, m.p + limit), "reg_unregister")
        << "the base of the second chunk is not a registration's base";
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, m.p));
    EXPECT_EQ(query(m.p + limit).registered, 0);
    EXPECT_TRUE(driver_registrations_in(*control_, m.p, n).empty())
        << "unregister left chunks registered in the driver:\n" << control_->ledger_text();
    ASSERT_EQ(control_->set_faults(""), 0);
}

// All or nothing: the driver refusing chunk k fails the call with its code,
// and the chunks before k are released.
TEST_P(RegTest, REG_LARGE_FailureAtChunkKReleasesTheChunksBeforeIt) {
    const xmc_reg_large_info info = large_policy(api, inst);
    if (info.policy != XMC_REG_LARGE_SPLIT)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' declares the large-registration policy '"
                                                    << large_name(info.policy) << "', not split");
    XMC_REQUIRE_FAULTS();
    const size_t limit = static_cast<size_t>(info.limit), n = 2 * limit + page_size();
    Mapping m(n);
    ASSERT_NE(m.p, nullptr);
    for (int k = 1; k <= 3; ++k) {
        const std::string script = std::string("size_limit:") + control_->register_entry + ":" +
                                   std::to_string(limit) + ":" + control_->reject_register_name + "; fail:" +
                                   control_->register_entry + ":" + control_->reject_register_name + "@" +
                                   std::to_string(k);
        ASSERT_EQ(control_->set_faults(script.c_str()), 0) << script;
        XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, reg(m.p, n, 0), "reg_register") << "chunk " << k << " refused";
        xmc_error_info e{};
        api->last_error(inst, &e);
        EXPECT_EQ(e.native_code, control_->reject_register_code) << "chunk " << k << ": the driver's code is not carried";
        ASSERT_EQ(control_->set_faults(""), 0);
        EXPECT_EQ(query(m.p).registered, 0) << "chunk " << k;
        EXPECT_EQ(query(m.p + limit).registered, 0) << "chunk " << k;
        EXPECT_TRUE(driver_registrations_in(*control_, m.p, n).empty())
            << "chunk " << k << " refused: the chunks before it are still registered:\n" << control_->ledger_text();
    }
    // Nothing was left behind: the whole range registers.
    XMC_EXPECT_STATUS(XMC_OK, reg(m.p, n, 0));
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, m.p));
    EXPECT_TRUE(driver_registrations_in(*control_, m.p, n).empty()) << control_->ledger_text();
}

// Refuse: above the declared limit is too large (its own status, no native
// code, the driver never asked); the limit itself registers, as the driver
// held to that limit takes it.
TEST_P(RegTest, REG_LARGE_AboveTheDeclaredLimitIsRefusedTooLarge) {
    const xmc_reg_large_info info = large_policy(api, inst);
    if (info.policy != XMC_REG_LARGE_REFUSE)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' declares the large-registration policy '"
                                                    << large_name(info.policy) << "', not refuse");
    const size_t limit = static_cast<size_t>(info.limit);
    Mapping m(limit + page_size());
    ASSERT_NE(m.p, nullptr);
    if (control_) {
        const std::string script = std::string("size_limit:") + control_->register_entry + ":" +
                                   std::to_string(limit) + ":" + control_->reject_register_name;
        ASSERT_EQ(control_->set_faults(script.c_str()), 0) << script;
    }
    xmc_reg_info out{};
    XMC_EXPECT_REFUSED(XMC_ERR_TOO_LARGE, reg(m.p, limit + page_size(), 0, &out), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, 0) << "a refusal before the driver carries a native code";
    EXPECT_EQ(out.registered, 0);
    EXPECT_EQ(query(m.p).registered, 0) << "a too-large registration is tracked";
    if (control_) {
        EXPECT_TRUE(driver_registrations_in(*control_, m.p, m.n).empty()) << control_->ledger_text();
    }
    XMC_EXPECT_STATUS(XMC_OK, reg(m.p, limit, 0)) << "the declared limit itself does not register";
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, m.p));
    if (control_) {
        ASSERT_EQ(control_->set_faults(""), 0);
        EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    }
}

// ---- REG-ARGS (0.2) ---------------------------------------------------------

// Unaligned addresses and sizes, small and large (a large range may take
// another path through a backend): refused as an invalid argument, never out
// of memory and with nothing registered, or rounded as the policy says and
// then reported exactly as rounded.
TEST_P(RegTest, REG_ARGS_UnalignedRangeIsRefusedOrRoundedNeverOutOfMemory) {
    const size_t pg = page_size();
    Mapping m(300 * pg);
    ASSERT_NE(m.p, nullptr);
    std::memset(m.p, 0x44, m.n);
    struct Case { const char *what; size_t off, bytes; };
    const Case cases[] = {
        {"address + 1", 1, pg},
        {"address + 64, two pages", 64, 2 * pg},
        {"size one byte", 0, 1},
        {"size a page + 1", 0, pg + 1},
        {"last byte of a page, two bytes", pg - 1, 2},
        {"address + 8, 256 pages", 8, 256 * pg},
        {"256 pages + 1 byte", 0, 256 * pg + 1},
        {"address + 100, 200 pages + 300 bytes", 100, 200 * pg + 300},
    };
    for (const Case &c : cases) {
        char *p = m.p + pg + c.off;  // a page before it, so rounding down stays inside
        xmc_reg_info info{};
        const xmc_status st = reg(p, c.bytes, 0, &info);
        EXPECT_NE(st, XMC_ERR_OUT_OF_MEMORY) << c.what << ": an unaligned range reported as out of memory";
        char *lo = m.p + pg + c.off / pg * pg;
        char *hi = m.p + pg + (c.off + c.bytes + pg - 1) / pg * pg;
        if (policy_ == XMC_REG_ALIGN_REFUSE) {
            EXPECT_TRUE(refused(XMC_ERR_INVALID_ARGUMENT, st, "reg_register")) << c.what;
            EXPECT_EQ(info.registered, 0) << c.what;
            for (char *q = lo; q < hi; q += pg)
                EXPECT_EQ(query(q).registered, 0) << c.what << ": refused, yet +" << (q - lo) << " is registered";
            const long long mapped = driver_mapped(lo, static_cast<size_t>(hi - lo));
            if (mapped >= 0) { EXPECT_EQ(mapped, 0) << c.what << ": refused, yet the driver maps part of the range"; }
            if (st == XMC_OK) api->reg_unregister(inst, info.base);
        } else {
            EXPECT_TRUE(status_is(XMC_OK, st)) << c.what;
            if (st != XMC_OK) continue;
            EXPECT_EQ(info.base, lo) << c.what << ": not rounded down to its page";
            EXPECT_EQ(info.size, static_cast<size_t>(hi - lo)) << c.what << ": not rounded out to whole pages";
            xmc_reg_info q = query(p);
            EXPECT_EQ(q.base, info.base) << c.what << ": the query reports another range than the one registered";
            EXPECT_EQ(q.size, info.size) << c.what;
            const long long mapped = driver_mapped(lo, static_cast<size_t>(hi - lo));
            if (mapped >= 0) { EXPECT_EQ(mapped, hi - lo) << c.what << ": the driver maps another range"; }
            XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, info.base));
        }
    }
    if (control_) { EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text(); }
}

// An unaligned size far beyond memory: still an argument error under refuse
// (checked before any size is served), never out of memory or too large.
TEST_P(RegTest, REG_ARGS_HugeUnalignedSizeIsAnArgumentErrorUnderRefuse) {
    if (policy_ != XMC_REG_ALIGN_REFUSE)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' rounds unaligned ranges (policy round)");
    for (size_t bytes : {(size_t{1} << 40) + 1, (size_t{1} << 50) + 4095}) {
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0), bytes, 0), "reg_register") << bytes << " bytes";
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0) + 8, bytes - 1, 0), "reg_register")
            << bytes - 1 << " bytes at an unaligned address";
    }
    EXPECT_EQ(query(page(0)).registered, 0);
}

TEST_P(RegTest, REG_ARGS_StatefulSequencesAgreeWithModel) {
    run_stateful<Register, Register, Register, Unregister, Query>(GetParam(), api, inst, devices_);
}

// ---- REG-PORTABLE (0.2) -----------------------------------------------------

// One registration with XMC_REG_PORTABLE is usable by every device: each
// device copies from it; the driver's own record says so (CUDA: the portable
// flag; Level Zero: mapped for every device).
TEST_P(RegTest, REG_PORTABLE_EveryDeviceCopiesFromOnePortableRegistration) {
    const size_t n = 4 * page_size();
    for (int32_t asked = 0; asked < devices_; ++asked) {
        char *p = page(8 * asked);
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, api->reg_register(inst, p, n, asked, XMC_REG_PORTABLE, &info));
        EXPECT_EQ(info.base, p);
        EXPECT_EQ(info.size, n);
        EXPECT_EQ(query(p + 1).registered, 1);
        if (control_) {
            const auto held = driver_registrations_in(*control_, p, n);
            ASSERT_FALSE(held.empty()) << "the driver holds no registration of the range:\n" << control_->ledger_text();
            size_t devices_mapped = 0;
            for (const DriverReg &r : held)
                devices_mapped += (r.flags & 1u) ? static_cast<size_t>(devices_) : r.mapped_for;
            EXPECT_GE(devices_mapped, static_cast<size_t>(devices_))
                << "asked for device " << asked << ": the driver maps the portable registration for "
                << devices_mapped << " of " << devices_ << " devices:\n" << control_->ledger_text();
        }
        for (int32_t d = 0; d < devices_; ++d) check_device_reads(p, n, d);
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
        EXPECT_EQ(query(p).registered, 0);
        if (control_) {
            EXPECT_TRUE(driver_registrations_in(*control_, p, n).empty())
                << "unregister left a device's mapping of the portable registration:\n" << control_->ledger_text();
        }
    }
}

// A portable registration is one registration: overlapping it is refused for
// every device, unregister takes its base, and the range then registers for
// one device again.
TEST_P(RegTest, REG_PORTABLE_IsOneRegistrationForOverlapAndUnregister) {
    const size_t pg = page_size();
    char *p = page(4);
    xmc_reg_info info{};
    XMC_ASSERT_STATUS(XMC_OK, api->reg_register(inst, p, 4 * pg, 0, XMC_REG_PORTABLE, &info));
    for (int32_t d = 0; d < devices_; ++d) {
        XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(p + pg, pg, d), "reg_register") << "device " << d;
        xmc_reg_info o{};
        XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, api->reg_register(inst, p, 4 * pg, d, XMC_REG_PORTABLE, &o),
                           "reg_register")
            << "device " << d;
    }
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, p + pg), "reg_unregister");
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    XMC_EXPECT_STATUS(XMC_OK, reg(p, 4 * pg, devices_ - 1));
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    if (control_) { EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text(); }
}

// ---- REG-THREADS ------------------------------------------------------------

TEST_P(RegTest, REG_THREADS_ConcurrentRegisterUnregisterOfDisjointRangesAgreeWithModel) {
    constexpr int kThreads = 8, kOps = 400, kPages = 8;  // each thread owns kPages of the arena
    Arena arena(kThreads * kPages);
    ASSERT_NE(arena.base, nullptr);
    std::mutex mu;
    std::vector<std::string> failures;
    auto worker = [&](int tid) {
        std::mt19937_64 rng(tid * 104729 + 7);
        RegModel model;
        model.policy = policy_;
        model.page = page_size();
        model.devices = devices_;
        char *mine = arena.base + tid * kPages * page_size();
        auto fail = [&](const std::string &what) {
            std::lock_guard<std::mutex> l(mu);
            if (failures.size() < 20) failures.push_back("thread " + std::to_string(tid) + ": " + what);
        };
        // What the model says of this thread's own pages holds right after each of its operations.
        auto check_at = [&](size_t off, const char *after) {
            xmc_reg_info q{};
            api->reg_query(inst, mine + off, &q);
            const long long b = model.holder(off);
            if (q.registered != (b >= 0) || (b >= 0 && (q.base != mine + b || q.size != model.live.at(static_cast<size_t>(b)).size)))
                fail(std::string("right after its ") + after + ", the query at +" + std::to_string(off) +
                     " disagrees with the model");
        };
        for (int op = 0; op < kOps; ++op) {
            const int kind = rng() % 3;
            if (kind == 0) {
                const size_t first = rng() % kPages, n = 1 + rng() % (kPages - first);
                const int32_t d = static_cast<int32_t>(rng() % devices_);
                xmc_reg_info info{};
                const xmc_status got = api->reg_register(inst, mine + first * page_size(), n * page_size(), d, 0, &info);
                const xmc_status want = model.reg(first * page_size(), n * page_size(), d);
                if (got != want)
                    fail(std::string("register: ") + xmc_status_string(got) + ", model " + xmc_status_string(want));
                check_at(first * page_size(), "register");
                check_at((first + n) * page_size() - 1, "register");
            } else if (kind == 1) {
                const size_t off = (rng() % kPages) * page_size() + ((rng() % 4) == 0 ? 64 : 0);
                const xmc_status got = api->reg_unregister(inst, mine + off);
                const xmc_status want = model.unreg(off);
                if (got != want)
                    fail(std::string("unregister: ") + xmc_status_string(got) + ", model " + xmc_status_string(want));
                check_at(off, "unregister");
            } else {
                check_at(rng() % (kPages * page_size()), "query");
            }
        }
        for (const auto &[b, r] : model.live)
            if (api->reg_unregister(inst, mine + b) != XMC_OK) fail("final unregister");
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    for (auto &t : threads) t.join();
    for (const auto &f : failures) ADD_FAILURE() << f;
    for (size_t off = 0; off < arena.bytes; off += page_size())
        EXPECT_EQ(query(arena.base + off).registered, 0) << "left registered at +" << off;
}


// ---- REG-CLOSE --------------------------------------------------------------

TEST_P(RegTest, REG_CLOSE_LastCloseUnregistersEveryRegistration) {
    if (!api->close_report)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' has no close_report (its table ends before it)");
    ASSERT_TRUE(extra_.empty());
    const size_t n = 2 * page_size();
    std::vector<char *> ranges;
    for (int i = 0; i < 3; ++i) {
        char *p = page(4 * static_cast<size_t>(i));
        XMC_ASSERT_STATUS(XMC_OK, reg(p, n, i % devices_));
        ranges.push_back(p);
    }
    xmc_close_report report{};
    xmc_instance *closing = inst;
    inst = nullptr;  // closed here; TearDown gets the instance reopened below
    XMC_ASSERT_STATUS(XMC_OK, api->close_report(closing, &report));
    EXPECT_EQ(report.last_instance, 1u) << "the only open instance was closed, but the backend says others are open";
    EXPECT_EQ(report.registrations, ranges.size()) << "registrations released by the last close";
    // Over a fake driver: no mapping of the backend's is left, nor a context.
    if (control_) {
        EXPECT_EQ(control_->live_objects(), 0u) << "the last close left driver objects behind:\n" << control_->ledger_text();
    }
    // A new instance finds none, and the driver takes each range again (a
    // registration the driver still held would be refused as already registered).
    xmc_open_params params{sizeof params, nullptr};
    XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &inst));
    for (size_t i = 0; i < ranges.size(); ++i) {
        EXPECT_EQ(query(ranges[i]).registered, 0) << "range " << i << " is still registered after the last close";
        XMC_EXPECT_STATUS(XMC_OK, reg(ranges[i], n, static_cast<int32_t>(i) % devices_)) << "range " << i;
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, ranges[i]));
    }
}

// A registration split into chunks (REG-LARGE) and still held at the last close is every one of its
// chunks: the close releases each and counts the registration once. A close that released only the
// chunk at the base (the CUDA reference's did) left the others registered in the driver and the
// device's primary context retained. Twice: the whole registration held; then one whose unregister
// the driver refused at the second chunk, which keeps the chunks from there on registered
// (REG-UNREG-FAIL), and the close must release those.
TEST_P(RegTest, REG_CLOSE_LastCloseReleasesEveryChunkOfASplitRegistration) {
    if (!api->close_report)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' has no close_report (its table ends before it)");
    const xmc_reg_large_info info = large_policy(api, inst);
    if (info.policy != XMC_REG_LARGE_SPLIT)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' declares the large-registration policy '"
                                                    << large_name(info.policy) << "', not split");
    XMC_REQUIRE_FAULTS();
    ASSERT_TRUE(extra_.empty());
    const size_t limit = static_cast<size_t>(info.limit), n = 2 * limit + page_size();
    Mapping m(n);
    ASSERT_NE(m.p, nullptr);
    const std::string split = std::string("size_limit:") + control_->register_entry + ":" + std::to_string(limit) +
                              ":" + control_->reject_register_name;
    for (const bool fail_second_chunk : {false, true}) {
        SCOPED_TRACE(fail_second_chunk ? "an unregister refused at chunk 2 first" : "the whole registration held");
        ASSERT_EQ(control_->set_faults(split.c_str()), 0) << split;
        XMC_ASSERT_STATUS(XMC_OK, reg(m.p, n, 0));
        ASSERT_EQ(driver_registrations_in(*control_, m.p, n).size(), 3u) << control_->ledger_text();
        size_t held = 3;
        if (fail_second_chunk) {
            // The driver's "fail the next release" script, moved to its second call.
            std::string second = control_->fail_next_unregister;
            ASSERT_GE(second.size(), 2u);
            ASSERT_EQ(second.substr(second.size() - 2), "@1") << second;
            second.back() = '2';
            ASSERT_EQ(control_->set_faults(second.c_str()), 0) << second;
            XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->reg_unregister(inst, m.p), "reg_unregister")
                << "the driver refused the second chunk's release";
            held = driver_registrations_in(*control_, m.p, n).size();
            EXPECT_EQ(held, 2u) << "the chunks from the refused one on stay registered:\n" << control_->ledger_text();
        }
        ASSERT_EQ(control_->set_faults(""), 0);
        xmc_close_report report{};
        xmc_instance *closing = inst;
        inst = nullptr;  // closed here; reopened below (and TearDown closes that one)
        XMC_ASSERT_STATUS(XMC_OK, api->close_report(closing, &report));
        EXPECT_EQ(report.registrations, 1u) << "the split registration (" << held
                                            << " chunks held) is one registration released by the last close";
        EXPECT_TRUE(driver_registrations_in(*control_, m.p, n).empty())
            << "the last close left chunks of the split registration registered:\n" << control_->ledger_text();
        EXPECT_EQ(control_->live_objects(), 0u) << "the last close left driver objects behind:\n"
                                                << control_->ledger_text();
        xmc_open_params params{sizeof params, nullptr};
        XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &inst));
        EXPECT_EQ(query(m.p + limit).registered, 0) << "the range is still registered after the last close";
        // The driver takes the whole range again (a chunk it still held would be refused).
        XMC_EXPECT_STATUS(XMC_OK, reg(m.p, n, 0));
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, m.p));
    }
}

TEST_P(RegTest, REG_CLOSE_ClosingOneOfTwoUnregistersNothing) {
    if (!api->close_report)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' has no close_report (its table ends before it)");
    xmc_instance *other = nullptr;
    xmc_open_params params{sizeof params, nullptr};
    XMC_ASSERT_STATUS(XMC_OK, api->open(&params, &other));
    const size_t n = 2 * page_size();
    for (int32_t d = 0; d < devices_; ++d) XMC_ASSERT_STATUS(XMC_OK, reg(page(4 * static_cast<size_t>(d)), n, d));
    const size_t objects = control_ ? control_->objects_besides_contexts() : 0;
    xmc_close_report report{};
    xmc_instance *closing = inst;
    inst = other;  // TearDown unregisters what is left and closes the survivor
    XMC_ASSERT_STATUS(XMC_OK, api->close_report(closing, &report));
    EXPECT_EQ(report.last_instance, 0u) << "another instance is open";
    EXPECT_EQ(report.registrations, 0u) << "closing one instance released registrations the other can reach";
    if (control_) {
        EXPECT_EQ(control_->objects_besides_contexts(), objects) << "the driver lost a registration:\n"
                                                                 << control_->ledger_text();
    }
    for (int32_t d = 0; d < devices_; ++d) {
        const xmc_reg_info q = query(page(4 * static_cast<size_t>(d)));
        EXPECT_EQ(q.registered, 1) << "device " << d << "'s registration is gone for the other instance";
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, page(4 * static_cast<size_t>(d))));
    }
}

// The model's answer for threads that race for one range. All threads register and
// unregister two overlapping ranges (pages 0-1 and 1-2 of one arena) at random, with no
// pause between calls, so a thread that lets a lock go inside register or unregister
// is met there by another sooner or later. Whatever the interleaving, the calls the
// backend accepted form one history of the model: at most one of the two ranges is
// registered at a time, so of each range the accepted registers and unregisters
// alternate, and after each round (threads joined) each range's count of accepted
// registers exceeds its accepted unregisters by one exactly when the query reports it
// registered, and never both. Two overlapping registrations accepted at once, or two
// unregisters of one registration, break the counts.
TEST_P(RegTest, REG_THREADS_OverlappingRegistrationsAndUnregistersRacingFromManyThreadsAgreeWithOneHistory) {
    constexpr int kThreads = 8, kRounds = 40, kOps = 400;
    Arena arena(3);
    ASSERT_NE(arena.base, nullptr);
    char *const range[2] = {arena.base, arena.base + page_size()};
    std::mutex mu;
    std::vector<std::string> failures;
    std::atomic<int64_t> regs[2] = {0, 0}, unregs[2] = {0, 0};
    auto worker = [&](int round, int tid) {
        std::mt19937_64 rng(static_cast<uint64_t>(round) * 7907 + static_cast<uint64_t>(tid) * 104729 + 3);
        auto fail = [&](const std::string &what) {
            std::lock_guard<std::mutex> l(mu);
            if (failures.size() < 20)
                failures.push_back("round " + std::to_string(round) + " thread " + std::to_string(tid) + ": " + what);
        };
        for (int op = 0; op < kOps; ++op) {
            const int k = static_cast<int>(rng() % 2);
            if (rng() % 2 == 0) {
                xmc_reg_info info{};
                const xmc_status st = api->reg_register(inst, range[k], 2 * page_size(), 0, 0, &info);
                if (st == XMC_OK) ++regs[k];
                else if (st != XMC_ERR_ALREADY_REGISTERED)
                    fail("a register racing an overlapping one answered " + std::string(xmc_status_string(st)));
            } else {
                const xmc_status st = api->reg_unregister(inst, range[k]);
                if (st == XMC_OK) ++unregs[k];
                else if (st != XMC_ERR_NOT_REGISTERED)
                    fail("an unregister racing others answered " + std::string(xmc_status_string(st)));
            }
        }
    };
    // Rounds until kRounds, or kMinRounds and a second and a half (a driver's registration is slower).
    constexpr int kMinRounds = 8;
    const auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < kRounds && failures.empty() && !HasFailure(); ++round) {
        if (round >= kMinRounds && std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(1500)) break;
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, round, t);
        for (auto &t : threads) t.join();
        int live = 0;
        for (int k = 0; k < 2; ++k) {
            const int64_t net = regs[k] - unregs[k];
            const xmc_reg_info q = query(range[k]);
            const bool registered = q.registered && q.base == range[k];
            live += registered;
            if (net != (registered ? 1 : 0))
                ADD_FAILURE() << "round " << round << ": range " << k << " was registered " << regs[k] << " and unregistered "
                              << unregs[k] << " times, yet the query reports it "
                              << (registered ? "registered" : "not registered")
                              << ": two overlapping registrations or two unregisters of one were accepted";
        }
        if (live > 1) ADD_FAILURE() << "round " << round << ": both overlapping ranges are registered";
    }
    for (const auto &f : failures) ADD_FAILURE() << f;
    arena.unregister_all(api, inst);
}

} // namespace
} // namespace xmc::conformance
