// The harness of the AFF-* transfer tests (conformance/tests/test_transfer.cpp,
// test_transfer_paths.cpp, test_transfer_layouts.cpp; transfer_tests.hpp), on
// every rank of a world (transport_world.hpp): threads over the threads
// transport in `xmc`, MPI processes over gloo in `xmc_multirank`. A case (two
// maps, a plan, element size, budget, storage layouts), one rank's buffers of
// it, and the fixture that runs a case on every rank and a property over
// random cases. Expected contents come from the model's oracle
// (extract_shard of the full tensor); traffic is recorded at the transport.
//
// Buffers: host memory for the host reference and the self-test's broken backends built on it;
// device memory (dev_alloc, filled and read back with the backend's own `copy` on a stream of the
// rank's device) for any other backend that has devices, streams and copies (the broken CUDA
// backends too), one device per rank round-robin (world rank r uses device r mod the device
// count).
//
// Data paths (AFF-PATH): every request names the layouts the plan was made for (AFF-LAYOUT) and
// asks for the path each rank took to each peer. A case runs on a forced path or on the
// backend's choice (XMC_PATH_AUTO); paths_to_test() lists the paths a backend takes in this world
// (each forced once on a small case: taken, or refused by every rank), so that a test can run its
// cases on every one of them. Bytes to a peer on a staged path cross the transport exactly once;
// on any other path (direct, IPC, NCCL) they never do.
//
// Header only: the transfer test files are compiled once (xmc_transfer_tests) and linked into
// `xmc` and, without the other test files, into `xmc_multirank`.
#pragma once
#include "abi_plan.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "stateful.hpp"
#include "transport_delay.hpp"
#include "transport_world.hpp"

#include <xmc/affine.hpp>

#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace xmc::conformance {


namespace aff = xmc::affine;
using Shape = std::vector<int64_t>;
using Failures = std::vector<std::string>;

constexpr uint8_t kPoison = 0xFF;  // never a data byte: data bytes are 1..127, never 0

// ---------- cases ----------

// Where a shard sits in its storage: the element at shard multi-index i is at storage element
// offset + sum(i[d] * strides[d]).
struct Layout {
    int64_t offset = 0;
    std::vector<int64_t> strides;
    uint64_t capacity = 1;  // storage elements (at least one, so that the pointer is never NULL)
};

// Axes in `order` (fastest first). Every element is `gap` storage elements from the next one along
// the fastest axis, and every further axis adds `pad` elements: gap > 1 or pad > 0 leaves holes.
inline Layout make_layout(const Shape &shape, std::vector<size_t> order, int64_t gap, int64_t pad, int64_t offset,
                   int64_t tail) {
    Layout l;
    l.offset = offset;
    l.strides.assign(shape.size(), 0);
    int64_t stride = gap;
    for (size_t axis : order) {
        l.strides[axis] = stride;
        stride = stride * shape[axis] + pad;
    }
    int64_t last = offset;  // the last element's storage index
    for (size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * l.strides[d];
    const bool empty = aff::numel(shape) == 0;
    l.capacity = uint64_t(empty ? offset + 1 : last + 1 + tail);
    return l;
}

// The storage element that holds shard element i (row-major) of a shard of `shape` laid out by l.
inline int64_t storage_element(const Shape &shape, const Layout &l, int64_t i) {
    int64_t at = l.offset;
    for (size_t d = shape.size(); d-- > 0;) {
        at += (i % shape[d]) * l.strides[d];
        i /= shape[d];
    }
    return at;
}

inline std::vector<size_t> row_major_order(const Shape &shape) {
    std::vector<size_t> order(shape.size());
    std::iota(order.rbegin(), order.rend(), size_t{0});
    return order;
}

inline Layout dense_layout(const Shape &shape) { return make_layout(shape, row_major_order(shape), 1, 0, 0, 0); }

// Column-first, every other element, padded rows, an offset: a target with holes everywhere.
inline Layout holey_layout(const Shape &shape) {
    std::vector<size_t> order(shape.size());
    std::iota(order.begin(), order.end(), size_t{0});
    return make_layout(shape, order, 2, 3, 5, 2);
}

struct Case {
    aff::Map source, target;
    aff::Plan plan;
    size_t elem = 4;
    uint64_t budget = 4096;
    uint64_t data_seed = 1;
    std::map<int, Layout> src_layout, tgt_layout;  // by rank label; dense when absent
};

inline Case make_case(const aff::Map &source, const aff::Map &target, size_t elem, uint64_t budget) {
    Case c;
    c.source = source;
    c.target = target;
    c.elem = elem;
    c.budget = budget;
    auto p = aff::plan(source, target);
    if (!p.ok()) throw std::runtime_error("test defect: the planner refused the case: " + p.refusal.message);
    c.plan = *p;
    return c;
}

// The full logical tensor: bytes 1..127 that differ from element to element.
inline aff::Bytes tensor_bytes(const Shape &shape, size_t elem, uint64_t seed) {
    aff::Bytes b(size_t(aff::numel(shape)) * elem);
    for (size_t i = 0; i < b.size(); ++i) {
        uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        b[i] = uint8_t(x % 127 + 1);
    }
    return b;
}

inline const aff::RankLayout *layout_of(const aff::Map &m, int rank) {
    for (const auto &r : m.ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

// ---------- AFF-MAP-FLAT: random flat layouts (rapidcheck; identical on every rank) ----------

template <class T>
T pick(T lo, T hi) {  // uniform in [lo, hi) whatever rapidcheck's current size
    return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

// A ZeRO-3 flat layout of a tensor of `shape` over `ranks` (labels, any order): the tensor is one
// of a few parameters of random shapes laid out by aff::zero3_flat with a random alignment (so
// padding after it, and other parameters before and after it). Now and then every partition is
// held by two ranks (hybrid sharding: replicas), some shards are 2-D or 3-D instead of 1-D (still
// flat: their elements counted in row-major order), and pieces are cut in two along their first
// axis on one rank (replicas cut differently, runs that meet).
inline aff::Map gen_flat_map(const Shape &shape, std::vector<int> ranks) {
    const size_t count = pick<size_t>(1, 4), me = pick<size_t>(0, count);
    std::vector<Shape> params;
    for (size_t k = 0; k < count; ++k) {
        Shape s(size_t(pick(0, 4)));
        for (auto &d : s) d = pick(0, 10) == 0 ? 0 : pick<int64_t>(1, 6);
        params.push_back(k == me ? shape : s);
    }
    std::vector<int> twins;  // hybrid sharding: ranks[k]'s partition is also held by twins[k]
    if (ranks.size() >= 2 && pick(0, 3) == 0) {
        const size_t half = ranks.size() / 2;
        twins.assign(ranks.begin() + std::ptrdiff_t(half), ranks.begin() + std::ptrdiff_t(2 * half));
        ranks.resize(half);
    }
    aff::Map m = aff::zero3_flat(params, ranks, pick<int64_t>(1, 6)).maps[me];
    for (size_t k = 0; k < twins.size(); ++k) {
        std::vector<int> both{m.ranks[k].rank, twins[k]};
        std::sort(both.begin(), both.end());
        for (auto &p : m.ranks[k].pieces) p.locations = both;
        aff::RankLayout twin = m.ranks[k];
        twin.rank = twins[k];
        m.ranks.push_back(std::move(twin));
    }
    for (auto &r : m.ranks) {
        const int64_t n = r.shard_shape[0];
        if (n > 0 && n % 2 == 0 && pick(0, 4) == 0)
            r.shard_shape = shape.size() == 2 ? Shape{1, 2, n / 2} : Shape{2, n / 2};
    }
    for (int cuts = pick(0, 4); cuts > 0 && !shape.empty(); --cuts) {
        aff::RankLayout &r = m.ranks[pick<size_t>(0, m.ranks.size())];
        if (r.pieces.empty()) continue;
        const size_t i = pick<size_t>(0, r.pieces.size());
        const int64_t ext = r.pieces[i].extents[0];
        if (ext < 2) continue;
        const int64_t at = pick<int64_t>(1, ext);
        aff::Piece a = r.pieces[i], b = a;
        a.extents[0] = at;
        b.extents[0] = ext - at;
        b.logical_offset += at * a.logical_strides[0];
        b.shard_offset += aff::numel(a.extents);  // the runs meet
        a.shard_strides = aff::row_major_strides(a.extents);
        b.shard_strides = aff::row_major_strides(b.extents);
        r.pieces[i] = a;
        r.pieces.push_back(b);
    }
    return m;
}

// How a buffer holds a flat shard: dense, offset, every other element, a tail; a shard of more than
// one dim on evenly spaced elements only (row-major, no padded rows: the executors place a run of a
// flat shard on such buffers only).
inline Layout gen_flat_layout(const Shape &shard) {
    if (pick(0, 3) == 0) return dense_layout(shard);
    return make_layout(shard, row_major_order(shard), pick<int64_t>(1, 3), 0, pick<int64_t>(0, 5), pick<int64_t>(0, 3));
}

// ---------- one rank's buffers ----------

// Where a rank's buffers live (see the top of the file).
struct Memory {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    bool device = false;  // device memory of the backend, else host memory
    int32_t ordinal = 0;
    xmc_stream *stream = nullptr;  // on `ordinal`, for the copies in and out (and the transfer)
};

// True for the host reference and the broken backends built on it (host buffers only).
inline bool host_based(const std::string &name) {
    return name == kHostReference ||
           (name.rfind("broken_", 0) == 0 && name.rfind("broken_cuda_", 0) != 0 && name.rfind("broken_ze_", 0) != 0);
}

// True when the tests give this backend device buffers.
inline bool uses_device_buffers(const xmc_backend *a, xmc_instance *in) {
    const std::string name = a->name;
    if (host_based(name)) return false;
    const xmc_caps need = XMC_CAP_STREAM | XMC_CAP_COPY;
    int32_t n = 0;
    return (a->capabilities & need) == need && a->device_count(in, &n) == XMC_OK && n > 0;
}

// One side of a rank's request: storage bytes and the buffer describing the shard in it. With
// device memory, `store` is the host image of the device storage: put() uploads it, fetch()
// reads the device storage back into it.
struct Side {
    std::vector<uint8_t> store;
    xmc_shard_buffer buf{};  // ptr NULL when the rank holds no shard on this side
    Memory mem;
    void *dev = nullptr;  // the device storage, when put on a device
    xmc_slot *slot = nullptr;  // the slot holding the storage instead (put_in_slot)
    void *slot_addr = nullptr;
    size_t slot_size = 0;  // the slot's rounded size (put_in_slot)

    Side() = default;
    Side(const Side &) = delete;
    Side &operator=(const Side &) = delete;
    Side(Side &&o) noexcept { *this = std::move(o); }
    Side &operator=(Side &&o) noexcept {
        if (this != &o) {
            release();
            store = std::move(o.store), buf = o.buf, mem = o.mem, dev = o.dev, slot = o.slot, slot_addr = o.slot_addr;
            slot_size = o.slot_size;
            o.dev = nullptr, o.slot = nullptr, o.slot_addr = nullptr;
            if (!dev && !slot && buf.ptr) buf.ptr = store.data();
        }
        return *this;
    }
    ~Side() { release(); }

    void release() {
        if (dev) mem.api->dev_free(mem.inst, dev);
        dev = nullptr;
        if (slot) mem.api->slot_close(mem.inst, slot);  // unmaps it (VMM-CLOSE)
        slot = nullptr, slot_addr = nullptr;
    }
    // Moves the storage to `m` (device memory: allocated and filled from the image).
    void put(const Memory &m) {
        release();
        mem = m;
        if (!buf.ptr) return;
        if (!m.device) {
            buf.ptr = store.data();
            return;
        }
        if (m.api->dev_alloc(m.inst, m.ordinal, store.size(), &dev) != XMC_OK)
            throw std::runtime_error("test setup: dev_alloc of " + std::to_string(store.size()) + " B failed");
        copy_1d(store.data(), XMC_MEM_HOST, dev, XMC_MEM_DEVICE);
        buf.ptr = dev;
        buf.kind = XMC_MEM_DEVICE;
        buf.device = m.ordinal;
    }
    // Moves the storage into a new slot of m's device (VMM memory, not dev_alloc's; a new slot
    // is mapped), filled from the image. A device backend with slots only (has_slots).
    void put_in_slot(const Memory &m) {
        release();
        mem = m;
        if (!buf.ptr) return;
        xmc_slot_info info{};
        if (m.api->slot_create(m.inst, m.ordinal, store.size(), &slot, &info) != XMC_OK) {
            xmc_error_info e{};
            m.api->last_error(m.inst, &e);
            slot = nullptr;
            throw std::runtime_error("test setup: slot_create of " + std::to_string(store.size()) + " B failed: " +
                                     e.message);
        }
        slot_addr = info.address;
        slot_size = info.size;
        copy_1d(store.data(), XMC_MEM_HOST, slot_addr, XMC_MEM_DEVICE);
        buf.ptr = slot_addr;
        buf.kind = m.device ? XMC_MEM_DEVICE : XMC_MEM_HOST;  // the kind the plan's layouts name
        buf.device = m.ordinal;
    }
    static bool has_slots(const Memory &m) { return m.device && (m.api->capabilities & XMC_CAP_VMM); }
    // The image again from the device storage (nothing to do in host memory).
    void fetch() {
        if (dev) copy_1d(dev, XMC_MEM_DEVICE, store.data(), XMC_MEM_HOST);
        if (slot_addr) copy_1d(slot_addr, XMC_MEM_DEVICE, store.data(), XMC_MEM_HOST);
    }
    // The image into the storage where it lives (host memory: it is the storage).
    void upload() {
        if (dev) copy_1d(store.data(), XMC_MEM_HOST, dev, XMC_MEM_DEVICE);
        if (slot_addr) copy_1d(store.data(), XMC_MEM_HOST, slot_addr, XMC_MEM_DEVICE);
    }
    // Grows the storage to `bytes`, the new bytes poisoned, where it lives.
    void grow(size_t bytes) {
        fetch();
        store.resize(bytes, kPoison);
        const void *had = buf.ptr;
        buf.ptr = store.data();
        if (mem.device) put(mem);
        if (!had) buf.ptr = nullptr;
    }

private:
    void copy_1d(void *from, xmc_mem_kind fk, void *to, xmc_mem_kind tk) {
        xmc_copy_desc c{};
        c.src = xmc_copy_side{from, fk, mem.ordinal, 0, 0, 0, store.size(), store.size()};
        c.dst = xmc_copy_side{to, tk, mem.ordinal, 0, 0, 0, store.size(), store.size()};
        c.width_bytes = store.size();
        c.height = c.depth = 1;
        if (mem.api->copy(mem.inst, &c, mem.stream) != XMC_OK || mem.api->stream_synchronize(mem.inst, mem.stream) != XMC_OK)
            throw std::runtime_error("test setup: copying " + std::to_string(store.size()) + " B " +
                                     (tk == XMC_MEM_DEVICE ? "to" : "from") + " device " + std::to_string(mem.ordinal) +
                                     " failed");
    }
};

// The shard of `rank` in map m, laid out in poisoned storage, with `shard` (row-major bytes) put
// in place when given. Padding (AFF-MAP-FLAT) stays poisoned: no transfer reads or writes it. A
// shard that is all padding holds no element: no buffer (ptr NULL), as for a rank without a shard.
inline Side make_side(const aff::Map &m, int rank, const std::map<int, Layout> &layouts, size_t elem,
               const aff::Bytes *shard) {
    Side s;
    const aff::RankLayout *r = layout_of(m, rank);
    if (!r) return s;
    auto it = layouts.find(rank);
    const Layout l = it != layouts.end() ? it->second : dense_layout(r->shard_shape);
    s.store.assign(l.capacity * elem, kPoison);
    const std::vector<bool> padding = aff::padding_mask(*r);
    if (shard) {
        const Shape &shape = r->shard_shape;
        for (int64_t i = 0; i < aff::numel(shape); ++i)
            if (!padding[size_t(i)])
                std::memcpy(&s.store[size_t(storage_element(shape, l, i)) * elem], &(*shard)[size_t(i) * elem], elem);
    }
    const bool all_padding = !padding.empty() && std::all_of(padding.begin(), padding.end(), [](bool x) { return x; });
    s.buf.ptr = all_padding ? nullptr : s.store.data();
    s.buf.kind = XMC_MEM_HOST;
    s.buf.capacity = l.capacity;
    s.buf.ndim = int32_t(r->shard_shape.size());
    s.buf.offset = l.offset;
    for (size_t d = 0; d < r->shard_shape.size(); ++d) {
        s.buf.shape[d] = r->shard_shape[d];
        s.buf.strides[d] = l.strides[d];
    }
    return s;
}

// "" when the storage holds exactly what it should, else where it first differs.
inline std::string first_difference(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want, size_t elem) {
    if (got.size() != want.size()) return "storage size changed";
    for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] == want[i]) continue;
        char b[200];
        std::snprintf(b, sizeof b, "storage byte %zu (element slot %zu) is 0x%02x, expected 0x%02x%s", i, i / elem,
                      got[i], want[i],
                      want[i] == kPoison ? " (a hole between shard elements: must stay poisoned)"
                      : got[i] == kPoison ? " (a shard element never written)"
                      : got[i] == 0        ? " (zeros written as data)"
                                           : "");
        return b;
    }
    return "";
}

// AFF-LAYOUT: the layouts a case's plan is made for: every rank of either map, its layouts (dense
// where the case names none) in memory of `kind`.
inline std::vector<xmc_plan_layout> plan_layouts(const Case &c, xmc_mem_kind kind) {
    std::map<int, xmc_plan_layout> by_rank;
    auto side = [&](const aff::Map &m, const std::map<int, Layout> &layouts, bool source) {
        for (const aff::RankLayout &r : m.ranks) {
            xmc_plan_layout &pl = by_rank[r.rank];
            pl.rank = r.rank;
            pl.elem_size = c.elem;
            auto it = layouts.find(r.rank);
            const Layout l = it != layouts.end() ? it->second : dense_layout(r.shard_shape);
            xmc_shard_layout &sl = source ? pl.source : pl.target;
            sl.present = 1;
            sl.kind = kind;
            sl.ndim = int32_t(r.shard_shape.size());
            sl.offset = l.offset;
            for (size_t d = 0; d < r.shard_shape.size(); ++d) sl.shape[d] = r.shard_shape[d], sl.strides[d] = l.strides[d];
        }
    };
    side(c.source, c.src_layout, true);
    side(c.target, c.tgt_layout, false);
    std::vector<xmc_plan_layout> out;
    for (auto &[rank, pl] : by_rank) out.push_back(pl);
    return out;
}

// ---------- running a case on every rank ----------

struct PreparedCall;

// What the ranks of a run do. Every field has a default: the whole world runs `c` and joins.
struct RunSpec {
    std::vector<GroupSpec> groups;
    std::function<const Case &(const RankEnv &)> case_of;                              // default: the case
    std::function<void(const RankEnv &, Side &, Side &, xmc_transfer_args &, xmc_group &)> tweak;  // before the call
    std::function<bool(const RankEnv &)> joins;        // false: the rank never calls transfer_execute
    std::function<int64_t(const RankEnv &)> fail_op;   // this rank's transport fails that op (-1: none)
    std::function<int64_t(const RankEnv &)> fail_gather;  // this rank's all_gather with that number fails
    std::function<bool(const RankEnv &)> drop_sends;   // this rank's sends never arrive (a peer that never sends)
    // The plan's layouts as this rank's caller gives them (default: plan_layouts of the case).
    std::function<void(const RankEnv &, std::vector<xmc_plan_layout> &)> tweak_layouts;
    // The path forced on every rank (XMC_PATH_AUTO: the backend's choice); -1: the test's current
    // path (TransferTest::path_).
    int path = -1;
    std::function<int(const RankEnv &)> path_of;       // per rank instead, when set
    // > 0: every rank's end of the transport delays and reorders (DelayingTransport) by this much.
    uint32_t delay_ms = 0;
    // Each rank frees its device source (host memory: poisons it) as soon as its own call returns.
    bool freed_on_return = false;
    // Each rank's source lives in a slot of its device (Side::put_in_slot): VMM memory, which a
    // peer on path IPC imports by a file descriptor of its physical memory, not a legacy handle.
    bool source_in_slot = false;
    uint32_t op_timeout_ms = 10000;
    uint32_t deadline_ms = 60000;
    // Instead of the one transfer_execute call: what this rank calls (prepared transfers: prepare,
    // runs, release), given everything the call would get; returns the status the checks see (the
    // error detail is read after it, as after transfer_execute).
    std::function<xmc_status(const PreparedCall &)> call;
};

// What a RunSpec::call gets: the rank, its backend and instance, the arguments transfer_execute
// would get, and its two sides (their images and memory).
struct PreparedCall {
    const RankEnv &env;
    const xmc_backend *api;
    xmc_instance *inst;
    xmc_transfer_args &args;
    xmc_transfer_stats &stats;
    Side &src, &tgt;
    const Memory &mem;
    const Case &c;
};

// What one rank saw, and what the plan says it should move.
struct RankResult {
    const Case *c = nullptr;
    bool called = false;
    xmc_status status = XMC_OK;
    xmc_error_info error{};
    xmc_transfer_stats stats{};
    double ms = 0;
    std::vector<uint8_t> src_before, tgt_expected;  // storage images
    const Side *src = nullptr, *tgt = nullptr;
    const RecordingTransport *rec = nullptr;
    std::vector<uint64_t> out_bytes, in_bytes, out_segs, in_segs;  // per peer position, from the plan
    uint64_t local_bytes = 0;
    int path = XMC_PATH_AUTO;        // the path this rank's caller forced
    std::vector<xmc_path> paths;     // what the backend reported, per peer position
    uint64_t overtaken = 0;          // with a delaying transport: messages it delivered out of order
};

// A transport that fails one all_gather of this rank (by number, from 0) without reaching the
// inner transport, and passes everything else through.
class GatherFault {
public:
    GatherFault(const xmc_transport *inner, int64_t fail) : inner_(inner), fail_(fail) {
        self_ = xmc_transport{this, send, recv, all_gather, inner->name};
    }
    const xmc_transport *transport() const { return &self_; }

private:
    static int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
        auto *x = static_cast<GatherFault *>(c);
        return x->inner_->send(x->inner_->ctx, peer, buf, bytes, tag);
    }
    static int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
        auto *x = static_cast<GatherFault *>(c);
        return x->inner_->recv(x->inner_->ctx, peer, buf, bytes, tag);
    }
    static int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
        auto *x = static_cast<GatherFault *>(c);
        if (x->gathers_++ == x->fail_) return XMC_ERR_PEER_FAILED;
        return x->inner_->all_gather(x->inner_->ctx, in, out, bytes, timeout_ms);
    }
    const xmc_transport *inner_;
    int64_t fail_;
    int64_t gathers_ = 0;
    xmc_transport self_{};
};
using RankCheck = std::function<void(const RankEnv &, const RankResult &, Failures &)>;

inline std::string join(const Failures &f) {
    std::string s;
    for (const auto &x : f) s += x + "\n";
    return s;
}

// Skips a device backend that has no device. run() runs a case on every rank of the world (or of
// the spec's groups) and returns every rank's failures; check_property() checks random cases.
class TransferTest : public BackendTest {
public:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        // A device backend with no device (no driver, or none found): its buffers would be device
        // memory, which is not there.
        const std::string name = api->name;
        const xmc_caps dev_caps = XMC_CAP_STREAM | XMC_CAP_COPY;
        int32_t n = 0;
        if (name != kHostReference && name.rfind("broken_", 0) != 0 && (api->capabilities & dev_caps) == dev_caps &&
            (api->device_count(inst, &n) != XMC_OK || n == 0))
            XMC_SKIP(SkipKind::NoDevice, "backend '" << name << "' reports no device, and its transfers move device memory");
    }

    // Runs a case on every rank of the spec's groups; returns every rank's failures.
    Failures run(const Case &c, const RunSpec &spec, const RankCheck &check) { return run_on(api, inst, c, spec, check); }

    Failures run_on(const xmc_backend *a, xmc_instance *in, const Case &c, RunSpec spec, const RankCheck &check) {
        if (spec.groups.empty()) spec.groups = {whole_world(world())};
        if (!spec.case_of) spec.case_of = [&c](const RankEnv &) -> const Case & { return c; };
        // Every rank's buffers live until every rank has checked its own (run() returns after
        // that, on every process): a source freed while a peer still reads it is tested on
        // purpose (freed_on_return), never by the timing of another test.
        std::mutex kept_mu;
        std::vector<Side> kept;
        return world().run(spec.groups, spec.op_timeout_ms, spec.deadline_ms, [&](const RankEnv &env) {
            Failures f;
            const Case &rc = spec.case_of(env);
            const int me = env.label();
            const aff::Bytes full = tensor_bytes(rc.source.shape, rc.elem, rc.data_seed);
            aff::Bytes src_shard, tgt_shard;
            if (layout_of(rc.source, me)) src_shard = *aff::extract_shard(rc.source, me, full, rc.elem);
            if (layout_of(rc.target, me)) tgt_shard = *aff::extract_shard(rc.target, me, full, rc.elem);
            Memory mem{a, in};
            mem.device = uses_device_buffers(a, in);
            struct StreamGuard {
                Memory &m;
                ~StreamGuard() {
                    if (m.stream) m.api->stream_destroy(m.inst, m.stream);
                }
            } stream_guard{mem};
            if (mem.device) {
                int32_t n = 1;
                a->device_count(in, &n);
                mem.ordinal = env.world_rank % std::max(n, 1);
                if (a->stream_create(in, mem.ordinal, &mem.stream) != XMC_OK)
                    return Failures{"test setup: stream_create on device " + std::to_string(mem.ordinal) + " failed"};
            }
            Side src = make_side(rc.source, me, rc.src_layout, rc.elem, &src_shard);
            Side tgt = make_side(rc.target, me, rc.tgt_layout, rc.elem, nullptr);
            // (A host backend's slots are host memory: a stream of its own for the copies in.)
            if (spec.source_in_slot && !mem.stream && (a->capabilities & XMC_CAP_STREAM) &&
                a->stream_create(in, 0, &mem.stream) != XMC_OK)
                return Failures{"test setup: stream_create failed"};
            if (spec.source_in_slot) src.put_in_slot(mem);
            else src.put(mem);
            tgt.put(mem);

            // The world's transport, maybe delaying and reordering, then recorded, maybe faulty:
            // what the recording sees is what the backend sent and received.
            std::optional<DelayingTransport> delaying;
            const xmc_transport *base = env.transport;
            if (spec.delay_ms > 0) {
                delaying.emplace(base, spec.delay_ms, 3 * spec.delay_ms);
                base = delaying->transport();
            }
            RecordingTransport rec(base, int(env.labels.size()));
            if (spec.fail_op) rec.fail_op = spec.fail_op(env);
            if (spec.drop_sends) rec.drop_sends = spec.drop_sends(env);
            xmc_group group = env.group_view();
            group.transport = rec.transport();
            std::optional<GatherFault> gather_fault;
            if (spec.fail_gather && spec.fail_gather(env) >= 0) {
                gather_fault.emplace(group.transport, spec.fail_gather(env));
                group.transport = gather_fault->transport();
            }
            const std::vector<xmc_segment> segs = abi_segments(rc.plan);
            std::vector<xmc_plan_layout> layouts = plan_layouts(rc, mem.device ? XMC_MEM_DEVICE : XMC_MEM_HOST);
            if (spec.tweak_layouts) spec.tweak_layouts(env, layouts);
            RankResult r;
            r.path = spec.path_of ? spec.path_of(env) : spec.path >= 0 ? spec.path : path_;
            // XMC_PATH_COUNT_: never written by the backend (a value outside the enum would be
            // undefined behaviour to load: UBSan stopped every transfer test on it)
            r.paths.assign(env.labels.size(), XMC_PATH_COUNT_);
            xmc_transfer_args args{};
            args.struct_size = sizeof args;
            args.plan = xmc_plan_view{segs.data(), segs.size(), rc.plan.digest};
            args.source = src.buf;
            args.target = tgt.buf;
            args.elem_size = rc.elem;
            args.staging_budget = rc.budget;
            args.group = &group;
            args.stream = mem.stream;
            args.path = xmc_path(r.path);
            args.peer_paths = r.paths.data();
            args.layouts = layouts.data();
            args.layout_count = layouts.size();
            if (spec.tweak) spec.tweak(env, src, tgt, args, group);

            r.c = &rc;
            r.src = &src;
            r.tgt = &tgt;
            r.rec = &rec;
            r.src_before = src.store;
            r.tgt_expected = make_side(rc.target, me, rc.tgt_layout, rc.elem, &tgt_shard).store;
            const size_t n = env.labels.size();
            r.out_bytes.assign(n, 0), r.in_bytes.assign(n, 0), r.out_segs.assign(n, 0), r.in_segs.assign(n, 0);
            auto position = [&](int label) {
                return size_t(std::find(env.labels.begin(), env.labels.end(), label) - env.labels.begin());
            };
            for (const aff::Segment &s : rc.plan.segments) {
                const uint64_t bytes = uint64_t(aff::numel(s.extents)) * rc.elem;
                if (bytes == 0) continue;
                if (s.src_rank == me && s.tgt_rank == me) r.local_bytes += bytes;
                else if (s.src_rank == me) r.out_bytes[position(s.tgt_rank)] += bytes, r.out_segs[position(s.tgt_rank)] += 1;
                else if (s.tgt_rank == me) r.in_bytes[position(s.src_rank)] += bytes, r.in_segs[position(s.src_rank)] += 1;
            }

            if (!spec.joins || spec.joins(env)) {
                r.called = true;
                const auto t0 = std::chrono::steady_clock::now();
                r.status = spec.call ? spec.call(PreparedCall{env, a, in, args, r.stats, src, tgt, mem, rc})
                                     : a->transfer_execute(in, &args, &r.stats);
                if (spec.freed_on_return) {
                    if (src.dev) src.release();
                    else std::fill(src.store.begin(), src.store.end(), kPoison);
                }
                r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                a->last_error(in, &r.error);
                // Which paths this world ran, for qualify's log (count_path_taken).
                if (r.status == XMC_OK)
                    for (size_t q = 0; q < n; ++q)
                        if (r.out_bytes[q] + r.in_bytes[q] > 0) count_path_taken(r.paths[q]);
            }
            src.fetch();
            tgt.fetch();
            if (delaying) r.overtaken = delaying->overtaken();
            check(env, r, f);
            std::lock_guard<std::mutex> lock(kept_mu);
            kept.push_back(std::move(src));
            kept.push_back(std::move(tgt));
            return f;
        });
    }

    // ---- the paths a backend takes in this world (AFF-PATH) ----

    // What forcing one path gave on a small mixed case (every rank with data to every other).
    struct PathTrial {
        xmc_path path = XMC_PATH_AUTO;
        bool taken = false;    // every rank succeeded, the target exact, every peer reported on it
        bool refused = false;  // every rank refused before any write
        Failures problems;     // neither: what each rank saw
        std::string reason;    // why it was refused (rank 0's message)
    };
    struct PathsHere {
        std::vector<PathTrial> trials;   // direct, ipc, nccl, staged
        std::vector<xmc_path> taken;     // the paths to test on
        xmc_path chosen = XMC_PATH_AUTO; // what the backend picks unforced, to its peers
        Failures problems;
    };

    // The path the world is told to test on (XMC_TRANSFER_PATH=direct|ipc|nccl|staged, set by
    // the multirank tier's per-path runs), or XMC_PATH_AUTO: every path the backend takes here.
    static xmc_path configured_path() {
        const char *e = std::getenv("XMC_TRANSFER_PATH");
        const std::string v = e ? e : "";
        if (v == "direct") return XMC_PATH_DIRECT;
        if (v == "ipc") return XMC_PATH_IPC;
        if (v == "nccl") return XMC_PATH_NCCL;
        if (v == "staged") return XMC_PATH_STAGED;
        return XMC_PATH_AUTO;
    }

    // Forces each path once on a small case (cached per backend and world). A path is taken when
    // every rank succeeds with an exact target and reports that path for every peer; refused when
    // every rank refuses and nothing is written; anything else is a problem of the backend.
    const PathsHere &paths_here() {
        static std::map<std::string, PathsHere> cache;
        const std::string key = std::string(api->name) + "/" + world().name() + "/" + std::to_string(world().size());
        if (auto it = cache.find(key); it != cache.end()) return it->second;
        PathsHere h;
        std::vector<int> all(size_t(world().size()));
        std::iota(all.begin(), all.end(), 0);
        const Case c = make_case(aff::split_even({8, 6}, 0, all), aff::split_even({8, 6}, 1, all), 4, 16);
        // Each rank reports its outcome as a line of its own (run() gathers every rank's lines, in
        // every world): "path-outcome taken [chosen N]", "path-outcome refused: why", or a problem.
        static const std::string kOutcome = "path-outcome ";
        for (xmc_path p : {XMC_PATH_DIRECT, XMC_PATH_IPC, XMC_PATH_NCCL, XMC_PATH_STAGED, XMC_PATH_AUTO}) {
            PathTrial t;
            t.path = p;
            RunSpec spec;
            spec.path = p;
            spec.op_timeout_ms = 5000;
            const Failures lines = run(c, spec, [p](const RankEnv &env, const RankResult &r, Failures &out) {
                const bool untouched = std::all_of(r.tgt->store.begin(), r.tgt->store.end(), [](uint8_t b) { return b == kPoison; });
                if (r.status == XMC_OK && first_difference(r.tgt->store, r.tgt_expected, r.c->elem).empty()) {
                    std::string chosen;
                    for (size_t q = 0; q < r.paths.size(); ++q) {
                        const bool data = r.out_bytes[q] + r.in_bytes[q] > 0;
                        if (data && (r.paths[q] <= XMC_PATH_AUTO || r.paths[q] >= XMC_PATH_COUNT_ ||
                                     (p != XMC_PATH_AUTO && r.paths[q] != p)))
                            out.push_back("forced " + path_str(p) + ", reported " + path_str(r.paths[q]) + " to peer " +
                                          std::to_string(q));
                        if (data && env.index == 0 && q == 1) chosen = " chosen " + std::to_string(int(r.paths[q]));
                    }
                    if (out.empty()) out.push_back(kOutcome + "taken" + chosen);
                } else if (r.status == XMC_ERR_REFUSED && untouched) {
                    out.push_back(kOutcome + "refused: " + r.error.message);
                } else {
                    out.push_back(std::string("forcing path ") + path_str(p) + ": " + xmc_status_string(r.status) +
                                  (untouched ? "" : ", target written") + ": " + r.error.message);
                }
            });
            int taken = 0, refused = 0;
            Failures problems;
            for (const std::string &l : lines) {
                const size_t at = l.find(kOutcome);
                if (at == std::string::npos) {
                    problems.push_back(l);
                    continue;
                }
                const std::string what = l.substr(at + kOutcome.size());
                if (what.rfind("taken", 0) == 0) {
                    ++taken;
                    if (const size_t k = what.find("chosen "); k != std::string::npos)
                        h.chosen = xmc_path(std::atoi(what.c_str() + k + 7));
                } else {
                    ++refused;
                    if (t.reason.empty()) t.reason = what.substr(std::string("refused: ").size());
                }
            }
            const int n = world().size();
            t.taken = problems.empty() && taken == n;
            t.refused = problems.empty() && refused == n;
            if (!t.taken && !t.refused)
                t.problems = !problems.empty() ? problems
                                               : Failures{"forcing path " + path_str(p) + ": " + std::to_string(taken) +
                                                          " ranks took it, " + std::to_string(refused) + " refused"};
            if (p == XMC_PATH_AUTO) {
                if (!t.taken) h.problems.push_back("the backend's own choice of paths failed: " + join(t.problems));
                continue;
            }
            if (t.taken) h.taken.push_back(p);
            for (const auto &x : t.problems) h.problems.push_back(x);
            h.trials.push_back(t);
        }
        return cache[key] = h;
    }

    // The paths the tests run their cases on: the configured one, else every path taken here.
    std::vector<xmc_path> paths_to_test() {
        if (xmc_path p = configured_path(); p != XMC_PATH_AUTO) return {p};
        const PathsHere &h = paths_here();
        return h.taken.empty() ? std::vector<xmc_path>{XMC_PATH_AUTO} : h.taken;
    }

    static std::string path_str(int p) {
        switch (p) {
        case XMC_PATH_AUTO: return "auto";
        case XMC_PATH_DIRECT: return "direct";
        case XMC_PATH_IPC: return "ipc";
        case XMC_PATH_NCCL: return "nccl";
        case XMC_PATH_STAGED: return "staged";
        default: return "path " + std::to_string(p);
        }
    }

    // The path run() forces when a spec names none (a test's loop over paths_to_test() sets it).
    int path_ = XMC_PATH_AUTO;

    // Runs a property: cases drawn by `gen` (the same on every rank), each run on all ranks of the
    // world and checked by `check`. A failure names the backend, the transport, the seed and the
    // RC_PARAMS reproducer. It then replays the minimal case on the host reference: if the host
    // passes, the backend broke the contract; if it fails too, the suite or the reference is at fault.
    void check_property(const std::function<Case()> &gen, const RankCheck &check) {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        rc::detail::TestMetadata meta;
        meta.id = std::string(info->test_suite_name()) + "/" + info->name();
        meta.description = info->name();
        rc::detail::TestParams params = rc::detail::configuration().testParams;
        params.maxSuccess = std::min(params.maxSuccess, world().property_cases());
        // Every path this backend takes here gets its share of the cases (at least 10 each).
        const std::vector<xmc_path> paths = paths_to_test();
        params.maxSuccess = std::max(10, params.maxSuccess / int(paths.size()));
        for (xmc_path p : paths) {
            path_ = p;
            check_property_on_path(gen, check, meta, params);
        }
        path_ = XMC_PATH_AUTO;
    }

    void check_property_on_path(const std::function<Case()> &gen, const RankCheck &check,
                                const rc::detail::TestMetadata &meta, const rc::detail::TestParams &params) {
        std::optional<Case> last_failing;  // rapidcheck shrinks: the last failing case is the minimal one
        const auto result = rc::detail::checkTestable(
            [&] {
                const Case c = gen();
                const Failures f = run(c, {}, check);
                if (!f.empty()) {
                    last_failing = c;
                    RC_FAIL(join(f) + describe(c));
                }
            },
            meta, params);
        if (result.template is<rc::detail::SuccessResult>()) return;
        std::ostringstream os;
        os << "property failed on backend '" << api->name << "' over the " << world().name() << " transport ("
           << world().size() << " ranks, seed " << rc_seed() << "), data path " << path_str(path_) << "\n";
        rc::detail::printResultMessage(result, os);
        if (result.template is<rc::detail::FailureResult>())
            os << "\nreproduce: RC_PARAMS=\""
               << rc_reproduce_string(meta.id, result.template get<rc::detail::FailureResult>().reproduce) << "\"\n";
        if (last_failing) os << "replay of the minimal case on the host reference: " << replay_on_host(*last_failing, check);
        ADD_FAILURE() << os.str();
    }

    std::string replay_on_host(const Case &c, const RankCheck &check) {
        if (std::string(api->name) == kHostReference)
            return "the failing backend is the host reference itself: a defect of the reference, the suite or the model";
        std::string where;
        const LoadedBackend *host = load_reference(&where);  // the runner's own, never a guess (stateful.hpp)
        if (!host) return "no verdict: reference not found (looked for " + where + ")";
        xmc_instance *hi = nullptr;
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        if (host->api->open(&params, &hi) != XMC_OK) return "no verdict: the host reference " + host->path + " did not open";
        RunSpec on_its_own_path;  // the host takes its one path
        on_its_own_path.path = XMC_PATH_AUTO;
        const bool host_ok = run_on(host->api, hi, c, on_its_own_path, check).empty();
        host->api->close(hi);
        return host_ok ? "host passes -> verdict: contract violation by backend '" + std::string(api->name) + "'"
                       : "host fails too -> verdict: defect of the suite or the reference, not of backend '" +
                             std::string(api->name) + "'";
    }

    static std::string describe(const Case &c) {
        return "elem " + std::to_string(c.elem) + ", budget " + std::to_string(c.budget) + "\nsource " +
               aff::to_json(c.source) + "\ntarget " + aff::to_json(c.target);
    }
};

// Passes when no rank reported a failure; else lists every rank's failures.
inline ::testing::AssertionResult all_ranks_passed(const Failures &f) {
    if (f.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << join(f);
}

} // namespace xmc::conformance
