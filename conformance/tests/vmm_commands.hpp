// The stateful commands of the VMM-* properties (conformance/tests/test_vmm.cpp,
// test_vmm_requests.cpp, test_vmm_errors.cpp, test_vmm_graph.cpp): the system under
// test, its commands against the slot model (reference/model/slot_model.hpp), and
// run_stateful, which checks random sequences of a mix of them. Each requirement's
// property (in the file of its requirement) names its mix of commands and the
// refusals it draws.
#pragma once
#include "boundary.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "os_facts.hpp"
#include "slot_model.hpp"
#include "stateful.hpp"
#include "vmm_env.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace xmc::conformance::vmm_commands {

using model::kNoTag;
using model::RequestKind;
using model::SlotModel;
using model::SlotState;
using model::Source;

// What a mix of commands may do besides valid calls (each requirement's
// property draws the refusals of that requirement only). Set by the property
// before it runs; each command keeps the mix it was generated under.
// kClosed: commands may name closed slots, and close picks idle or closed ones (VMM-DOUBLE),
// never one with work in flight (kCloseAny's, VMM-CLOSE's own).
enum : unsigned { kBusy = 1, kDup = 2, kRelaunch = 4, kCloseAny = 8, kBadSource = 16, kOneStream = 32, kClosed = 64 };
inline thread_local unsigned t_mix = 0;

// The slot sizes a sequence draws are classes of the backend's granule g (what a 1-byte slot
// rounds up to): 1 byte, half a granule, one granule, one granule and a byte (two granules).
// On a 2 MiB driver (CUDA, Level Zero, both fakes, the H200) that is 1, 1 MiB, 2 MiB and
// 2 MiB + 1; on the host's 64 KiB granule the same classes move a thirty-second of the bytes
// (absolute sizes made the host's sequences page-fault through 2 MiB slots: most of its
// qualification's time). Set by run_stateful from the backend under test.
inline thread_local size_t t_granule = size_t{2} << 20;

// A backend that left a request unfinished past kWaitMs is stuck: its
// instance is left behind, and later sequences on it fail at once with the
// first one's story instead of each waiting (and shrinking) through it.
inline std::map<std::string, std::string> g_stuck;  // backend -> what got stuck

// How a remap's source is cut from pinned memory for the boundary classes of
// VMM-REMAP-COPY (boundary.hpp): each cut has one Source class for the model
// whatever the layout, and the class its range really has is counted.
// Cut::Class: built from the Source class alone (VmmSut::source).
enum class Cut { Class, FromBase, OneByteIn, WholeBlock, OnePast, IntoUnowned, AcrossTwo, Zero };
inline Source cut_class(Cut c, Source of_class) {
    switch (c) {
    case Cut::Class: return of_class;
    case Cut::FromBase: case Cut::WholeBlock: return Source::Valid;                     // a base, block >= length >= slot
    case Cut::OneByteIn: return Source::NotBase;                                        // one byte in
    case Cut::OnePast: case Cut::IntoUnowned: case Cut::AcrossTwo: return Source::BlockTooSmall;  // past the block
    case Cut::Zero: return Source::Short;                                              // 0 bytes
    }
    return of_class;
}
inline const char *cut_name(Cut c) {
    switch (c) {
    case Cut::Class: return "by class";
    case Cut::FromBase: return "from the base, one byte short of the block's end";
    case Cut::OneByteIn: return "one byte into the block";
    case Cut::WholeBlock: return "the whole block";
    case Cut::OnePast: return "the block and one byte past it";
    case Cut::IntoUnowned: return "the block and a page past it";
    case Cut::AcrossTwo: return "from one block's base across the gap into the next";
    case Cut::Zero: return "0 bytes at a base";
    }
    return "?";
}
// The Source class of [addr, addr+len) as a source for a slot of n bytes
// among the pinned `blocks`, in the order the in-tree backends check: NULL,
// shorter than the slot, then the base of one pinned block holding it all.
inline Source source_class(uintptr_t addr, size_t len, size_t n, const std::vector<Span> &blocks) {
    if (addr == 0) return Source::Null;
    if (len < n) return Source::Short;
    for (const Span &b : blocks)
        if (addr >= b.base && addr < b.end()) {
            if (addr != b.base) return Source::NotBase;
            return len <= b.size ? Source::Valid : Source::BlockTooSmall;
        }
    return Source::NotPinned;
}

// The system under test: an instance, two streams for requests and one for a
// consumer, and the real handle of each slot and request the model names.
struct VmmSut {
    std::string backend;
    std::unique_ptr<Env> env;
    xmc_stream *on[2] = {};
    xmc_stream *consumer = nullptr;
    xmc_stream *rec = nullptr;                // where graphs are recorded (VMM-GRAPH): no request runs there
    std::vector<xmc_graph *> graphs;          // by the model's graph index
    std::vector<char *> graph_bufs;           // what each reads the slot into, or writes from
    std::vector<xmc_slot *> slots;
    std::vector<xmc_slot_info> info;
    std::vector<xmc_request *> reqs;
    std::vector<std::vector<void *>> sources;  // per request: the pinned memory its copies read
    std::vector<std::unique_ptr<std::vector<char>>> unpinned;
    uint64_t free0 = 0;

    const xmc_backend *api() const { return env->api; }
    xmc_instance *inst() const { return env->inst; }

    std::map<uintptr_t, size_t> blocks;  // the pinned blocks made here, by base: their real sizes

    void *pinned(size_t n, int tag) {
        xmc_pin_result r{};
        if (api()->pin_alloc(inst(), n, 64, XMC_NO_DEVICE, &r) != XMC_OK) return nullptr;
        env->pinned.push_back(r.base);
        blocks[reinterpret_cast<uintptr_t>(r.base)] = r.size;
        fill(static_cast<char *>(r.base), n, tag);
        return r.base;
    }
    std::vector<Span> pinned_spans() const {
        std::vector<Span> v;
        for (const auto &[b, n] : blocks) v.push_back({b, n});
        return v;
    }
    // A source cut `c` (not Cut::Class) from fresh pinned memory for a slot of n bytes.
    const void *cut_source(Cut c, size_t n, int tag, size_t *bytes, std::vector<void *> *keep) {
        const size_t page = page_size();
        const bool longer = c == Cut::FromBase || c == Cut::OneByteIn;
        char *p = static_cast<char *>(pinned(longer ? n + page : n, tag));
        if (!p) return nullptr;
        keep->push_back(p);
        const size_t size = blocks[reinterpret_cast<uintptr_t>(p)];
        switch (c) {
        case Cut::FromBase: *bytes = size - 1; return p;
        case Cut::OneByteIn: *bytes = n; return p + 1;
        case Cut::WholeBlock: *bytes = size; return p;
        case Cut::OnePast: *bytes = size + 1; return p;
        case Cut::IntoUnowned: *bytes = size + page; return p;
        case Cut::AcrossTwo: {
            char *q = static_cast<char *>(pinned(n, tag));
            if (!q) return nullptr;
            keep->push_back(q);
            char *lo = std::min(p, q), *hi = std::max(p, q);
            *bytes = static_cast<size_t>(hi - lo) + blocks[reinterpret_cast<uintptr_t>(hi)];
            return lo;
        }
        case Cut::Zero: *bytes = 0; return p;
        case Cut::Class: break;
        }
        return p;
    }
    // A source of class `c` for a slot of n bytes, and the length to pass.
    const void *source(Source c, size_t n, int tag, size_t *bytes, std::vector<void *> *keep) {
        *bytes = n;
        char *p = nullptr;
        switch (c) {
        case Source::Valid: p = static_cast<char *>(pinned(n, tag)); break;
        case Source::Null: return nullptr;
        case Source::Short: p = static_cast<char *>(pinned(n, tag)); *bytes = n - 1; break;
        case Source::NotPinned:
            unpinned.push_back(std::make_unique<std::vector<char>>(n, 3));
            return unpinned.back()->data();
        case Source::NotBase: {
            char *b = static_cast<char *>(pinned(n + 4096, tag));
            keep->push_back(b);
            return b + 4096;
        }
        case Source::BlockTooSmall: p = static_cast<char *>(pinned(n / 2, tag)); break;
        }
        keep->push_back(p);
        return p;
    }
    void forget(const std::vector<void *> &keep) {
        for (void *p : keep) {
            blocks.erase(reinterpret_cast<uintptr_t>(p));
            env->free_source(p);
        }
    }
    void add_request(xmc_request *r, std::vector<void *> keep) {
        reqs.push_back(r);
        sources.push_back(std::move(keep));
        env->requests.push_back(r);
    }
    // The first, the last and one more window of a slot's bytes, read on `s`
    // into poisoned buffers and compared with tag's (the deterministic tests
    // compare whole slots; sequences sample, to stay fast).
    bool check(int slot, xmc_stream *s, int tag, uint32_t r) {
        constexpr size_t kWindow = 64 << 10;
        const xmc_slot_info &i = info[slot];
        const size_t w = std::min(kWindow, i.size);
        const size_t offs[3] = {0, i.size - w, (static_cast<size_t>(r) % (i.size / 8)) * 8 / w * w};
        std::vector<char> got[3];
        for (int k = 0; k < 3; ++k) {
            got[k].assign(std::min(w, i.size - offs[k]), kPoison);
            xmc_copy_desc d = Env::linear(static_cast<char *>(i.address) + offs[k], XMC_MEM_DEVICE, got[k].data(),
                                          XMC_MEM_HOST, got[k].size());
            if (api()->copy(inst(), &d, s) != XMC_OK) return false;
        }
        if (api()->stream_synchronize(inst(), s) != XMC_OK) return false;
        for (int k = 0; k < 3; ++k)
            if (tag != kNoTag && mismatch(got[k], tag, offs[k]) != SIZE_MAX) return false;
        return true;
    }
    bool write(int slot, int tag) {
        const xmc_slot_info &i = info[slot];
        std::vector<char> data = pattern(tag, i.size);
        xmc_copy_desc d = Env::linear(data.data(), XMC_MEM_HOST, i.address, XMC_MEM_DEVICE, i.size);
        return api()->copy(inst(), &d, env->io) == XMC_OK && api()->stream_synchronize(inst(), env->io) == XMC_OK;
    }
};

inline std::function<std::unique_ptr<VmmSut>(const std::string &)> vmm_sut_factory(const std::string &options) {
    return [options](const std::string &name) -> std::unique_ptr<VmmSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<VmmSut>();
        s->backend = name;
        if (g_stuck.count(name)) return s;  // no instance: every command fails at once
        std::string why;
        s->env = Env::open(b->api, options.c_str(), &why);
        if (!s->env) return nullptr;
        for (auto *&on : s->on)
            if (b->api->stream_create(s->env->inst, 0, &on) == XMC_OK) s->env->streams.push_back(on);
        if (b->api->stream_create(s->env->inst, 0, &s->consumer) == XMC_OK) s->env->streams.push_back(s->consumer);
        if ((b->api->capabilities & XMC_CAP_GRAPH) && b->api->stream_create(s->env->inst, 0, &s->rec) == XMC_OK)
            s->env->streams.push_back(s->rec);
        uint64_t total = 0;
        b->api->device_free_memory(s->env->inst, 0, &s->free0, &total);
        return s;
    };
}

using VmmCmd = rc::state::Command<SlotModel, VmmSut>;

inline void not_stuck(const VmmSut &s) {
    auto it = g_stuck.find(s.backend);
    if (it != g_stuck.end()) RC_FAIL("the backend got stuck in an earlier sequence: " + it->second);
}


inline int live_slots(const SlotModel &m) {
    int n = 0;
    for (size_t i = 0; i < m.slots().size(); ++i) n += m.live_slot(static_cast<int>(i));
    return n;
}
inline int live_requests(const SlotModel &m) {
    int n = 0;
    for (size_t i = 0; i < m.requests().size(); ++i) n += m.live_request(static_cast<int>(i));
    return n;
}
inline rc::Gen<int> any_of(size_t n) { return n ? rc::gen::inRange(0, static_cast<int>(n)) : rc::gen::just(0); }
// Mostly one of `good` (the targets the command's precondition admits), and
// with `wild` sometimes any index below n (the refusals a mix draws).
inline rc::Gen<int> pick(std::vector<int> good, size_t n, bool wild) {
    if (good.empty()) return any_of(n);
    if (!wild) return rc::gen::elementOf(good);
    return rc::gen::weightedOneOf<int>({{3, rc::gen::elementOf(good)}, {1, any_of(n)}});
}
template <class Pred>
std::vector<int> slots_where(const SlotModel &m, Pred p) {
    std::vector<int> v;
    for (size_t i = 0; i < m.slots().size(); ++i)
        if (p(static_cast<int>(i))) v.push_back(static_cast<int>(i));
    return v;
}
template <class Pred>
std::vector<int> requests_where(const SlotModel &m, Pred p) {
    std::vector<int> v;
    for (size_t i = 0; i < m.requests().size(); ++i)
        if (m.live_request(static_cast<int>(i)) && p(m.requests()[i])) v.push_back(static_cast<int>(i));
    return v;
}

inline bool nameable(unsigned F, const SlotModel &m, int s) {
    return s >= 0 && static_cast<size_t>(s) < m.slots().size() && ((F & (kCloseAny | kClosed)) || m.live_slot(s));
}
inline bool is_released(const SlotModel &m, int s) {
    const SlotState st = m.slots()[s].state;
    return st == SlotState::ReleasePending || st == SlotState::Released;
}
// Nothing in flight on it: closing it races nothing.
inline bool idle(const SlotModel &m, int s) {
    if (s < 0 || size_t(s) >= m.slots().size() || !m.live_slot(s)) return false;
    const model::ModelSlot &x = m.slots()[s];
    if (x.copy_in_flight) return false;
    if (x.state == SlotState::Mapped || x.state == SlotState::Released) return true;
    return x.state == SlotState::RemapPending && m.requests()[x.request].worker_done;
}
inline std::string show_slots(const std::vector<int> &v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return "{" + s + "}";
}
inline const char *source_name(Source c) {
    switch (c) {
    case Source::Valid: return "pinned";
    case Source::Null: return "NULL";
    case Source::Short: return "short";
    case Source::NotPinned: return "unpinned";
    case Source::NotBase: return "interior";
    case Source::BlockTooSmall: return "small-block";
    }
    return "?";
}

struct Create : VmmCmd {
    const unsigned F = t_mix;
    size_t bytes = *rc::gen::element<size_t>(1, t_granule / 2, t_granule, t_granule + 1);
    explicit Create(const SlotModel &) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool room = live_slots(m) < 4 && m.slots().size() < 8;
        RC_PRE(room);
    }
    void apply(SlotModel &m) const override { m.create(bytes); }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s);
        xmc_slot *h = nullptr;
        xmc_slot_info info{};
        RC_ASSERT(s.api()->slot_create(s.inst(), 0, bytes, &h, &info) == XMC_OK);
        RC_ASSERT(info.size >= bytes);
        RC_ASSERT(static_cast<bool>(info.address));
        s.env->slots.push_back(h);
        s.slots.push_back(h);
        s.info.push_back(info);
    }
    void show(std::ostream &os) const override { os << "create(" << bytes << ")"; }
};

struct Write : VmmCmd {
    const unsigned F = t_mix;
    int slot, tag;
    explicit Write(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.accessible(x); }), m.slots().size(), false)),
          tag(*rc::gen::inRange(1, 1 << 30)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.accessible(slot)); }
    void apply(SlotModel &m) const override { m.write(slot, tag); }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s); RC_ASSERT(s.write(slot, tag)); }
    void show(std::ostream &os) const override { os << "write(slot" << slot << ", data " << tag << ")"; }
};

// VMM-STABLE: the bytes at the address create returned are the model's.
struct Check : VmmCmd {
    const unsigned F = t_mix;
    int slot;
    uint32_t where = *rc::gen::arbitrary<uint32_t>();
    explicit Check(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.accessible(x); }), m.slots().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.accessible(slot)); }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        RC_ASSERT(s.check(slot, s.env->io, m.slots()[slot].content, where));
    }
    void show(std::ostream &os) const override { os << "check(slot" << slot << ")"; }
};

struct Release : VmmCmd {
    const unsigned F = t_mix;
    int slot, on;
    explicit Release(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.live_slot(x) && m.slots()[x].state == SlotState::Mapped; }),
                     m.slots().size(), F & (kBusy | kCloseAny))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = nameable(F, m, slot) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy) && m.live_slot(slot)) RC_PRE(m.slots()[slot].state == SlotState::Mapped);
    }
    void apply(SlotModel &m) const override { m.release({slot}); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.release({slot});
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_release(s.inst(), s.slots[slot], s.on[on], &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, {});
    }
    void show(std::ostream &os) const override { os << "release(slot" << slot << ", stream " << on << ")"; }
};

struct Remap : VmmCmd {
    const unsigned F = t_mix;
    int slot, on, tag;
    Cut cut;
    Source src;
    bool defer;
    explicit Remap(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.live_slot(x) && is_released(m, x); }), m.slots().size(),
                     F & (kBusy | kCloseAny))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)), tag(*rc::gen::inRange(1, 1 << 30)),
          // With bad sources: half by class, half cut at the boundary classes.
          cut((F & kBadSource) && *rc::gen::arbitrary<bool>()
                  ? *rc::gen::element(Cut::FromBase, Cut::OneByteIn, Cut::WholeBlock, Cut::OnePast, Cut::IntoUnowned,
                                      Cut::AcrossTwo, Cut::Zero)
                  : Cut::Class),
          src(cut_class(cut, (F & kBadSource) ? *rc::gen::element(Source::Valid, Source::Valid, Source::Null,
                                                                  Source::Short, Source::NotPinned, Source::NotBase,
                                                                  Source::BlockTooSmall)
                                              : Source::Valid)),
          defer(*rc::gen::arbitrary<bool>()) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = nameable(F, m, slot) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy) && m.live_slot(slot)) RC_PRE(is_released(m, slot));
    }
    uint32_t flags() const { return defer ? XMC_REMAP_DEFER_COPY : 0; }
    void apply(SlotModel &m) const override { m.remap({slot}, {src}, {tag}, flags()); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.remap({slot}, {src}, {tag}, flags());
        std::vector<void *> keep;
        size_t bytes = 0;
        const void *p = cut == Cut::Class ? s.source(src, s.info[slot].size, tag, &bytes, &keep)
                                          : s.cut_source(cut, s.info[slot].size, tag, &bytes, &keep);
        boundary_tally().reach(classify(reinterpret_cast<uintptr_t>(p), bytes, s.pinned_spans()));
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_remap(s.inst(), s.slots[slot], s.on[on], p, bytes, flags(), &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, keep);
        else s.forget(keep);
    }
    void show(std::ostream &os) const override {
        os << "remap(slot" << slot << ", " << source_name(src) << " source " << tag
           << (cut == Cut::Class ? "" : std::string(" (") + cut_name(cut) + ")") << (defer ? ", deferred" : "")
           << ", stream " << on << ")";
    }
};

// Several slots, by a mask over the slots so far; with kDup the first is
// sometimes named again.
inline std::vector<int> gen_batch(unsigned F, const SlotModel &m, const std::vector<int> &eligible) {
    const bool wild = (F & kBusy) || eligible.empty() || *rc::gen::inRange(0, 8) == 0;
    std::vector<int> from = eligible;
    if (wild) from = slots_where(m, [](int) { return true; });
    std::vector<int> v;
    const auto mask =
        *rc::gen::container<std::vector<bool>>(std::max<size_t>(from.size(), 1), rc::gen::arbitrary<bool>());
    for (size_t i = 0; i < from.size(); ++i)
        if (mask[i]) v.push_back(from[i]);
    if (v.empty()) v.push_back(from.empty() ? 0 : from.front());
    if ((F & kDup) && *rc::gen::inRange(0, 3) == 0) v.push_back(v.front());
    return v;
}

inline bool batch_ok(unsigned F, const SlotModel &m, const std::vector<int> &v) {
    for (int x : v)
        if (!nameable(F, m, x)) return false;
    return (F & kDup) || std::set<int>(v.begin(), v.end()).size() == v.size();
}

struct ReleaseBatch : VmmCmd {
    const unsigned F = t_mix;
    std::vector<int> slots;
    int on;
    explicit ReleaseBatch(const SlotModel &m)
        : slots(gen_batch(F, m, slots_where(m, [&](int x) {
                              return m.live_slot(x) && m.slots()[x].state == SlotState::Mapped;
                          }))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = batch_ok(F, m, slots) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy))
            for (int x : slots) {
                const bool ok = !m.live_slot(x) || m.slots()[x].state == SlotState::Mapped;
                RC_PRE(ok);
            }
    }
    void apply(SlotModel &m) const override { m.release(slots); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.release(slots);
        std::vector<xmc_slot *> h;
        for (int x : slots) h.push_back(s.slots[x]);
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_release_batch(s.inst(), h.data(), h.size(), s.on[on], &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, {});
    }
    void show(std::ostream &os) const override {
        os << "release_batch(" << show_slots(slots) << ", stream " << on << ")";
    }
};

struct RemapBatch : VmmCmd {
    const unsigned F = t_mix;
    std::vector<int> slots, tags;
    int on;
    bool defer;
    explicit RemapBatch(const SlotModel &m)
        : slots(gen_batch(F, m, slots_where(m, [&](int x) { return m.live_slot(x) && is_released(m, x); }))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)), defer(*rc::gen::arbitrary<bool>()) {
        for (size_t i = 0; i < slots.size(); ++i) tags.push_back(*rc::gen::inRange(1, 1 << 30));
    }
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = batch_ok(F, m, slots) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy))
            for (int x : slots) {
                const bool ok = !m.live_slot(x) || is_released(m, x);
                RC_PRE(ok);
            }
    }
    uint32_t flags() const { return defer ? XMC_REMAP_DEFER_COPY : 0; }
    std::vector<Source> sources() const { return std::vector<Source>(slots.size(), Source::Valid); }
    void apply(SlotModel &m) const override { m.remap(slots, sources(), tags, flags()); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.remap(slots, sources(), tags, flags());
        std::vector<xmc_slot *> h;
        std::vector<const void *> src;
        std::vector<size_t> bytes;
        std::vector<void *> keep;
        for (size_t i = 0; i < slots.size(); ++i) {
            h.push_back(s.slots[slots[i]]);
            size_t n = 0;
            src.push_back(s.source(Source::Valid, s.info[slots[i]].size, tags[i], &n, &keep));
            bytes.push_back(n);
        }
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_remap_batch(s.inst(), h.data(), h.size(), s.on[on], src.data(),
                                                         bytes.data(), flags(), &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, keep);
        else s.forget(keep);
    }
    void show(std::ostream &os) const override {
        os << "remap_batch(" << show_slots(slots) << (defer ? ", deferred" : "") << ", stream " << on << ")";
    }
};

struct Launch : VmmCmd {
    const unsigned F = t_mix;
    int req = 0, on;
    uint32_t index = 0;
    explicit Launch(const SlotModel &m) : on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {
        std::vector<std::pair<int, uint32_t>> good;  // launchable now
        for (size_t r = 0; r < m.requests().size(); ++r)
            for (uint32_t i = 0; i < m.requests()[r].slots.size(); ++i) {
                SlotModel next = m;
                if (next.launch(static_cast<int>(r), i) == XMC_OK) good.emplace_back(static_cast<int>(r), i);
            }
        const bool wild = (F & kRelaunch) && *rc::gen::inRange(0, 3) == 0;
        if (good.empty() || wild) {
            req = *any_of(m.requests().size());
            index = static_cast<uint32_t>(*rc::gen::inRange(0, 3));
        } else {
            std::tie(req, index) = *rc::gen::elementOf(good);
        }
    }
    void checkPreconditions(const SlotModel &m) const override {
        RC_PRE(m.live_request(req));
        if (F & kRelaunch) {
            RC_PRE(index <= m.requests()[req].slots.size());
        } else {
            SlotModel next = m;
            RC_PRE(next.launch(req, index) == XMC_OK);
        }
    }
    void apply(SlotModel &m) const override { m.launch(req, index); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.launch(req, index);
        RC_ASSERT(s.api()->request_launch_copy(s.inst(), s.reqs[req], index, s.on[on]) == want);
    }
    void show(std::ostream &os) const override {
        os << "launch_copy(request" << req << ", slot index " << index << ", stream " << on << ")";
    }
};

struct Wait : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Wait(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &q) { return !q.worker_done; }), m.requests().size(), true)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &m) const override { m.wait(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.wait(req);
        const xmc_status got = s.api()->request_wait(s.inst(), s.reqs[req], kWaitMs);
        if (got == XMC_ERR_TIMEOUT) {
            s.env->leak();
            g_stuck[s.backend] = "request" + std::to_string(req) + " was not finished after " +
                                 std::to_string(kWaitMs) + " ms";
            RC_FAIL(g_stuck[s.backend]);
        }
        // VMM-ASYNC-ERROR: a failure's status may be a finer one than driver_error (out_of_memory).
        if (want == XMC_ERR_DRIVER) RC_ASSERT(got != XMC_OK);
        else RC_ASSERT(got == want);
    }
    void show(std::ostream &os) const override { os << "wait(request" << req << ")"; }
};

struct Adopt : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Adopt(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &q) { return q.kind == RequestKind::Remap && !q.adopted; }),
                    m.requests().size(), F & kBusy)) {}
    void checkPreconditions(const SlotModel &m) const override {
        RC_PRE(m.live_request(req));
        if (!(F & kBusy)) {
            const auto &q = m.requests()[req];
            const bool ok = q.kind == RequestKind::Remap && !q.adopted;
            RC_PRE(ok);
        }
    }
    void apply(SlotModel &m) const override { m.adopt(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.adopt(req);
        RC_ASSERT(s.api()->request_adopt(s.inst(), s.reqs[req]) == want);
    }
    void show(std::ostream &os) const override { os << "adopt(request" << req << ")"; }
};

struct Destroy : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Destroy(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &) { return true; }), m.requests().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &m) const override { m.destroy(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.destroy(req);
        RC_ASSERT(s.api()->request_destroy(s.inst(), s.reqs[req]) == want);
        auto &live = s.env->requests;
        live.erase(std::remove(live.begin(), live.end(), s.reqs[req]), live.end());
        s.forget(s.sources[req]);  // no copy reads them any more
        s.sources[req].clear();
    }
    void show(std::ostream &os) const override { os << "destroy(request" << req << ")"; }
};

struct Close : VmmCmd {
    const unsigned F = t_mix;
    int slot;
    explicit Close(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return (F & kCloseAny) ? m.live_slot(x) : idle(m, x); }),
                     m.slots().size(), F & (kCloseAny | kClosed))) {}
    void checkPreconditions(const SlotModel &m) const override {
        // kCloseAny: work in flight, or closed already; kClosed: closed, or idle.
        const bool ok = (F & kCloseAny)  ? nameable(F, m, slot)
                        : (F & kClosed) ? nameable(F, m, slot) && (!m.live_slot(slot) || idle(m, slot))
                                        : idle(m, slot);
        RC_PRE(ok);
    }
    void apply(SlotModel &m) const override { m.close(slot); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.close(slot);
        RC_ASSERT(s.api()->slot_close(s.inst(), s.slots[slot]) == want);
        auto &open = s.env->slots;
        open.erase(std::remove(open.begin(), open.end(), s.slots[slot]), open.end());
    }
    void show(std::ostream &os) const override { os << "close(slot" << slot << ")"; }
};

struct Query : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Query(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &) { return true; }), m.requests().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        const model::ModelRequest &q = m.requests()[req];
        xmc_request_info i{};
        RC_ASSERT(s.api()->request_query(s.inst(), s.reqs[req], &i) == XMC_OK);
        RC_ASSERT(i.slots == q.slots.size());
        RC_ASSERT(i.adopted == (q.adopted ? 1u : 0u));
        RC_ASSERT((i.status == XMC_OK) == !q.failed);  // VMM-ERROR-CLEAR: only a failed request says so
        if (q.worker_done) {
            RC_ASSERT(i.done == 1);
            RC_ASSERT(i.callback_fired == 1);
            if (q.kind == RequestKind::Remap)
                RC_ASSERT(i.copies_launched ==
                          static_cast<uint32_t>(std::count(q.launched.begin(), q.launched.end(), true)));
        }
    }
    void show(std::ostream &os) const override { os << "query(request" << req << ")"; }
};

// VMM-RELEASE-ORDER / VMM-REMAP-COPY: with nothing pending, the device's free
// memory is what the slots holding memory leave.
struct CheckMemory : VmmCmd {
    const unsigned F = t_mix;
    explicit CheckMemory(const SlotModel &) {}
    void checkPreconditions(const SlotModel &m) const override {
        for (size_t r = 0; r < m.requests().size(); ++r)
            RC_PRE(!m.live_request(static_cast<int>(r)) || m.requests()[r].worker_done);  // r is in range
        for (const auto &x : m.slots()) RC_PRE(x.state != SlotState::ReleasePending);
    }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        uint64_t held = 0;
        for (size_t i = 0; i < m.slots().size(); ++i)
            if (m.holds_memory(static_cast<int>(i))) held += s.info[i].size;
        uint64_t free_now = 0, total = 0;
        RC_ASSERT(s.api()->device_free_memory(s.inst(), 0, &free_now, &total) == XMC_OK);
        RC_ASSERT(free_now == s.free0 - held);
    }
    void show(std::ostream &os) const override { os << "check_free_memory()"; }
};

// VMM-EVENT-WAIT: a consumer told to wait for the request's copies reads
// what they leave, whether or not they have finished. Only once the remap's
// worker is known done: a driver refuses to enqueue a copy that names an
// unmapped range (the told-before-the-copy-exists case, with the old mapping
// still in place, is VMM_EVENT_WAIT_ConsumerToldBeforeTheCopyExistsWaitsForIt).
struct StreamWait : VmmCmd {
    const unsigned F = t_mix;
    int req = 0;
    uint32_t index = 0;
    uint32_t where = *rc::gen::arbitrary<uint32_t>();
    explicit StreamWait(const SlotModel &m) {
        std::vector<std::pair<int, uint32_t>> good;  // copies started, mapping still the request's
        for (size_t r = 0; r < m.requests().size(); ++r)
            for (uint32_t i = 0; i < m.requests()[r].slots.size(); ++i)
                if (m.requests()[r].worker_done && m.after_copies(static_cast<int>(r), i) != kNoTag)
                    good.emplace_back(static_cast<int>(r), i);
        if (!good.empty()) std::tie(req, index) = *rc::gen::elementOf(good);
    }
    void checkPreconditions(const SlotModel &m) const override {
        // One bool: RC_PRE's decomposition does not short-circuit.
        const bool ok = m.live_request(req) && m.requests()[req].worker_done && m.after_copies(req, index) != kNoTag;
        RC_PRE(ok);
    }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        RC_ASSERT(s.api()->request_stream_wait(s.inst(), s.reqs[req], s.consumer) == XMC_OK);
        RC_ASSERT(s.check(m.requests()[req].slots[index], s.consumer, m.after_copies(req, index), where));
    }
    void show(std::ostream &os) const override {
        os << "consumer_waits_and_reads(request" << req << ", slot index " << index << ")";
    }
};

// ---- graphs over slots (VMM-GRAPH) -------------------------------------------

// Records a graph over an accessible slot (the capture stream runs no
// request, so a capture never meets a remap's copies still to come): it reads
// the whole slot into a poisoned buffer, or writes one tag's bytes into it.
struct CaptureGraph : VmmCmd {
    const unsigned F = t_mix;
    int slot;
    bool writes = *rc::gen::arbitrary<bool>();
    int tag = *rc::gen::inRange(1, 1 << 30);
    explicit CaptureGraph(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.accessible(x); }), m.slots().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = m.accessible(slot) && m.graphs().size() < 6;
        RC_PRE(ok);
    }
    void apply(SlotModel &m) const override { m.add_graph(slot, writes, tag); }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s);
        RC_ASSERT(static_cast<bool>(s.rec));
        const xmc_slot_info &i = s.info[slot];
        char *buf = s.env->graph_buffer(i.size);
        RC_ASSERT(static_cast<bool>(buf));
        if (writes) fill(buf, i.size, tag);
        xmc_graph *g = writes ? s.env->capture_write(i, s.rec, buf) : s.env->capture_read(i, s.rec, buf);
        RC_ASSERT(static_cast<bool>(g));
        s.graphs.push_back(g);
        s.graph_bufs.push_back(buf);
    }
    void show(std::ostream &os) const override {
        os << "capture_graph(" << (writes ? "write data " + std::to_string(tag) + " into" : std::string("read"))
           << " slot" << slot << ")";
    }
};

// VMM-GRAPH: a launch of any graph over an accessible slot, on either request
// stream, waited for: a reader's buffer holds, bit for bit, what the model
// says the slot holds; a writer's bytes are the slot's from now on.
struct LaunchGraph : VmmCmd {
    const unsigned F = t_mix;
    int graph, on = *rc::gen::inRange(0, 2);
    explicit LaunchGraph(const SlotModel &m) : graph(0) {
        std::vector<int> good;
        for (size_t g = 0; g < m.graphs().size(); ++g)
            if (m.live_graph(static_cast<int>(g)) && m.accessible(m.graphs()[g].slot)) good.push_back(static_cast<int>(g));
        graph = good.empty() ? 0 : *rc::gen::elementOf(good);
    }
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = m.live_graph(graph) && m.accessible(m.graphs()[graph].slot);
        RC_PRE(ok);
    }
    void apply(SlotModel &m) const override {
        int read = kNoTag;
        m.launch_graph(graph, on, &read);
    }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        int read = kNoTag;
        const xmc_status want = next.launch_graph(graph, on, &read);
        const model::ModelGraph &g = m.graphs()[graph];
        const size_t n = s.info[g.slot].size;
        char *buf = s.graph_bufs[graph];
        if (!g.writes) std::memset(buf, kPoison, n);
        RC_ASSERT(s.api()->graph_launch(s.inst(), s.graphs[graph], s.on[on]) == want);
        RC_ASSERT(s.api()->stream_synchronize(s.inst(), s.on[on]) == XMC_OK);
        if (!g.writes && read != kNoTag) RC_ASSERT(mismatch(std::vector<char>(buf, buf + n), read) == SIZE_MAX);
    }
    void show(std::ostream &os) const override { os << "launch_graph(graph" << graph << ", stream " << on << ")"; }
};

// VMM-GRAPH, VMM-EVENT-WAIT: a reader launched on the consumer stream after it
// was told to wait for a remap's copies reads what they leave.
struct WaitThenLaunchGraph : VmmCmd {
    const unsigned F = t_mix;
    int req = 0, graph = 0;
    uint32_t index = 0;
    explicit WaitThenLaunchGraph(const SlotModel &m) {
        std::vector<std::tuple<int, uint32_t, int>> good;
        for (size_t r = 0; r < m.requests().size(); ++r)
            for (uint32_t i = 0; i < m.requests()[r].slots.size(); ++i)
                for (size_t g = 0; g < m.graphs().size(); ++g)
                    if (m.requests()[r].worker_done && m.after_copies(static_cast<int>(r), i) != kNoTag &&
                        m.live_graph(static_cast<int>(g)) && !m.graphs()[g].writes &&
                        m.graphs()[g].slot == m.requests()[r].slots[i])
                        good.emplace_back(static_cast<int>(r), i, static_cast<int>(g));
        if (!good.empty()) std::tie(req, index, graph) = *rc::gen::elementOf(good);
    }
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = m.live_request(req) && m.requests()[req].worker_done && m.after_copies(req, index) != kNoTag &&
                        m.live_graph(graph) && !m.graphs()[graph].writes &&
                        m.graphs()[graph].slot == m.requests()[req].slots[index];
        RC_PRE(ok);
    }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        const int slot = m.graphs()[graph].slot;
        const size_t n = s.info[slot].size;
        char *buf = s.graph_bufs[graph];
        std::memset(buf, kPoison, n);
        RC_ASSERT(s.api()->request_stream_wait(s.inst(), s.reqs[req], s.consumer) == XMC_OK);
        RC_ASSERT(s.api()->graph_launch(s.inst(), s.graphs[graph], s.consumer) == XMC_OK);
        RC_ASSERT(s.api()->stream_synchronize(s.inst(), s.consumer) == XMC_OK);
        RC_ASSERT(mismatch(std::vector<char>(buf, buf + n), m.after_copies(req, index)) == SIZE_MAX);
    }
    void show(std::ostream &os) const override {
        os << "consumer_waits_then_launches(request" << req << ", slot index " << index << ", graph" << graph << ")";
    }
};

// VMM-BATCH-PARTIAL: set by a property before it runs: the backend's driver can fail a worker's
// k-th map or unmap from now on (a fake driver's fault script; the host's faults are counted from
// open, so its sequences draw no FailBatch).
inline thread_local bool t_fail_hook = false;

// A batch release or remap whose driver work fails at slot `at` of the batch (the fault armed
// just before, with no other worker work pending, so the k-th map or unmap is this batch's).
// VMM-BATCH-PARTIAL: the failure names that slot and carries the driver's code; the model says
// what every slot of the batch is after it, and the later commands check it.
struct FailBatch : VmmCmd {
    const unsigned F = t_mix;
    bool remap = *rc::gen::arbitrary<bool>();
    std::vector<int> slots, tags;
    uint32_t at = 0;
    int on;
    explicit FailBatch(const SlotModel &m) : on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {
        slots = gen_batch(0, m, slots_where(m, [&](int x) {
                              return m.live_slot(x) && m.slots()[x].state ==
                                                           (remap ? SlotState::Released : SlotState::Mapped);
                          }));
        // At full size: inRange scales with the generation size, which kept `at` at 0.
        at = static_cast<uint32_t>(*rc::gen::resize(rc::kNominalSize, rc::gen::inRange<size_t>(0, slots.size())));
        for (size_t i = 0; i < slots.size(); ++i) tags.push_back(*rc::gen::inRange(1, 1 << 30));
    }
    void checkPreconditions(const SlotModel &m) const override {
        RC_PRE(t_fail_hook);
        bool ok = live_requests(m) < 8 && std::set<int>(slots.begin(), slots.end()).size() == slots.size();
        for (int x : slots)
            ok = ok && m.live_slot(x) && m.slots()[x].state == (remap ? SlotState::Released : SlotState::Mapped);
        for (size_t r = 0; r < m.requests().size(); ++r)
            ok = ok && (!m.live_request(static_cast<int>(r)) || m.requests()[r].worker_done);
        RC_PRE(ok);
    }
    void apply(SlotModel &m) const override {
        if (remap) m.remap(slots, std::vector<Source>(slots.size(), Source::Valid), tags, 0);
        else m.release(slots);
        const int r = static_cast<int>(m.requests().size()) - 1;
        m.fail(r, at);
        m.wait(r);
    }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s);
        const FaultHook h = fault_hook(s.api(), !remap, static_cast<int>(at) + 1);
        RC_ASSERT(h.driver != nullptr);
        RC_ASSERT(h.driver->set_faults(h.script.c_str()) == 0);
        std::vector<xmc_slot *> hs;
        std::vector<const void *> src;
        std::vector<size_t> bytes;
        std::vector<void *> keep;
        for (size_t i = 0; i < slots.size(); ++i) {
            hs.push_back(s.slots[slots[i]]);
            if (!remap) continue;
            size_t n = 0;
            src.push_back(s.source(Source::Valid, s.info[slots[i]].size, tags[i], &n, &keep));
            bytes.push_back(n);
        }
        xmc_request *r = nullptr;
        const xmc_status got =
            remap ? s.api()->slot_remap_batch(s.inst(), hs.data(), hs.size(), s.on[on], src.data(), bytes.data(), 0, &r)
                  : s.api()->slot_release_batch(s.inst(), hs.data(), hs.size(), s.on[on], &r);
        if (got != XMC_OK) h.driver->set_faults("");
        RC_ASSERT(got == XMC_OK);
        s.add_request(r, keep);
        const xmc_status st = s.api()->request_wait(s.inst(), r, kWaitMs);
        xmc_error_info e{};
        s.api()->last_error(s.inst(), &e);
        h.driver->set_faults("");
        RC_ASSERT(st != XMC_OK);
        RC_ASSERT(st != XMC_ERR_TIMEOUT);
        RC_ASSERT(e.native_code == h.code);
        const std::string want = "(batch index " + std::to_string(at) + ")";
        RC_ASSERT(std::string(e.message).find(want) != std::string::npos);
        xmc_request_info i{};
        RC_ASSERT(s.api()->request_query(s.inst(), r, &i) == XMC_OK);
        RC_ASSERT(i.done == 1);
        RC_ASSERT(i.status == st);
        RC_ASSERT(i.native_code == h.code);
    }
    void show(std::ostream &os) const override {
        os << (remap ? "remap_batch(" : "release_batch(") << show_slots(slots) << ", stream " << on
           << ") failing at batch index " << at;
    }
};

// Random sequences of the commands Cmds (a command listed twice is drawn twice
// as often), drawing the refusals of `mix`, agree with the model on `backend`
// opened with `options`.
// The granule of `backend` opened with `options`: the size of a 1-byte slot (2 MiB when no slot
// can be made: the property then fails on its own, at its first create).
inline size_t granule_of(const std::string &backend, const std::string &options) {
    const LoadedBackend *b = load_backend(backend, nullptr);
    std::string why;
    std::unique_ptr<Env> env = b ? Env::open(b->api, options.c_str(), &why) : nullptr;
    xmc_slot *slot = nullptr;
    xmc_slot_info info{};
    if (!env || env->api->slot_create(env->inst, 0, 1, &slot, &info) != XMC_OK || !slot) return size_t{2} << 20;
    env->slots.push_back(slot);  // closed with the instance
    return info.size >= 2 ? info.size : size_t{2} << 20;
}

template <class... Cmds>
void run_stateful(unsigned mix, const std::string &backend, const std::string &options) {
    t_mix = mix;
    g_stuck.clear();
    t_granule = granule_of(backend, options);
    check_stateful<SlotModel, VmmSut>(backend, SlotModel{}, vmm_sut_factory(options), [](const SlotModel &m) {
        return rc::state::gen::execOneOfWithArgs<Cmds...>()(m);
    });
}

} // namespace xmc::conformance::vmm_commands
