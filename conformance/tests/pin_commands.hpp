// The stateful commands of the PIN-* properties (conformance/tests/test_pin.cpp,
// test_pin_methods.cpp):
// the system under test, its commands against the pinning model
// (reference/model/pin_model.hpp), and run_stateful, which checks random
// sequences of a mix of them.
#pragma once
#include "boundary.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "pin_env.hpp"
#include "pin_model.hpp"
#include "stateful.hpp"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xmc::conformance::pin_commands {

using model::PinAddr;
using model::PinModel;

// The system under test for the stateful properties: a backend instance and
// the real address and size of each block the model names by ordinal.
struct PinSut {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    std::vector<xmc_pin_result> blocks;
    xmc_pin_stats baseline{};
    xmc_pin_pool_stats baseline_pool{};  // PIN-POOL: what the pool held before
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
inline rc::Gen<PinAddr> gen_addr(const PinModel &m, bool live_only) {
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

inline std::string show_addr(const PinAddr &a) {
    if (a.anchor == PinAddr::Unknown) return "unknown";
    return "block" + std::to_string(a.block) + (a.anchor == PinAddr::Base ? "+" : ".end+") + std::to_string(a.delta);
}

// What a mutating command may name: only live blocks or never-pinned memory,
// for a freed block's memory may already be another block's, which the model
// cannot know.
inline bool known(const PinModel &m, const PinAddr &a) {
    return a.anchor == PinAddr::Unknown ||
           (a.block < static_cast<int>(m.blocks().size()) && m.blocks()[a.block].live && a.anchor == PinAddr::Base);
}

// PIN-POOL: a new block's real range overlaps no live block's: a block is
// never handed to two owners at once (whether or not it came from a pool).
inline bool overlaps_a_live_block(const PinModel &m, const PinSut &s, const xmc_pin_result &r) {
    const auto a = reinterpret_cast<uintptr_t>(r.base);
    for (size_t i = 0; i < m.blocks().size() && i < s.blocks.size(); ++i) {
        if (!m.blocks()[i].live) continue;
        const auto b = reinterpret_cast<uintptr_t>(s.blocks[i].base);
        if (a < b + s.blocks[i].size && b < a + r.size) return true;
    }
    return false;
}

struct Alloc : PinCmd {
    size_t bytes, align;
    // PIN-KINDS: alignments up to the declared minimum, which every backend
    // honours (above it a backend may refuse: the fixed tests check those),
    // and invalid ones.
    explicit Alloc(const PinModel &m)
        : bytes(*rc::gen::weightedOneOf<size_t>({{1, rc::gen::just<size_t>(0)},
                                                 {8, rc::gen::inRange<size_t>(1, 3 * 4096 + 17)}})),
          align(*rc::gen::element<size_t>(1, 8, std::min<size_t>(64, m.rules().min_alignment),
                                          m.rules().min_alignment, 3, 0)) {}
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
        RC_ASSERT(reinterpret_cast<uintptr_t>(r.base) % std::max(align, m.rules().min_alignment) == 0);
        RC_ASSERT(!overlaps_a_live_block(m, s, r));
        s.blocks.push_back(r);
    }
    void show(std::ostream &os) const override { os << "alloc(" << bytes << ", align " << align << ")"; }
};

// PIN-FAIL-CLEAN: a size near the top of the address space is refused with
// its own status, returns no block, and changes neither pin_stats nor the
// pool; the next Alloc (which the model says succeeds) sees anything else.
struct AllocHuge : PinCmd {
    size_t bytes;
    explicit AllocHuge(const PinModel &)
        : bytes(*rc::gen::element<size_t>(SIZE_MAX, (size_t{1} << 63) + 1, size_t{1} << 63, size_t{1} << 62,
                                          size_t{1} << 50)) {}
    void apply(PinModel &m) const override { m.alloc(bytes, 1); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        const xmc_status want = next.alloc(bytes, 1);
        xmc_pin_stats before{}, after{};
        xmc_pin_pool_stats pool_before{}, pool_after{};
        RC_ASSERT(s.api->pin_stats(s.inst, &before) == XMC_OK);
        if (m.rules().pool) RC_ASSERT(s.api->pin_pool_stats(s.inst, &pool_before) == XMC_OK);
        xmc_pin_result r{};
        const xmc_status got = s.api->pin_alloc(s.inst, bytes, 1, XMC_NO_DEVICE, &r);
        RC_ASSERT(PinModel::refusal_matches(want, got));
        RC_ASSERT(reinterpret_cast<uintptr_t>(r.base) == 0u);
        RC_ASSERT(next.blocks().size() == m.blocks().size());
        RC_ASSERT(s.api->pin_stats(s.inst, &after) == XMC_OK);
        RC_ASSERT(after.bytes_now == before.bytes_now);
        RC_ASSERT(after.blocks_now == before.blocks_now);
        RC_ASSERT(after.bytes_peak == before.bytes_peak);
        if (m.rules().pool) {
            RC_ASSERT(s.api->pin_pool_stats(s.inst, &pool_after) == XMC_OK);
            RC_ASSERT(pool_after.blocks_pooled == pool_before.blocks_pooled);
            RC_ASSERT(pool_after.bytes_pooled == pool_before.bytes_pooled);
        }
    }
    void show(std::ostream &os) const override { os << "alloc_huge(" << bytes << ")"; }
};

struct Free : PinCmd {
    PinAddr a;
    void checkPreconditions(const PinModel &m) const override { RC_PRE(known(m, a)); }
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

// pin_ref and pin_unref of an address in a known block: one command but for the call (the
// model's and the backend's) and its name.
template <xmc_status (PinModel::*ModelOp)(const PinAddr &), auto BackendOp, const char *Name>
struct RefCount : PinCmd {
    PinAddr a;
    void checkPreconditions(const PinModel &m) const override { RC_PRE(known(m, a)); }
    explicit RefCount(const PinModel &m) : a(*gen_addr(m, true)) {}
    void apply(PinModel &m) const override { (m.*ModelOp)(a); }
    void run(const PinModel &m, PinSut &s) const override {
        PinModel next = m;
        RC_ASSERT((s.api->*BackendOp)(s.inst, s.resolve(a)) == (next.*ModelOp)(a));
    }
    void show(std::ostream &os) const override { os << Name << "(" << show_addr(a) << ")"; }
};
inline constexpr char kRefName[] = "ref";
inline constexpr char kUnrefName[] = "unref";
using Ref = RefCount<&PinModel::ref, &xmc_backend::pin_ref, kRefName>;
using Unref = RefCount<&PinModel::unref, &xmc_backend::pin_unref, kUnrefName>;

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

// PIN-QUERY at every boundary class (boundary.hpp) around one block: one
// range of each class, the classes that span two reaching the next live block
// in memory, cut at run time from the real addresses (the model knows only
// ordinals). The model over the real ranges says each answer, and the class
// each range really has (classify) is counted: by construction every command
// with two live blocks reaches every class the layout allows.
struct RangeQuery : PinCmd {
    int block;
    uint64_t r1, r2;
    explicit RangeQuery(const PinModel &m)
        : block(*rc::gen::weightedOneOf<int>({{7, gen_live_block(m)}, {1, gen_any_block(m)}})),
          r1(*rc::gen::arbitrary<uint64_t>()), r2(*rc::gen::arbitrary<uint64_t>()) {}
    static rc::Gen<int> gen_any_block(const PinModel &m) {
        return m.blocks().empty() ? rc::gen::just(-1) : rc::gen::inRange(0, static_cast<int>(m.blocks().size()));
    }
    static rc::Gen<int> gen_live_block(const PinModel &m) {
        std::vector<int> live;
        for (size_t i = 0; i < m.blocks().size(); ++i)
            if (m.blocks()[i].live) live.push_back(static_cast<int>(i));
        return live.empty() ? gen_any_block(m) : rc::gen::elementOf(live);
    }
    void checkPreconditions(const PinModel &m) const override {
        RC_PRE(block < static_cast<int>(m.blocks().size()));
    }
    void apply(PinModel &) const override {}
    // The range of class c around block `block`.
    std::pair<uintptr_t, size_t> range(Boundary c, const PinModel &m, const PinSut &s) const {
        if (block < 0) return {reinterpret_cast<uintptr_t>(s.unknown) + r1 % 128, r2 % 128};
        const auto &b = s.blocks[block];
        const uintptr_t base = reinterpret_cast<uintptr_t>(b.base);
        const size_t size = b.size, off = r1 % size, in = r1 % (size - 1);
        switch (c) {
        case Boundary::Inside: return {base + in, 1 + r2 % (size - 1 - in)};
        case Boundary::EndsAtEnd: return {base + off, size - off};
        case Boundary::OnePastEnd: return {base + off, size - off + 1};
        case Boundary::IntoUnowned:
            if (r2 % 2) return {base + off, size - off + 2 + r2 % 4096};  // past the end
            return {base - 1 - r2 % 64, 2 + r2 % 64 + off};               // from before the base
        case Boundary::SpansAdjacent:
        case Boundary::SpansGap: {
            // Into the live block that starts next in memory after this one:
            // one construction for both, the layout decides which it is.
            uintptr_t next = 0;
            size_t next_size = 0;
            for (size_t i = 0; i < m.blocks().size(); ++i) {
                const auto nb = reinterpret_cast<uintptr_t>(s.blocks[i].base);
                if (m.blocks()[i].live && nb >= base + size && (next == 0 || nb < next)) {
                    next = nb;
                    next_size = s.blocks[i].size;
                }
            }
            if (next == 0) return {base + off, size - off + 1 + r2 % 4096};
            return {base + off, next - base - off + 1 + r2 % next_size};
        }
        case Boundary::ZeroLength: return {base + r1 % (size + 1), 0};
        }
        return {base, 0};
    }
    void run(const PinModel &m, PinSut &s) const override {
        std::vector<Span> live;
        for (size_t i = 0; i < m.blocks().size(); ++i)
            if (m.blocks()[i].live) live.push_back({reinterpret_cast<uintptr_t>(s.blocks[i].base), s.blocks[i].size});
        for (Boundary c : all_boundaries()) {
            if (c == Boundary::SpansGap) continue;  // SpansAdjacent's construction reaches both
            const auto [addr, len] = range(c, m, s);
            boundary_tally().reach(classify(addr, len, live));
            const int want = m.containing_block(addr, len, s.real_ranges());
            xmc_pin_info q{};
            RC_ASSERT(s.api->pin_query(s.inst, reinterpret_cast<const void *>(addr), len, &q) == XMC_OK);
            RC_ASSERT(q.pinned == (want >= 0 ? 1 : 0));
            if (want >= 0)
                RC_ASSERT(reinterpret_cast<uintptr_t>(q.base) == reinterpret_cast<uintptr_t>(s.blocks[want].base));
        }
    }
    void show(std::ostream &os) const override {
        os << "query_every_boundary_class(block" << block << ", " << r1 << ", " << r2 << ")";
    }
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

// PIN-POOL: releasing the pool leaves it empty; live blocks stay (Query,
// CheckStats and CheckLocks after it see them).
struct PoolRelease : PinCmd {
    explicit PoolRelease(const PinModel &) {}
    void apply(PinModel &m) const override { m.pool_release(); }
    void run(const PinModel &, PinSut &s) const override {
        RC_ASSERT(s.api->pin_pool_release(s.inst) == XMC_OK);
        xmc_pin_pool_stats p{};
        RC_ASSERT(s.api->pin_pool_stats(s.inst, &p) == XMC_OK);
        RC_ASSERT(p.blocks_pooled == 0u);
        RC_ASSERT(p.bytes_pooled == 0u);
    }
    void show(std::ostream &os) const override { os << "pool_release()"; }
};

// PIN-POOL: the pool holds no more blocks than were freed into it since its
// last release (a pooled block handed out again leaves it).
struct CheckPool : PinCmd {
    explicit CheckPool(const PinModel &) {}
    void apply(PinModel &) const override {}
    void run(const PinModel &m, PinSut &s) const override {
        xmc_pin_pool_stats p{};
        RC_ASSERT(s.api->pin_pool_stats(s.inst, &p) == XMC_OK);
        RC_ASSERT(p.blocks_pooled <= s.baseline_pool.blocks_pooled + m.pooled_blocks());
        RC_ASSERT((p.blocks_pooled == 0) == (p.bytes_pooled == 0));
    }
    void show(std::ostream &os) const override { os << "check_pool()"; }
};

// PIN-POOL, PIN-AFTER-FREE: a live or pooled block's pages are locked (by the
// declared method); a block neither live nor pooled has none locked, where no
// live or pooled block of the model shares a page with it (locks are by page,
// and a backend whose minimum alignment is below a page may place two blocks
// in one). Where the method's lock state cannot be seen (a sanitizer, no
// driver), it checks nothing.
struct CheckLocks : PinCmd {
    explicit CheckLocks(const PinModel &) {}
    void apply(PinModel &) const override {}
    void run(const PinModel &m, PinSut &s) const override {
        if (lock_unobservable_reason(s.api)) return;
        for (size_t i = 0; i < m.blocks().size() && i < s.blocks.size(); ++i) {
            const char *p = static_cast<const char *>(s.blocks[i].base);
            const size_t n = m.blocks()[i].bytes;
            if (m.expect_locked(static_cast<int>(i))) {
                RC_ASSERT(pinned_state(s.api, p, n).all_locked);
                continue;
            }
            bool shared = false;
            const uintptr_t pg = page_size();
            for (size_t j = 0; j < m.blocks().size() && j < s.blocks.size(); ++j) {
                const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(s.blocks[j].base);
                const uintptr_t b_first = b / pg * pg, b_end = (b + s.blocks[j].size + pg - 1) / pg * pg;
                shared = shared || (m.expect_locked(static_cast<int>(j)) && a < b_end && b_first < a + s.blocks[i].size);
            }
            if (!shared) RC_ASSERT(!pinned_state(s.api, p, n).any_locked);
        }
    }
    void show(std::ostream &os) const override { os << "check_locks()"; }
};

// The model's rules for `backend` (PIN-KINDS): what it declares.
inline model::PinRules pin_rules(const LoadedBackend &b) {
    model::PinRules r;
    r.pool = b.has(XMC_CAP_PIN_CACHE);
    r.driver = b.has(XMC_CAP_PIN_DRIVER);
    r.min_alignment = declared_min_alignment(b.api, nullptr);
    return r;
}

inline std::function<std::unique_ptr<PinSut>(const std::string &)> pin_sut_factory() {
    return [](const std::string &name) -> std::unique_ptr<PinSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<PinSut>();
        s->api = b->api;
        xmc_open_params p{sizeof p, nullptr};
        if (b->api->open(&p, &s->inst) != XMC_OK) return nullptr;
        b->api->pin_stats(s->inst, &s->baseline);
        if (b->has(XMC_CAP_PIN_CACHE)) b->api->pin_pool_stats(s->inst, &s->baseline_pool);
        return s;
    };
}

// Random sequences of the commands Cmds (a command listed twice is drawn twice
// as often) agree with the model, under the backend's declared rules, on
// `backend`. The host reference pins with mlock and has no pool: a backend
// declaring otherwise pins by other rules, and the host cannot replay them.
template <class... Cmds>
void run_stateful(const std::string &backend) {
    const LoadedBackend *b = load_backend(backend, nullptr);
    ASSERT_NE(b, nullptr) << "cannot load backend " << backend;
    const model::PinRules rules = pin_rules(*b);
    const std::string no_replay =
        rules.pool || rules.driver
            ? std::string("the host reference pins with mlock and has no pool, and backend '") + b->api->name +
                  "' declares " + (rules.pool ? "pin_cache" : "") + (rules.pool && rules.driver ? " and " : "") +
                  (rules.driver ? "pin_driver" : "") + ", whose rules this sequence follows"
            : "";
    check_stateful<PinModel, PinSut>(
        backend, PinModel{rules}, pin_sut_factory(),
        [](const PinModel &m) { return rc::state::gen::execOneOfWithArgs<Cmds...>()(m); }, no_replay);
}

} // namespace xmc::conformance::pin_commands
