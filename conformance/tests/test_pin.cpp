// PIN-*: pinning (SPEC 5). One body per requirement, run on every selected
// backend. Facts are read from the OS (/proc/self/smaps, mallinfo2), never
// taken from the backend's word.
#include "fixture.hpp"
#include "os_facts.hpp"
#include "pin_model.hpp"
#include "stateful.hpp"

#include <sys/capability.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace xmc::conformance {
namespace {

using model::PinAddr;
using model::PinModel;

class PinTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->pin_stats(inst, &baseline_), XMC_OK);
    }
    xmc_pin_result alloc(size_t n, size_t align = 1) {
        xmc_pin_result r{};
        EXPECT_TRUE(status_is(XMC_OK, api->pin_alloc(inst, n, align, XMC_NO_DEVICE, &r)));
        return r;
    }
    xmc_pin_info query(const void *p, size_t len = 0) {
        xmc_pin_info q{};
        EXPECT_EQ(api->pin_query(inst, p, len, &q), XMC_OK);
        return q;
    }
    xmc_pin_stats stats() {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK);
        return s;
    }
    xmc_pin_stats baseline_{};
};

// ---- PIN-ALLOC -----------------------------------------------------------

TEST_P(PinTest, PIN_ALLOC_ReturnsAlignedLockedBlockOfAtLeastN) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks lock state / RLIMIT_MEMLOCK, which sanitizers hide
    const size_t page = page_size();
    for (size_t align : {size_t{1}, size_t{64}, page, 2 * page, size_t{1} << 20}) {
        for (size_t n : {size_t{1}, page - 1, page, page + 1, 3 * page + 5}) {
            xmc_pin_result r = alloc(n, align);
            ASSERT_NE(r.base, nullptr) << "n=" << n << " align=" << align;
            const auto a = reinterpret_cast<uintptr_t>(r.base);
            EXPECT_EQ(a % page, 0u) << "block not page-aligned, n=" << n;
            EXPECT_EQ(a % align, 0u) << "block not aligned to " << align;
            EXPECT_GE(r.size, n);
            EXPECT_TRUE(lock_state(r.base, n).all_locked)
                << "pages of [" << r.base << ", +" << n << ") are not locked (smaps VmFlags lacks 'lo')";
            std::memset(r.base, 0xA5, n);  // the whole extent is usable memory
            XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
        }
    }
}

TEST_P(PinTest, PIN_ALLOC_RefusesZeroSize) {
    xmc_pin_result r{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_alloc(inst, 0, 64, XMC_NO_DEVICE, &r), "pin_alloc");
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
}

TEST_P(PinTest, PIN_ALLOC_RefusesNonPowerOfTwoAlignment) {
    for (size_t align : {size_t{0}, size_t{3}, size_t{12}, page_size() + 1}) {
        xmc_pin_result r{};
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->pin_alloc(inst, 4096, align, XMC_NO_DEVICE, &r),
                           "pin_alloc")
            << "alignment " << align;
    }
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
    EXPECT_EQ(stats().blocks_now, baseline_.blocks_now);
}

// ---- PIN-QUERY -----------------------------------------------------------

TEST_P(PinTest, PIN_QUERY_EveryInteriorAddressReportsOwningBlock) {
    const size_t n = 3 * page_size() + 100;
    xmc_pin_result r = alloc(n);
    ASSERT_NE(r.base, nullptr);
    auto *b = static_cast<char *>(r.base);
    for (size_t off : {size_t{0}, size_t{1}, n / 2, n - 1, r.size - 1}) {
        xmc_pin_info q = query(b + off);
        EXPECT_EQ(q.pinned, 1) << "offset " << off;
        EXPECT_EQ(q.base, r.base) << "offset " << off;
        EXPECT_EQ(q.size, r.size) << "offset " << off;
    }
    EXPECT_EQ(query(b + r.size).pinned, 0) << "base+size is outside the block";
    EXPECT_EQ(query(b - 1).pinned, 0) << "base-1 is outside the block";
    api->pin_free(inst, r.base);
}

TEST_P(PinTest, PIN_QUERY_RangeIsPinnedOnlyWhollyInsideOneBlock) {
    xmc_pin_result r = alloc(2 * page_size());
    ASSERT_NE(r.base, nullptr);
    auto *b = static_cast<char *>(r.base);
    EXPECT_EQ(query(b, r.size).pinned, 1) << "the whole block";
    EXPECT_EQ(query(b + 1, r.size - 1).pinned, 1) << "interior to the end";
    EXPECT_EQ(query(b + 1, r.size).pinned, 0) << "starts inside, ends one byte past the block";
    EXPECT_EQ(query(b + r.size - 1, 2).pinned, 0) << "last byte plus one outside";
    EXPECT_EQ(query(b - 1, 2).pinned, 0) << "starts before the block";
    EXPECT_EQ(query(b, SIZE_MAX).pinned, 0) << "an extent that wraps the address space";
    api->pin_free(inst, r.base);
}

// ---- stateful sequences against the model --------------------------------

// The system under test for the stateful properties: a backend instance and
// the real address and size of each block the model names by ordinal.
struct PinSut {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    std::vector<xmc_pin_result> blocks;
    xmc_pin_stats baseline{};
    alignas(64) char unknown[256] = {};  // memory no backend ever pinned

    const char *resolve(const PinAddr &a) const {
        if (a.anchor == PinAddr::Unknown || a.block < 0) return unknown + (a.delta % sizeof unknown);
        const auto &b = blocks[a.block];
        const char *base = static_cast<const char *>(b.base);
        return a.anchor == PinAddr::Base ? base + a.delta : base + b.size + a.delta;
    }
    std::vector<std::pair<uint64_t, uint64_t>> real_ranges() const {
        std::vector<std::pair<uint64_t, uint64_t>> r;
        for (const auto &b : blocks) r.emplace_back(reinterpret_cast<uintptr_t>(b.base), b.size);
        return r;
    }
    ~PinSut() {
        // Leave the registry as found: drop every reference still held.
        for (const auto &b : blocks) {
            xmc_pin_info q{};
            // Bounded: a broken backend may answer OK and release nothing.
            for (int tries = 0; tries < 1000 && api->pin_query(inst, b.base, 1, &q) == XMC_OK && q.pinned &&
                                q.base == b.base; ++tries) {
                if (api->pin_unref && api->pin_unref(inst, b.base) == XMC_OK) continue;
                if (api->pin_free(inst, b.base) != XMC_OK) break;
            }
        }
        if (inst) api->close(inst);
    }
};

using PinCmd = rc::state::Command<PinModel, PinSut>;

// An address for a command. Mutating commands take live blocks only (or
// never-pinned memory); queries may also name freed blocks and block ends.
rc::Gen<PinAddr> gen_addr(const PinModel &m, bool live_only) {
    std::vector<int> ids;
    std::vector<size_t> sizes;  // by value: generators may run after m is gone
    for (size_t i = 0; i < m.blocks().size(); ++i) {
        sizes.push_back(m.blocks()[i].bytes);
        if (!live_only || m.blocks()[i].live) ids.push_back(static_cast<int>(i));
    }
    if (ids.empty()) return rc::gen::just(PinAddr{});
    return rc::gen::apply(
        [ids, sizes, live_only](size_t pick, int kind, uint64_t r) {
            const int block = ids[pick % ids.size()];
            const size_t bytes = sizes[block];
            switch (live_only && kind == 4 ? 0 : kind) {
            case 0: case 1: return PinAddr{block, PinAddr::Base, 0};                               // the base
            case 2: return PinAddr{block, PinAddr::Base, bytes > 1 ? 1 + r % (bytes - 1) : 0};  // interior
            case 3: return PinAddr{block, PinAddr::Base, bytes - 1};                           // last asked byte
            case 4: return PinAddr{block, PinAddr::End, r % 64};                               // end and past it
            default: return PinAddr{-1, PinAddr::Unknown, r};
            }
        },
        rc::gen::arbitrary<size_t>(), rc::gen::inRange(0, 6), rc::gen::arbitrary<uint64_t>());
}

std::string show_addr(const PinAddr &a) {
    if (a.anchor == PinAddr::Unknown) return "unknown";
    return "block" + std::to_string(a.block) + (a.anchor == PinAddr::Base ? "+" : ".end+") + std::to_string(a.delta);
}

struct Alloc : PinCmd {
    size_t bytes, align;
    explicit Alloc(const PinModel &)
        : bytes(*rc::gen::weightedOneOf<size_t>({{1, rc::gen::just<size_t>(0)},
                                                 {8, rc::gen::inRange<size_t>(1, 3 * 4096 + 17)}})),
          align(*rc::gen::element<size_t>(1, 8, 4096, 8192, 3, 0)) {}
    void apply(PinModel &m) const override { m.alloc(bytes, align); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        const xmc_status want = next.alloc(bytes, align);
        xmc_pin_result r{};
        const xmc_status got = s.api->pin_alloc(s.inst, bytes, align, XMC_NO_DEVICE, &r);
        RC_ASSERT(got == want);
        if (got != XMC_OK) return;
        RC_ASSERT(reinterpret_cast<uintptr_t>(r.base) != 0u);
        RC_ASSERT(r.size >= bytes);
        RC_ASSERT(reinterpret_cast<uintptr_t>(r.base) % align == 0);
        s.blocks.push_back(r);
    }
    void show(std::ostream &os) const override { os << "alloc(" << bytes << ", align " << align << ")"; }
};

struct Free : PinCmd {
    PinAddr a;
    void checkPreconditions(const PinModel &m) const override {
        // Only live blocks or never-pinned memory: a freed block's memory may
        // already be another block's, which the model cannot know.
        const bool known = a.anchor == PinAddr::Unknown ||
                           (a.block < static_cast<int>(m.blocks().size()) && m.blocks()[a.block].live &&
                            a.anchor == PinAddr::Base);
        RC_PRE(known);
    }
    explicit Free(const PinModel &m) : a(*gen_addr(m, true)) {}
    void apply(PinModel &m) const override { m.free(a); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        RC_ASSERT(s.api->pin_free(s.inst, const_cast<char *>(s.resolve(a))) == next.free(a));
    }
    void show(std::ostream &os) const override { os << "free(" << show_addr(a) << ")"; }
};

struct FreeBase : Free {
    explicit FreeBase(const PinModel &m) : Free(m) {
        if (a.anchor != PinAddr::Unknown) a.delta = 0;  // the base of a live block
    }
};

struct Ref : PinCmd {
    PinAddr a;
    void checkPreconditions(const PinModel &m) const override {
        // Only live blocks or never-pinned memory: a freed block's memory may
        // already be another block's, which the model cannot know.
        const bool known = a.anchor == PinAddr::Unknown ||
                           (a.block < static_cast<int>(m.blocks().size()) && m.blocks()[a.block].live &&
                            a.anchor == PinAddr::Base);
        RC_PRE(known);
    }
    explicit Ref(const PinModel &m) : a(*gen_addr(m, true)) {}
    void apply(PinModel &m) const override { m.ref(a); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        RC_ASSERT(s.api->pin_ref(s.inst, s.resolve(a)) == next.ref(a));
    }
    void show(std::ostream &os) const override { os << "ref(" << show_addr(a) << ")"; }
};

struct Unref : PinCmd {
    PinAddr a;
    void checkPreconditions(const PinModel &m) const override {
        // Only live blocks or never-pinned memory: a freed block's memory may
        // already be another block's, which the model cannot know.
        const bool known = a.anchor == PinAddr::Unknown ||
                           (a.block < static_cast<int>(m.blocks().size()) && m.blocks()[a.block].live &&
                            a.anchor == PinAddr::Base);
        RC_PRE(known);
    }
    explicit Unref(const PinModel &m) : a(*gen_addr(m, true)) {}
    void apply(PinModel &m) const override { m.unref(a); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        RC_ASSERT(s.api->pin_unref(s.inst, s.resolve(a)) == next.unref(a));
    }
    void show(std::ostream &os) const override { os << "unref(" << show_addr(a) << ")"; }
};

struct Query : PinCmd {
    PinAddr a;
    size_t len;
    void checkPreconditions(const PinModel &m) const override {
        RC_PRE(a.block < static_cast<int>(m.blocks().size()));
    }
    explicit Query(const PinModel &m)
        : a(*gen_addr(m, false)), len(*rc::gen::weightedOneOf<size_t>({{2, rc::gen::just<size_t>(0)},
                                                                {3, rc::gen::inRange<size_t>(1, 3 * 4096)},
                                                                {1, rc::gen::inRange<size_t>(4096, 5 * 4096)}})) {}
    void apply(PinModel &) const override {}
    void run(const PinModel &m, PinSut &s) const override {
        const auto addr = reinterpret_cast<uintptr_t>(s.resolve(a));
        const int want = m.containing_block(addr, len, s.real_ranges());
        xmc_pin_info q{};
        RC_ASSERT(s.api->pin_query(s.inst, reinterpret_cast<const void *>(addr), len, &q) == XMC_OK);
        RC_ASSERT(q.pinned == (want >= 0 ? 1 : 0));
        if (want >= 0)
            RC_ASSERT(reinterpret_cast<uintptr_t>(q.base) == reinterpret_cast<uintptr_t>(s.blocks[want].base));
    }
    void show(std::ostream &os) const override { os << "query(" << show_addr(a) << ", " << len << ")"; }
};

struct CheckStats : PinCmd {
    explicit CheckStats(const PinModel &) {}
    void apply(PinModel &) const override {}
    void run(const PinModel &m, PinSut &s) const override {
        uint64_t live_bytes = 0;
        for (size_t i = 0; i < m.blocks().size(); ++i)
            if (m.blocks()[i].live) live_bytes += s.blocks[i].size;
        xmc_pin_stats st{};
        RC_ASSERT(s.api->pin_stats(s.inst, &st) == XMC_OK);
        RC_ASSERT(st.bytes_now == s.baseline.bytes_now + live_bytes);
        RC_ASSERT(st.blocks_now == s.baseline.blocks_now + m.live_blocks());
        RC_ASSERT(st.bytes_peak >= st.bytes_now);
    }
    void show(std::ostream &os) const override { os << "check_stats()"; }
};

std::function<std::unique_ptr<PinSut>(const std::string &)> pin_sut_factory() {
    return [](const std::string &name) -> std::unique_ptr<PinSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<PinSut>();
        s->api = b->api;
        xmc_open_params p{sizeof p, nullptr};
        if (b->api->open(&p, &s->inst) != XMC_OK) return nullptr;
        b->api->pin_stats(s->inst, &s->baseline);
        return s;
    };
}

TEST_P(PinTest, PIN_QUERY_StatefulSequencesAgreeWithModel) {
    check_stateful<PinModel, PinSut>(GetParam(), PinModel{}, pin_sut_factory(), [](const PinModel &m) {
        return rc::state::gen::execOneOfWithArgs<Alloc, FreeBase, Query, Query>()(m);
    });
}

TEST_P(PinTest, PIN_FREE_StatefulSequencesAgreeWithModel) {
    check_stateful<PinModel, PinSut>(GetParam(), PinModel{}, pin_sut_factory(), [](const PinModel &m) {
        return rc::state::gen::execOneOfWithArgs<Alloc, Free, Free>()(m);
    });
}

TEST_P(PinTest, PIN_ACCOUNT_StatefulSequencesAgreeWithModel) {
    check_stateful<PinModel, PinSut>(GetParam(), PinModel{}, pin_sut_factory(), [](const PinModel &m) {
        return rc::state::gen::execOneOfWithArgs<Alloc, FreeBase, CheckStats>()(m);
    });
}

TEST_P(PinTest, PIN_REFS_StatefulSequencesAgreeWithModel) {
    check_stateful<PinModel, PinSut>(GetParam(), PinModel{}, pin_sut_factory(), [](const PinModel &m) {
        return rc::state::gen::execOneOfWithArgs<Alloc, FreeBase, Ref, Unref, Unref>()(m);
    });
}

// ---- PIN-FREE ------------------------------------------------------------

TEST_P(PinTest, PIN_FREE_RefusesInteriorAddress) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks lock state / RLIMIT_MEMLOCK, which sanitizers hide
    xmc_pin_result r = alloc(2 * page_size());
    ASSERT_NE(r.base, nullptr);
    auto *b = static_cast<char *>(r.base);
    const xmc_pin_stats before = stats();
    for (size_t off : {size_t{1}, page_size(), r.size - 1})
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, b + off), "pin_free") << "offset " << off;
    EXPECT_EQ(query(b, r.size).pinned, 1) << "a refused free changed the block";
    EXPECT_EQ(stats().bytes_now, before.bytes_now);
    EXPECT_TRUE(lock_state(r.base, r.size).all_locked);
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

TEST_P(PinTest, PIN_FREE_RefusesUnknownAddress) {
    char on_stack[64];
    std::vector<char> on_heap(8192);
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, on_stack), "pin_free");
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, on_heap.data()), "pin_free");
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, nullptr), "pin_free");
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
}

TEST_P(PinTest, PIN_FREE_RefusesSecondFree) {
    xmc_pin_result keep = alloc(page_size());  // a live neighbour that must survive
    xmc_pin_result r = alloc(page_size());
    ASSERT_NE(r.base, nullptr);
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    const xmc_pin_stats after_first = stats();
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_free(inst, r.base), "pin_free");
    EXPECT_EQ(stats().bytes_now, after_first.bytes_now);
    EXPECT_EQ(stats().blocks_now, after_first.blocks_now);
    EXPECT_EQ(query(keep.base).pinned, 1);
    api->pin_free(inst, keep.base);
}

// ---- PIN-AFTER-FREE ------------------------------------------------------

TEST_P(PinTest, PIN_AFTER_FREE_NoAddressPinnedAndPagesUnlocked) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks lock state / RLIMIT_MEMLOCK, which sanitizers hide
    const size_t n = 3 * page_size();
    xmc_pin_result r = alloc(n);
    ASSERT_NE(r.base, nullptr);
    ASSERT_TRUE(lock_state(r.base, r.size).all_locked);
    auto *b = static_cast<char *>(r.base);
    const size_t size = r.size;
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    for (size_t off = 0; off < size; off += 509) EXPECT_EQ(query(b + off).pinned, 0) << "offset " << off;
    EXPECT_EQ(query(b + size - 1).pinned, 0);
    EXPECT_FALSE(lock_state(b, size).any_locked) << "pages of a freed block are still locked";
}

// ---- PIN-MEMLOCK ---------------------------------------------------------

// Runs `body` in a child that cannot exceed RLIMIT_MEMLOCK: it drops
// CAP_IPC_LOCK (root ignores the limit while holding it) and lowers the limit.
// The child reports through its exit status and a pipe.
struct ChildResult {
    int status = 0;
    std::string message;
};

ChildResult run_limited_child(size_t limit, const std::function<std::string()> &body) {
    int fds[2];
    if (pipe(fds) != 0) return {-1, "pipe failed"};
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        std::string msg;
        cap_t caps = cap_get_proc();
        cap_value_t lock = CAP_IPC_LOCK;
        if (!caps || cap_set_flag(caps, CAP_EFFECTIVE, 1, &lock, CAP_CLEAR) != 0 ||
            cap_set_flag(caps, CAP_PERMITTED, 1, &lock, CAP_CLEAR) != 0 || cap_set_proc(caps) != 0)
            msg = "cannot drop CAP_IPC_LOCK";
        if (caps) cap_free(caps);
        struct rlimit rl{limit, limit};
        if (msg.empty() && setrlimit(RLIMIT_MEMLOCK, &rl) != 0) msg = "cannot lower RLIMIT_MEMLOCK";
        if (msg.empty()) msg = body();
        ssize_t w = write(fds[1], msg.data(), msg.size());
        (void)w;
        _exit(msg.empty() ? 0 : 1);
    }
    close(fds[1]);
    ChildResult res;
    char buf[512];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) res.message.append(buf, k);
    close(fds[0]);
    waitpid(pid, &res.status, 0);
    return res;
}

TEST_P(PinTest, PIN_MEMLOCK_LimitGivesMemlockStatusNoLeakNoAbort) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks lock state / RLIMIT_MEMLOCK, which sanitizers hide
    const size_t limit = 16 * page_size();
    ChildResult res = run_limited_child(limit, [&]() -> std::string {
        xmc_pin_stats before{}, after{};
        api->pin_stats(inst, &before);
        const size_t heap_before = heap_bytes_in_use();
        xmc_pin_result r{};
        const size_t n = 256 * page_size();  // 16 times the limit
        xmc_status st = api->pin_alloc(inst, n, 64, XMC_NO_DEVICE, &r);
        const size_t heap_after = heap_bytes_in_use();
        api->pin_stats(inst, &after);
        xmc_error_info e{};
        api->last_error(inst, &e);
        if (st != XMC_ERR_MEMLOCK)
            return std::string("expected memlock_limit, got ") + xmc_status_string(st);
        if (std::strstr(e.message, "RLIMIT_MEMLOCK") == nullptr || std::strcmp(e.call, "pin_alloc") != 0)
            return std::string("memlock error must name the call and the limit; got: ") + e.message;
        if (after.bytes_now != before.bytes_now || after.blocks_now != before.blocks_now)
            return "accounting changed by a failed allocation";
        if (heap_after > heap_before + 16 * 1024)
            return "the failed allocation leaked " + std::to_string(heap_after - heap_before) + " bytes of heap";
        // Under the limit, pinning still works.
        st = api->pin_alloc(inst, page_size(), 64, XMC_NO_DEVICE, &r);
        if (st != XMC_OK) return std::string("a block under the limit failed: ") + xmc_status_string(st);
        api->pin_free(inst, r.base);
        return "";
    });
    ASSERT_TRUE(WIFEXITED(res.status))
        << "the child died by signal " << (WIFSIGNALED(res.status) ? WTERMSIG(res.status) : 0)
        << ": the backend aborted on the memlock limit";
    EXPECT_EQ(WEXITSTATUS(res.status), 0) << res.message;
}

// ---- PIN-ACCOUNT ---------------------------------------------------------

TEST_P(PinTest, PIN_ACCOUNT_NowIsSumOfLiveBlocksAndPeakIsHighWater) {
    std::vector<xmc_pin_result> blocks;
    uint64_t sum = 0;
    for (size_t n : {page_size(), 5 * page_size() + 1, size_t{100}}) {
        blocks.push_back(alloc(n));
        sum += blocks.back().size;
        EXPECT_EQ(stats().bytes_now, baseline_.bytes_now + sum);
    }
    const xmc_pin_stats full = stats();
    EXPECT_GE(full.bytes_peak, full.bytes_now);
    EXPECT_EQ(full.blocks_now, baseline_.blocks_now + 3);
    for (auto &b : blocks) {
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, b.base));
        sum -= b.size;
        EXPECT_EQ(stats().bytes_now, baseline_.bytes_now + sum) << "bytes pinned did not go down on free";
    }
    EXPECT_EQ(stats().bytes_peak, full.bytes_peak) << "peak must not drop";
}

// ---- PIN-SHARED ----------------------------------------------------------

TEST_P(PinTest, PIN_SHARED_TwoInstancesSeeOneRegistry) {
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    xmc_pin_result r = alloc(2 * page_size());
    ASSERT_NE(r.base, nullptr);
    xmc_pin_info q{};
    ASSERT_EQ(api->pin_query(other, static_cast<char *>(r.base) + 10, 0, &q), XMC_OK);
    EXPECT_EQ(q.pinned, 1) << "the second instance does not see the first one's block";
    EXPECT_EQ(q.base, r.base);
    xmc_pin_stats s1 = stats(), s2{};
    ASSERT_EQ(api->pin_stats(other, &s2), XMC_OK);
    EXPECT_EQ(s1.bytes_now, s2.bytes_now) << "two instances disagree on bytes pinned";
    EXPECT_EQ(api->pin_free(other, r.base), XMC_OK) << "a block is not freeable through another instance";
    EXPECT_EQ(query(r.base).pinned, 0);
    if (query(r.base).pinned) api->pin_free(inst, r.base);
}

// ---- PIN-THREADS ---------------------------------------------------------

TEST_P(PinTest, PIN_THREADS_ConcurrentAllocFreeQueryAgreeWithModel) {
    // Blocks published before the threads start: every thread queries them.
    std::vector<xmc_pin_result> shared;
    for (int i = 0; i < 8; ++i) shared.push_back(alloc(page_size() * (1 + i % 3)));
    const xmc_pin_stats with_shared = stats();
    // Several rounds, the accounting checked after each: lost updates of +n
    // and -n can cancel within one round, rarely in every round.
    constexpr int kThreads = 8, kRounds = 4, kOps = 500;
    std::mutex mu;
    std::vector<std::string> failures;
    auto worker = [&](int round, int tid) {
        std::mt19937_64 rng(static_cast<uint64_t>(round) * 104729 + tid * 7919 + 1);
        PinModel model;  // this thread's own blocks
        std::vector<xmc_pin_result> mine;
        auto fail = [&](const std::string &what) {
            std::lock_guard<std::mutex> l(mu);
            if (failures.size() < 20) failures.push_back("thread " + std::to_string(tid) + ": " + what);
        };
        for (int op = 0; op < kOps; ++op) {
            const int kind = rng() % 5;
            const int nblocks = static_cast<int>(mine.size());
            if (kind == 0 || nblocks == 0) {
                const size_t n = 1 + rng() % (2 * page_size());
                xmc_pin_result r{};
                xmc_status st = api->pin_alloc(inst, n, 64, XMC_NO_DEVICE, &r);
                if (st != model.alloc(n, 64)) fail("alloc status " + std::string(xmc_status_string(st)));
                mine.push_back(r);
            } else if (kind == 1) {
                // Only this thread's live blocks: a freed block's memory may
                // already belong to another thread's block.
                const int b = rng() % nblocks;
                if (!model.blocks()[b].live) continue;
                PinAddr a{b, PinAddr::Base, 0};  // refusals are PIN-FREE's; here frees race allocations
                xmc_status st = api->pin_free(inst, mine[b].base);
                if (st != model.free(a)) fail("free status " + std::string(xmc_status_string(st)));
            } else if (kind == 2 || kind == 3) {
                const int b = rng() % nblocks;
                const size_t off = rng() % model.blocks()[b].bytes;
                PinAddr a{b, PinAddr::Base, off};
                xmc_pin_info q{};
                api->pin_query(inst, static_cast<char *>(mine[b].base) + off, 1, &q);
                // A freed block's memory may be pinned again by another thread:
                // only a live block's answer is determined.
                if (model.blocks()[b].live && (q.pinned != 1 || q.base != mine[b].base))
                    fail("query of a live block's interior did not report it");
                (void)a;
            } else {
                const auto &s = shared[rng() % shared.size()];
                xmc_pin_info q{};
                api->pin_query(inst, static_cast<char *>(s.base) + rng() % s.size, 1, &q);
                if (q.pinned != 1 || q.base != s.base) fail("query of a shared block failed");
            }
        }
        for (size_t b = 0; b < mine.size(); ++b)
            if (model.blocks()[b].live && api->pin_free(inst, mine[b].base) != XMC_OK) fail("final free");
    };
    for (int round = 0; round < kRounds; ++round) {
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, round, t);
        for (auto &t : threads) t.join();
        const xmc_pin_stats now = stats();
        EXPECT_EQ(now.bytes_now, with_shared.bytes_now) << "accounting drifted under concurrency in round " << round;
        EXPECT_EQ(now.blocks_now, with_shared.blocks_now) << "block count drifted in round " << round;
    }
    for (const auto &f : failures) ADD_FAILURE() << f;
    for (auto &s : shared) XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, s.base));
    const xmc_pin_stats end = stats();
    EXPECT_EQ(end.bytes_now, baseline_.bytes_now) << "accounting drifted under concurrency";
    EXPECT_EQ(end.blocks_now, baseline_.blocks_now);
}

// ---- PIN-REFS ------------------------------------------------------------

TEST_P(PinTest, PIN_REFS_ReleasedOnlyWithLastReference) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks lock state / RLIMIT_MEMLOCK, which sanitizers hide
    xmc_pin_result r = alloc(2 * page_size());
    ASSERT_NE(r.base, nullptr);
    auto *b = static_cast<char *>(r.base);
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, b + 10));          // through an interior address
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, b + r.size - 1));
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, r.base));         // the owner's reference
    EXPECT_EQ(query(b).pinned, 1) << "released while two references were held";
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, b + 5));
    EXPECT_EQ(query(b).pinned, 1) << "released on the first of two references";
    EXPECT_TRUE(lock_state(b, r.size).all_locked);
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, b));
    EXPECT_EQ(query(b).pinned, 0) << "not released with the last reference";
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_PINNED_BASE, api->pin_unref(inst, b), "pin_unref");
}

TEST_P(PinTest, PIN_REFS_ReleaseThroughRecordedBaseAfterPointerMoved) {
    xmc_pin_result a = alloc(page_size()), other = alloc(page_size());
    ASSERT_NE(a.base, nullptr);
    char *cursor = static_cast<char *>(a.base) + 100;   // the caller's own pointer
    XMC_ASSERT_STATUS(XMC_OK, api->pin_ref(inst, cursor));
    void *recorded = a.base;
    cursor = static_cast<char *>(other.base);           // ... later redirected elsewhere
    XMC_ASSERT_STATUS(XMC_OK, api->pin_free(inst, recorded));
    XMC_ASSERT_STATUS(XMC_OK, api->pin_unref(inst, recorded));
    EXPECT_EQ(query(recorded).pinned, 0) << "the original block was never released";
    EXPECT_EQ(query(cursor).pinned, 1) << "releasing through the recorded base touched another block";
    api->pin_free(inst, other.base);
    EXPECT_EQ(stats().bytes_now, baseline_.bytes_now);
}

// PIN-DEVICE lives with registration: conformance/tests/test_register.cpp.

XMC_INSTANTIATE_FOR_BACKENDS(PinTest);

} // namespace
} // namespace xmc::conformance
