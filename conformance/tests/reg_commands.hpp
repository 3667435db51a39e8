// The stateful commands of the REG-* properties (conformance/tests/test_register.cpp,
// test_register_use.cpp):
// the system under test (an instance and an arena of its own), its commands
// against the registration model (reference/model/reg_model.hpp), and
// run_stateful, which checks random sequences of a mix of them. Over a fake
// driver every query also holds the driver's own records to the model: a
// driver registration exists exactly where the model has one (REG-REUSE; a
// split registration as its chunks, REG-LARGE).
#pragma once
#include "boundary.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "reg_env.hpp"
#include "reg_model.hpp"
#include "stateful.hpp"

#include <sys/mman.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace xmc::conformance::reg_commands {

using model::RegModel;

struct RegSut {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    const DriverControl *control = nullptr;  // the fake under it, if any
    Arena arena{64};
    ~RegSut() {
        if (inst) {
            arena.unregister_all(api, inst);
            api->close(inst);
        }
    }
};

using RegCmd = rc::state::Command<RegModel, RegSut>;

// The live registrations as spans of arena offsets, and the one that starts
// next after `after` (or nullptr).
inline std::vector<Span> live_spans(const RegModel &m) {
    std::vector<Span> v;
    for (const auto &[b, r] : m.live) v.push_back({b, r.size});
    return v;
}
inline const Span *next_after(const std::vector<Span> &v, size_t after) {
    const Span *n = nullptr;
    for (const Span &x : v)
        if (x.base >= after && (!n || x.base < n->base)) n = &x;
    return n;
}

constexpr size_t kArenaPages = 64;

// REG-DOUBLE: a range of a drawn boundary class (boundary.hpp) around a live
// registration, in pages; or placed right after one (two touching
// registrations, which the adjacent classes need); or anywhere.
struct Register : RegCmd {
    size_t off, n;
    int32_t device;
    explicit Register(const RegModel &m) : device(*rc::gen::inRange<int32_t>(0, m.devices)) {
        const size_t p = m.page;
        const std::vector<Span> live = live_spans(m);
        const int how = live.empty() ? 0 : *rc::gen::weightedOneOf<int>({{2, rc::gen::just(0)}, {3, rc::gen::just(1)},
                                                                         {4, rc::gen::just(2)}});
        if (how == 1) {  // right after a live registration: touching, not overlapping
            const Span &l = *rc::gen::elementOf(live);
            off = l.end();
            n = *rc::gen::inRange<size_t>(1, 4) * p;
        } else if (how == 2) {
            const Span &l = *rc::gen::elementOf(live);
            const size_t k = *rc::gen::inRange<size_t>(0, l.size / p) * p;  // a page of it
            const Span *next = next_after(live, l.end());
            switch (static_cast<Boundary>(*rc::gen::inRange(0, static_cast<int>(kBoundaryClasses)))) {
            case Boundary::Inside: off = l.base + k; n = *rc::gen::inRange<size_t>(1, (l.size - k) / p + 1) * p;
                if (off + n == l.end() && n > p) n -= p;
                break;
            case Boundary::EndsAtEnd: off = l.base + k; n = l.size - k; break;
            case Boundary::OnePastEnd: off = l.base + k; n = l.size - k + p; break;
            case Boundary::IntoUnowned:
                if (*rc::gen::arbitrary<bool>()) { off = l.base + k; n = l.size - k + 2 * p; }
                else { off = l.base >= p ? l.base - p : l.base; n = 2 * p; }
                break;
            case Boundary::SpansAdjacent:
            case Boundary::SpansGap:  // into the next one: touching or across a gap, as placed
                off = l.base + k;
                n = next ? next->base - off + p : l.size - k + p;
                break;
            case Boundary::ZeroLength: off = l.base + k; n = 0; break;
            }
        } else {
            off = *rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(0, 56), [p](size_t i) { return i * p; })},
                                                   {1, rc::gen::inRange<size_t>(0, 56 * p)}});
            n = *rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(1, 7), [p](size_t i) { return i * p; })},
                                                 {1, rc::gen::inRange<size_t>(1, 6 * p)}});
        }
        if (off + n > kArenaPages * p) n = kArenaPages * p - off;  // stay in the arena
    }
    void apply(RegModel &m) const override { m.reg(off, n, device); }
    void run(const RegModel &m, RegSut &s) const override {
        boundary_tally().reach(classify(off, n, live_spans(m), m.page));
        RegModel next = m;
        const xmc_status want = next.reg(off, n, device);
        xmc_reg_info info{};
        const xmc_status got = s.api->reg_register(s.inst, s.arena.base + off, n, device, 0, &info);
        RC_ASSERT(got == want);
        if (got != XMC_OK) return;
        size_t base = 0, size = 0;
        m.recorded(off, n, &base, &size);
        RC_ASSERT(reinterpret_cast<uintptr_t>(info.base) == reinterpret_cast<uintptr_t>(s.arena.base + base));
        RC_ASSERT(info.size == size);
        RC_ASSERT(info.device == device);
    }
    void show(std::ostream &os) const override { os << "register(+" << off << ", " << n << ", device " << device << ")"; }
};

// REG-UNREG-BASE at the boundary classes of an address (boundary.hpp): only a
// recorded base is taken; the base of a registration that touches the one
// before it (adjacent) removes that one alone.
// The base of a registration nothing touches is no boundary class (nullopt).
inline std::optional<Boundary> unregister_class(const RegModel &m, size_t off, bool zero_length) {
    if (zero_length) return Boundary::ZeroLength;
    const std::vector<Span> live = live_spans(m);
    for (const Span &x : live) {
        if (off == x.base) {
            for (const Span &y : live)
                if (y.end() == off) return Boundary::SpansAdjacent;
            return std::nullopt;
        }
        if (off > x.base && off < x.end()) return off == x.end() - 1 ? Boundary::EndsAtEnd : Boundary::Inside;
    }
    bool below = false, above = false;
    for (const Span &x : live) {
        if (x.end() == off) return Boundary::OnePastEnd;
        below = below || x.end() < off;
        above = above || x.base > off;
    }
    return below && above ? Boundary::SpansGap : Boundary::IntoUnowned;
}

struct Unregister : RegCmd {
    size_t off;
    bool zero_length = false;  // first a refused registration of 0 bytes at off
    explicit Unregister(const RegModel &m) {
        const std::vector<Span> live = live_spans(m);
        const size_t any = *rc::gen::inRange<size_t>(0, kArenaPages * m.page);
        if (live.empty() || *rc::gen::inRange(0, 6) == 0) {
            off = any;
            zero_length = *rc::gen::inRange(0, 4) == 0;
            return;
        }
        const Span &l = *rc::gen::elementOf(live);
        const Span *next = next_after(live, l.end());
        switch (*rc::gen::inRange(0, 7)) {
        case 0: case 1: off = l.base; break;                                   // the base
        case 2: off = l.base + (*rc::gen::arbitrary<bool>() ? 1 : m.page); break;  // interior
        case 3: off = l.end() - 1; break;                                      // its last byte
        case 4: off = l.end(); break;                                          // its end (a touching one's base)
        case 5: off = next && next->base > l.end() ? l.end() + (next->base - l.end()) / 2 : any; break;  // a gap
        default: off = l.base; zero_length = true; break;
        }
        if (off >= kArenaPages * m.page) off = any;
    }
    void apply(RegModel &m) const override { m.unreg(off); }
    void run(const RegModel &m, RegSut &s) const override {
        if (const auto c = unregister_class(m, off, zero_length)) boundary_tally().reach(*c);
        if (zero_length) {
            xmc_reg_info info{};
            RC_ASSERT(s.api->reg_register(s.inst, s.arena.base + off, 0, 0, 0, &info) == XMC_ERR_INVALID_ARGUMENT);
        }
        RegModel next = m;
        RC_ASSERT(s.api->reg_unregister(s.inst, s.arena.base + off) == next.unreg(off));
    }
    void show(std::ostream &os) const override {
        os << "unregister(+" << off << (zero_length ? ", after a refused registration of 0 bytes there" : "") << ")";
    }
};

// REG-REUSE: the caller frees pages nothing registers and gets them back at
// the same address: mmap MAP_FIXED over the arena's own pages replaces them
// with fresh ones in one step (munmap then mmap would leave a window in which
// another thread's mmap could take the address).
struct Reuse : RegCmd {
    size_t first, pages;
    explicit Reuse(const RegModel &) : first(*rc::gen::inRange<size_t>(0, 60)), pages(*rc::gen::inRange<size_t>(1, 5)) {}
    void checkPreconditions(const RegModel &m) const override { RC_PRE(m.reuse(first * m.page, pages * m.page)); }
    void apply(RegModel &) const override {}
    void run(const RegModel &m, RegSut &s) const override {
        char *p = s.arena.base + first * m.page;
        const size_t n = pages * m.page;
        void *q = mmap(p, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        RC_ASSERT(reinterpret_cast<uintptr_t>(q) == reinterpret_cast<uintptr_t>(p));
        std::memset(p, 0x22, n);
        // Nothing registers these pages, so the driver must map none of them.
        if (s.control) RC_ASSERT(driver_registrations_in(*s.control, p, n).empty());
    }
    void show(std::ostream &os) const override { os << "reuse(+" << first << " pages, " << pages << " pages)"; }
};

struct Query : RegCmd {
    size_t off;
    explicit Query(const RegModel &m) : off(*rc::gen::inRange<size_t>(0, 64 * m.page)) {}
    void apply(RegModel &) const override {}
    void run(const RegModel &m, RegSut &s) const override {
        xmc_reg_info q{};
        RC_ASSERT(s.api->reg_query(s.inst, s.arena.base + off, &q) == XMC_OK);
        const long long b = m.holder(off);
        RC_ASSERT(q.registered == (b >= 0 ? 1 : 0));
        if (b >= 0) {
            RC_ASSERT(reinterpret_cast<uintptr_t>(q.base) == reinterpret_cast<uintptr_t>(s.arena.base + b));
            RC_ASSERT(q.size == m.live.at(static_cast<size_t>(b)).size);
            RC_ASSERT(q.device == m.live.at(static_cast<size_t>(b)).device);
        }
        if (!s.control) return;
        // REG-REUSE, REG-LARGE: the driver maps exactly the model's ranges, each
        // as its driver registrations, and nothing else of the arena.
        size_t calls = 0, bytes = 0;
        for (const auto &[base, r] : m.live) {
            calls += m.driver_calls(r.size);
            bytes += r.size;
        }
        const auto held = driver_registrations_in(*s.control, s.arena.base, s.arena.bytes);
        size_t held_bytes = 0;
        for (const DriverReg &d : held) {
            held_bytes += d.size;
            const long long owner = m.holder(d.base - reinterpret_cast<uintptr_t>(s.arena.base));
            RC_ASSERT(owner >= 0);  // a driver mapping outlived its registration
        }
        RC_ASSERT(held.size() == calls);
        RC_ASSERT(held_bytes == bytes);
    }
    void show(std::ostream &os) const override { os << "query(+" << off << ")"; }
};

// Random sequences of the commands Cmds (a command listed twice is drawn twice
// as often) agree with the model on `backend`, whose instance `inst` gives the
// alignment policy, over `devices` devices.
template <class... Cmds>
void run_stateful(const std::string &backend, const xmc_backend *api, xmc_instance *inst, int32_t devices) {
    RegModel initial;
    initial.policy = api->reg_align_policy(inst);
    xmc_reg_large_info large{};
    if (api->reg_large_policy(inst, &large) == XMC_OK) {
        initial.large = large.policy;
        initial.limit = static_cast<size_t>(large.limit);
    }
    initial.page = page_size();
    initial.devices = devices;
    auto factory = [](const std::string &name) -> std::unique_ptr<RegSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<RegSut>();
        s->api = b->api;
        xmc_open_params p{sizeof p, nullptr};
        if (b->api->open(&p, &s->inst) != XMC_OK || !s->arena.base) return nullptr;
        s->control = driver_control(b->api, nullptr);
        return s;
    };
    check_stateful<RegModel, RegSut>(backend, initial, factory, [](const RegModel &m) {
        return rc::state::gen::execOneOfWithArgs<Cmds...>()(m);
    });
}

} // namespace xmc::conformance::reg_commands
