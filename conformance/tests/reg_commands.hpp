// The stateful commands of the REG-* properties (conformance/tests/test_register.cpp):
// the system under test (an instance and an arena of its own), its commands
// against the registration model (reference/model/reg_model.hpp), and
// run_stateful, which checks random sequences of a mix of them. Over a fake
// driver every query also holds the driver's own records to the model: a
// driver registration exists exactly where the model has one (REG-REUSE; a
// split registration as its chunks, REG-LARGE).
#pragma once
#include "fixture.hpp"
#include "loader.hpp"
#include "reg_env.hpp"
#include "reg_model.hpp"
#include "stateful.hpp"

#include <sys/mman.h>

#include <memory>
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

struct Register : RegCmd {
    size_t off, n;
    int32_t device;
    explicit Register(const RegModel &m)
        : off(*rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(0, 56), [p = m.page](size_t i) { return i * p; })},
                                               {1, rc::gen::inRange<size_t>(0, 56 * m.page)}})),
          n(*rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(1, 7), [p = m.page](size_t i) { return i * p; })},
                                             {1, rc::gen::inRange<size_t>(1, 6 * m.page)}})),
          device(*rc::gen::inRange<int32_t>(0, m.devices)) {}
    void apply(RegModel &m) const override { m.reg(off, n, device); }
    void run(const RegModel &m, RegSut &s) const override {
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

struct Unregister : RegCmd {
    size_t off;
    explicit Unregister(const RegModel &m) {
        std::vector<size_t> bases;
        for (const auto &[b, r] : m.live) bases.push_back(b);
        const size_t any = *rc::gen::inRange<size_t>(0, 64 * m.page);
        off = bases.empty() || *rc::gen::inRange(0, 4) == 0 ? any
              : bases[*rc::gen::inRange<size_t>(0, bases.size())] + (*rc::gen::inRange(0, 3) == 0 ? m.page : 0);
    }
    void apply(RegModel &m) const override { m.unreg(off); }
    void run(const RegModel &m, RegSut &s) const override {
        RegModel next = m;
        RC_ASSERT(s.api->reg_unregister(s.inst, s.arena.base + off) == next.unreg(off));
    }
    void show(std::ostream &os) const override { os << "unregister(+" << off << ")"; }
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
