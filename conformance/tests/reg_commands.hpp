// The stateful commands of the REG-* properties (conformance/tests/test_register.cpp):
// the system under test (an instance and an arena of its own), its commands
// against the registration model (reference/model/reg_model.hpp), and
// run_stateful, which checks random sequences of a mix of them.
#pragma once
#include "fixture.hpp"
#include "loader.hpp"
#include "reg_env.hpp"
#include "reg_model.hpp"
#include "stateful.hpp"

#include <memory>
#include <string>
#include <vector>

namespace xmc::conformance::reg_commands {

using model::RegModel;

struct RegSut {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
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

struct Query : RegCmd {
    size_t off;
    explicit Query(const RegModel &m) : off(*rc::gen::inRange<size_t>(0, 64 * m.page)) {}
    void apply(RegModel &) const override {}
    void run(const RegModel &m, RegSut &s) const override {
        xmc_reg_info q{};
        RC_ASSERT(s.api->reg_query(s.inst, s.arena.base + off, &q) == XMC_OK);
        const long long b = m.holder(off);
        RC_ASSERT(q.registered == (b >= 0 ? 1 : 0));
        if (b < 0) return;
        RC_ASSERT(reinterpret_cast<uintptr_t>(q.base) == reinterpret_cast<uintptr_t>(s.arena.base + b));
        RC_ASSERT(q.size == m.live.at(static_cast<size_t>(b)).size);
        RC_ASSERT(q.device == m.live.at(static_cast<size_t>(b)).device);
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
    initial.page = page_size();
    initial.devices = devices;
    auto factory = [](const std::string &name) -> std::unique_ptr<RegSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<RegSut>();
        s->api = b->api;
        xmc_open_params p{sizeof p, nullptr};
        if (b->api->open(&p, &s->inst) != XMC_OK || !s->arena.base) return nullptr;
        return s;
    };
    check_stateful<RegModel, RegSut>(backend, initial, factory, [](const RegModel &m) {
        return rc::state::gen::execOneOfWithArgs<Cmds...>()(m);
    });
}

} // namespace xmc::conformance::reg_commands
