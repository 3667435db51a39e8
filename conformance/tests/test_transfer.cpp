// AFF-EXEC-EXACT .. AFF-NO-HANG: the affine transfer executor (SPEC 5). One body per requirement,
// run on every selected backend and on every rank of a world (transport_world.hpp): threads over
// the threads transport in `xmc`, MPI processes over gloo in `xmc_multirank`. Expected contents
// come from the model's oracle (extract_shard of the full tensor). Traffic is recorded at the
// transport. Nothing is taken on the backend's word.
//
// Buffers: host memory for the host reference and the self-test's broken backends (built on it);
// device memory (dev_alloc, filled and read back with the backend's own `copy` on a stream of the
// rank's device) for any other backend that has devices, streams and copies, one device per rank
// round-robin (world rank r uses device r mod the device count). Such a backend may move a peer's
// segments without the transport where ranks share an address space (the threads world): direct
// peer copies. Its bytes then cross the transport zero times instead of once; everything else is
// checked as for the host.
#include "abi_plan.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "stateful.hpp"
#include "transport_world.hpp"

#include <xmc/affine.hpp>

#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

namespace xmc::conformance {
namespace {

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
Layout make_layout(const Shape &shape, std::vector<size_t> order, int64_t gap, int64_t pad, int64_t offset,
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

std::vector<size_t> row_major_order(const Shape &shape) {
    std::vector<size_t> order(shape.size());
    std::iota(order.rbegin(), order.rend(), size_t{0});
    return order;
}

Layout dense_layout(const Shape &shape) { return make_layout(shape, row_major_order(shape), 1, 0, 0, 0); }

// Column-first, every other element, padded rows, an offset: a target with holes everywhere.
Layout holey_layout(const Shape &shape) {
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

Case make_case(const aff::Map &source, const aff::Map &target, size_t elem, uint64_t budget) {
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
aff::Bytes tensor_bytes(const Shape &shape, size_t elem, uint64_t seed) {
    aff::Bytes b(size_t(aff::numel(shape)) * elem);
    for (size_t i = 0; i < b.size(); ++i) {
        uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        b[i] = uint8_t(x % 127 + 1);
    }
    return b;
}

const aff::RankLayout *layout_of(const aff::Map &m, int rank) {
    for (const auto &r : m.ranks)
        if (r.rank == rank) return &r;
    return nullptr;
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

// True when the tests give this backend device buffers.
bool uses_device_buffers(const xmc_backend *a, xmc_instance *in) {
    const std::string name = a->name;
    if (name == kHostReference || name.rfind("broken_", 0) == 0) return false;
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

    Side() = default;
    Side(const Side &) = delete;
    Side &operator=(const Side &) = delete;
    Side(Side &&o) noexcept { *this = std::move(o); }
    Side &operator=(Side &&o) noexcept {
        if (this != &o) {
            release();
            store = std::move(o.store), buf = o.buf, mem = o.mem, dev = o.dev;
            o.dev = nullptr;
            if (!dev && buf.ptr) buf.ptr = store.data();
        }
        return *this;
    }
    ~Side() { release(); }

    void release() {
        if (dev) mem.api->dev_free(mem.inst, dev);
        dev = nullptr;
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
    // The image again from the device storage (nothing to do in host memory).
    void fetch() {
        if (dev) copy_1d(dev, XMC_MEM_DEVICE, store.data(), XMC_MEM_HOST);
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
// in place when given.
Side make_side(const aff::Map &m, int rank, const std::map<int, Layout> &layouts, size_t elem,
               const aff::Bytes *shard) {
    Side s;
    const aff::RankLayout *r = layout_of(m, rank);
    if (!r) return s;
    auto it = layouts.find(rank);
    const Layout l = it != layouts.end() ? it->second : dense_layout(r->shard_shape);
    s.store.assign(l.capacity * elem, kPoison);
    if (shard) {
        const Shape &shape = r->shard_shape;
        for (int64_t i = 0; i < aff::numel(shape); ++i) {
            int64_t at = l.offset, rest = i;
            for (size_t d = shape.size(); d-- > 0;) {
                at += (rest % shape[d]) * l.strides[d];
                rest /= shape[d];
            }
            std::memcpy(&s.store[size_t(at) * elem], &(*shard)[size_t(i) * elem], elem);
        }
    }
    s.buf.ptr = s.store.data();
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
std::string first_difference(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want, size_t elem) {
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

// ---------- running a case on every rank ----------

// What the ranks of a run do. Every field has a default: the whole world runs `c` and joins.
struct RunSpec {
    std::vector<GroupSpec> groups;
    std::function<const Case &(const RankEnv &)> case_of;                              // default: the case
    std::function<void(const RankEnv &, Side &, Side &, xmc_transfer_args &, xmc_group &)> tweak;  // before the call
    std::function<bool(const RankEnv &)> joins;        // false: the rank never calls transfer_execute
    std::function<int64_t(const RankEnv &)> fail_op;   // this rank's transport fails that op (-1: none)
    std::function<int64_t(const RankEnv &)> fail_gather;  // this rank's all_gather with that number fails
    uint32_t op_timeout_ms = 10000;
    uint32_t deadline_ms = 60000;
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
    bool may_copy_directly = false;  // device buffers of ranks in one process: peers need no transport
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

std::string join(const Failures &f) {
    std::string s;
    for (const auto &x : f) s += x + "\n";
    return s;
}

class TransferTest : public BackendTest {
protected:
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
            src.put(mem);
            tgt.put(mem);

            RecordingTransport rec(env.transport, int(env.labels.size()));
            if (spec.fail_op) rec.fail_op = spec.fail_op(env);
            xmc_group group = env.group_view();
            group.transport = rec.transport();
            std::optional<GatherFault> gather_fault;
            if (spec.fail_gather && spec.fail_gather(env) >= 0) {
                gather_fault.emplace(group.transport, spec.fail_gather(env));
                group.transport = gather_fault->transport();
            }
            const std::vector<xmc_segment> segs = abi_segments(rc.plan);
            xmc_transfer_args args{};
            args.struct_size = sizeof args;
            args.plan = xmc_plan_view{segs.data(), segs.size(), rc.plan.digest};
            args.source = src.buf;
            args.target = tgt.buf;
            args.elem_size = rc.elem;
            args.staging_budget = rc.budget;
            args.group = &group;
            args.stream = mem.stream;
            if (spec.tweak) spec.tweak(env, src, tgt, args, group);

            RankResult r;
            r.c = &rc;
            r.src = &src;
            r.tgt = &tgt;
            r.rec = &rec;
            r.src_before = src.store;
            r.tgt_expected = make_side(rc.target, me, rc.tgt_layout, rc.elem, &tgt_shard).store;
            r.may_copy_directly = mem.device && std::string(world().name()) == "threads";
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
                r.status = a->transfer_execute(in, &args, &r.stats);
                r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                a->last_error(in, &r.error);
            }
            src.fetch();
            tgt.fetch();
            check(env, r, f);
            return f;
        });
    }

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
           << world().size() << " ranks, seed " << rc_seed() << ")\n";
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
        std::string error;
        const LoadedBackend *host = load_backend(kHostReference, &error);
        xmc_instance *hi = nullptr;
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        if (!host || host->api->open(&params, &hi) != XMC_OK) return "cannot open the host reference: " + error;
        const bool host_ok = run_on(host->api, hi, c, {}, check).empty();
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
::testing::AssertionResult all_ranks_passed(const Failures &f) {
    if (f.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << join(f);
}

// ---------- checks, each a few lines, combined by the tests ----------

void status_ok(const RankResult &r, Failures &f) {
    if (r.status != XMC_OK)
        f.push_back(std::string("transfer_execute returned ") + xmc_status_string(r.status) + ": " + r.error.message);
}

// The target equals extraction from the full tensor bit for bit, its holes are still poisoned,
// and the source is unchanged.
void exact(const RankResult &r, Failures &f) {
    if (auto d = first_difference(r.tgt->store, r.tgt_expected, r.c->elem); !d.empty()) f.push_back("target: " + d);
    if (auto d = first_difference(r.src->store, r.src_before, r.c->elem); !d.empty()) f.push_back("source changed: " + d);
}

// Refused, with detail naming the call, and nothing written anywhere.
void refused_untouched(const RankResult &r, Failures &f) {
    if (r.status != XMC_ERR_REFUSED)
        f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status) + ": " + r.error.message);
    else if (r.error.status != XMC_ERR_REFUSED || std::strcmp(r.error.call, "transfer_execute") != 0 ||
             !r.error.message[0])
        f.push_back(std::string("the refusal's detail must carry its status and name transfer_execute; got call '") +
                    r.error.call + "': " + r.error.message);
    for (uint8_t b : r.tgt->store)
        if (b != kPoison) {
            f.push_back("a refused request wrote the target (" + first_difference(r.tgt->store,
                        std::vector<uint8_t>(r.tgt->store.size(), kPoison), r.c->elem) + ")");
            break;
        }
    if (auto d = first_difference(r.src->store, r.src_before, r.c->elem); !d.empty()) f.push_back("source changed: " + d);
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Every message within the budget; per peer direction, messages within ceil(bytes / budget) +
// segments; the reported staging peak and rounds within the same bounds.
void staging_bounded(const RankResult &r, Failures &f) {
    const uint64_t budget = r.c->budget;
    uint64_t round_bound = 0;
    for (size_t p = 0; p < r.out_bytes.size(); ++p) {
        const auto &seen = r.rec->peers[p];
        const uint64_t out_bound = ceil_div(r.out_bytes[p], budget) + r.out_segs[p];
        const uint64_t in_bound = ceil_div(r.in_bytes[p], budget) + r.in_segs[p];
        round_bound += out_bound + in_bound;
        if (seen.largest > budget)
            f.push_back("a message to or from peer " + std::to_string(p) + " has " + std::to_string(seen.largest) +
                        " B, over the budget of " + std::to_string(budget) + " B");
        if (seen.sends > out_bound)
            f.push_back(std::to_string(seen.sends) + " messages to peer " + std::to_string(p) + " for " +
                        std::to_string(r.out_bytes[p]) + " B in " + std::to_string(r.out_segs[p]) +
                        " segments: over ceil(bytes / budget) + segments = " + std::to_string(out_bound));
        if (seen.recvs > in_bound)
            f.push_back(std::to_string(seen.recvs) + " messages from peer " + std::to_string(p) + ": over the bound " +
                        std::to_string(in_bound));
    }
    if (r.stats.staging_peak > budget)
        f.push_back("staging_peak " + std::to_string(r.stats.staging_peak) + " B is over the budget of " +
                    std::to_string(budget) + " B");
    if (r.stats.rounds > round_bound)
        f.push_back("rounds " + std::to_string(r.stats.rounds) + " over the bound " + std::to_string(round_bound));
}

// Bytes sent, received and copied locally are what the plan says, as reported and as seen at the
// transport: every element crosses the transport once, and only when it must.
void accounted(const RankResult &r, Failures &f) {
    const uint64_t out = std::accumulate(r.out_bytes.begin(), r.out_bytes.end(), uint64_t{0});
    const uint64_t in = std::accumulate(r.in_bytes.begin(), r.in_bytes.end(), uint64_t{0});
    auto expect = [&](const char *what, uint64_t got, uint64_t want) {
        if (got != want)
            f.push_back(std::string(what) + " is " + std::to_string(got) + ", the plan says " + std::to_string(want));
    };
    expect("reported bytes_sent", r.stats.bytes_sent, out);
    expect("reported bytes_received", r.stats.bytes_received, in);
    expect("reported bytes_copied_locally", r.stats.bytes_copied_locally, r.local_bytes);
    for (size_t p = 0; p < r.out_bytes.size(); ++p) {
        // Direct peer copies (device buffers, one process): nothing crosses the transport either way.
        const auto &seen = r.rec->peers[p];
        if (r.may_copy_directly && seen.sends + seen.recvs == 0) continue;
        expect(("bytes seen at the transport to peer " + std::to_string(p)).c_str(), seen.bytes_sent, r.out_bytes[p]);
        expect(("bytes seen at the transport from peer " + std::to_string(p)).c_str(), seen.bytes_received,
               r.in_bytes[p]);
    }
}

// ---------- deterministic maps over the world's labels ----------

std::vector<int> labels_of(int n, int first = 0) {
    std::vector<int> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), first);
    return v;
}

const Shape kShape{8, 6};

// ---------- random cases (rapidcheck; identical on every rank) ----------

template <class T>
T pick(T lo, T hi) {  // uniform in [lo, hi) whatever rapidcheck's current size
    return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

// A non-empty subset of the world's labels, in random order.
std::vector<int> gen_ranks(int world_size) {
    std::vector<int> pool = labels_of(world_size);
    std::mt19937_64 g(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(pool.begin(), pool.end(), g);
    pool.resize(size_t(pick(1, world_size + 1)));
    return pool;
}

Shape gen_shape(int min_dims, int max_dims, int64_t max_extent) {
    Shape s(size_t(pick(min_dims, max_dims + 1)));
    for (auto &d : s) d = pick(0, 15) == 0 ? 0 : pick<int64_t>(1, max_extent + 1);  // now and then empty
    return s;
}

std::vector<int64_t> gen_sizes(int64_t total, size_t n) {  // n sizes >= 0 summing to total
    std::vector<int64_t> cuts{0, total};
    for (size_t i = 1; i < n; ++i) cuts.push_back(pick<int64_t>(0, total + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    for (size_t i = 1; i < cuts.size(); ++i) sizes.push_back(cuts[i] - cuts[i - 1]);
    return sizes;
}

// A layout from the model's builders: replicated, even and uneven splits, block-cyclic, replicated
// head rows, and parts held by random groups of ranks.
aff::Map gen_map(const Shape &shape, int world_size) {
    const std::vector<int> ranks = gen_ranks(world_size);
    if (shape.empty()) return aff::replicated(shape, ranks);
    const size_t axis = pick<size_t>(0, shape.size());
    switch (pick(0, 6)) {
        case 0: return aff::replicated(shape, ranks);
        case 1: return aff::split_even(shape, axis, ranks);
        case 2: return aff::split_sizes(shape, axis, gen_sizes(shape[axis], ranks.size()), ranks);
        case 3: return aff::block_cyclic(shape, axis, pick<int64_t>(1, shape[axis] + 2), ranks);
        case 4: return aff::block_rows(shape, pick<int64_t>(0, shape[0] + 1), ranks);
        default: {
            auto sizes = gen_sizes(shape[axis], size_t(pick(1, 4)));
            std::vector<std::vector<int>> holders;
            for (size_t k = 0; k < sizes.size(); ++k) {
                std::vector<int> h;
                for (int r : ranks)
                    if (*rc::gen::arbitrary<bool>()) h.push_back(r);
                if (h.empty()) h.push_back(ranks[k % ranks.size()]);
                holders.push_back(h);
            }
            return aff::split(shape, axis, sizes, holders);
        }
    }
}

// Dense, offset, padded, gapped or axis-permuted: how real buffers hold shards.
Layout gen_layout(const Shape &shape) {
    if (pick(0, 3) == 0) return dense_layout(shape);
    std::vector<size_t> order = row_major_order(shape);
    if (*rc::gen::arbitrary<bool>()) std::shuffle(order.begin(), order.end(), std::mt19937_64(*rc::gen::arbitrary<uint64_t>()));
    return make_layout(shape, order, pick<int64_t>(1, 3), pick<int64_t>(0, 3), pick<int64_t>(0, 5), pick<int64_t>(0, 3));
}

// A random case: maps, element size, budget (now and then not a multiple of the element), layouts.
Case gen_case(int min_dims, int world_size) {
    const Shape shape = gen_shape(min_dims, 3, 7);
    const aff::Map src = gen_map(shape, world_size), tgt = gen_map(shape, world_size);
    const size_t elem = *rc::gen::elementOf(std::vector<size_t>{1, 2, 4, 8});
    const uint64_t budget = *rc::gen::elementOf(std::vector<uint64_t>{elem, elem + 1, 7 * elem + 3, 64, 1000, 1 << 20});
    Case c = make_case(src, tgt, elem, budget);
    c.data_seed = *rc::gen::arbitrary<uint64_t>();
    for (const auto &r : src.ranks) c.src_layout[r.rank] = gen_layout(r.shard_shape);
    for (const auto &r : tgt.ranks) c.tgt_layout[r.rank] = gen_layout(r.shard_shape);
    return c;
}

// ===================== AFF-EXEC-EXACT =====================

TEST_P(TransferTest, AFF_EXEC_EXACT_RandomMapsElementSizesAndLayouts) {
    check_property([] { return gen_case(0, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       exact(r, f);
                   });
}

TEST_P(TransferTest, AFF_EXEC_EXACT_ScalarTensor) {
    const int w = world().size();
    for (size_t elem : {size_t{1}, size_t{8}}) {
        const Case c = make_case(aff::replicated({}, {0}), aff::replicated({}, labels_of(w)), elem, elem);
        EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            exact(r, f);
        })));
    }
}

TEST_P(TransferTest, AFF_EXEC_EXACT_NonContiguousTargetWrittenInPlace) {
    const std::vector<int> all = labels_of(world().size());
    for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
        Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), elem, 3 * elem + 1);
        for (const auto &r : c.target.ranks) c.tgt_layout[r.rank] = holey_layout(r.shard_shape);
        EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
            status_ok(r, f);
            exact(r, f);
        }))) << "element size " << elem;
    }
}

// ===================== AFF-REFUSE-BEFORE-WRITE =====================

// Each bad request is tried on two plans: all-local (every rank keeps its rows) and mixed (rows to
// columns), on world rank 1. Every rank must refuse and nothing may be written anywhere.
std::vector<std::pair<const char *, Case>> refuse_cases() {
    const std::vector<int> all = labels_of(world().size());
    return {{"all-local plan", make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 0, all), 4, 4096)},
            {"mixed plan", make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096)}};
}

constexpr int kBadRank = 1;
// Refusals come from the agreement; a backend that goes on to move data meets this bound instead.
constexpr uint32_t kRefusalOpTimeoutMs = 2000;

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_BufferTooSmallOnOneRank) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &, Side &, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank == kBadRank) a.target.capacity -= 1;  // dense: one element short
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_SourceAndTargetOverlap) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &src, Side &tgt, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank != kBadRank) return;
            // The target now lies in the source's storage (grown to hold it).
            if (src.store.size() < tgt.store.size()) src.grow(tgt.store.size());
            a.source.ptr = src.buf.ptr;
            a.target.ptr = src.buf.ptr;
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_ElementSizeMismatchBetweenRanks) {
    for (const auto &[name, c] : refuse_cases()) {
        Case other = c;
        other.elem = 2;
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_MissingBinding) {
    for (const auto &[name, c] : refuse_cases()) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [](const RankEnv &env, Side &, Side &, xmc_transfer_args &a, xmc_group &) {
            if (env.world_rank == kBadRank) a.source.ptr = nullptr;  // the plan reads this rank
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
        }))) << name;
    }
}

// A rank that declares a target shard the plan never writes (seed bug: silently never written).
TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_TargetShardThePlanNeverWrites) {
    std::vector<int> others;
    for (int r : labels_of(world().size()))
        if (r != kBadRank) others.push_back(r);
    const Case c = make_case(aff::split_even(kShape, 0, labels_of(world().size())), aff::split_even(kShape, 1, others), 4, 4096);
    const Case declared = make_case(c.source, aff::split_even(kShape, 1, labels_of(world().size())), 4, 4096);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.tweak = [&](const RankEnv &env, Side &, Side &tgt, xmc_transfer_args &a, xmc_group &) {
        if (env.world_rank != kBadRank) return;
        const Memory mem = tgt.mem;
        tgt = make_side(declared.target, kBadRank, {}, 4, nullptr);  // a shard the plan has no segment for
        tgt.put(mem);
        a.target = tgt.buf;
    };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        refused_untouched(r, f);
    })));
}

// A group that cannot be used is refused at once by every rank given it, with its own status:
// there is no peer to agree with.
TEST_P(TransferTest, AFF_REFUSE_BEFORE_WRITE_MalformedGroupIsInvalidArgument) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 0, all), 4, 4096);
    const std::vector<std::pair<const char *, std::function<void(xmc_transfer_args &, xmc_group &)>>> breaks = {
        {"timeout 0", [](xmc_transfer_args &, xmc_group &g) { g.timeout_ms = 0; }},
        {"my_index out of range", [](xmc_transfer_args &, xmc_group &g) { g.my_index = g.size; }},
        {"no transport", [](xmc_transfer_args &, xmc_group &g) { g.transport = nullptr; }},
        {"no group", [](xmc_transfer_args &a, xmc_group &) { a.group = nullptr; }},
    };
    for (const auto &[name, breaker] : breaks) {
        RunSpec spec;
        spec.op_timeout_ms = kRefusalOpTimeoutMs;
        spec.tweak = [&breaker = breaker](const RankEnv &, Side &, Side &, xmc_transfer_args &a, xmc_group &g) {
            breaker(a, g);
        };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            if (r.status != XMC_ERR_INVALID_ARGUMENT || std::strcmp(r.error.call, "transfer_execute") != 0)
                f.push_back(std::string("expected invalid_argument naming transfer_execute, got ") +
                            xmc_status_string(r.status) + " from '" + r.error.call + "': " + r.error.message);
            if (std::any_of(r.tgt->store.begin(), r.tgt->store.end(), [](uint8_t b) { return b != kPoison; }))
                f.push_back("the target was written");
        }))) << name;
    }
}

// ===================== AFF-AGREE =====================

// World rank 1 runs another request than the others, valid on its own. All must refuse.
TEST_P(TransferTest, AFF_AGREE_DifferentPlansAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    const Case other = make_case(aff::block_cyclic(kShape, 0, 1, all), aff::split_even(kShape, 1, all), 4, 4096);
    ASSERT_NE(c.plan.digest, other.plan.digest);
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

TEST_P(TransferTest, AFF_AGREE_DifferentElementSizesAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.elem = 2;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

TEST_P(TransferTest, AFF_AGREE_DifferentBudgetsAllRefuse) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 4096);
    Case other = c;
    other.budget = 64;
    RunSpec spec;
    spec.op_timeout_ms = kRefusalOpTimeoutMs;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return env.world_rank == kBadRank ? other : c; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        if (r.status != XMC_ERR_REFUSED) f.push_back(std::string("expected refused, got ") + xmc_status_string(r.status));
    })));
}

// ===================== AFF-STAGING =====================

TEST_P(TransferTest, AFF_STAGING_BudgetSmallerThanOneElementRefusedUpFront) {
    const std::vector<int> all = labels_of(world().size());
    for (uint64_t budget : {uint64_t{0}, uint64_t{3}}) {
        const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, budget);
        EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
            refused_untouched(r, f);
            if (r.rec->peers.size() > 1 && std::any_of(r.rec->peers.begin(), r.rec->peers.end(),
                                                       [](const auto &p) { return p.sends + p.recvs > 0; }))
                f.push_back("data crossed the transport before the refusal");
        }))) << "budget " << budget;
    }
}

// A large 1-D segment moves in whole budget-sized chunks (seed bug: one element per round).
TEST_P(TransferTest, AFF_STAGING_LargeOneDimensionalSegmentMovesInWholeChunks) {
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 4096;
    const Case c = make_case(aff::split_sizes({4096}, 0, on_first, labels_of(w)),
                             aff::split_sizes({4096}, 0, on_second, labels_of(w)), 4, 1000);
    EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
        status_ok(r, f);
        staging_bounded(r, f);
    })));
}

TEST_P(TransferTest, AFF_STAGING_WithinBudgetAndRoundsBounded) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       staging_bounded(r, f);
                   });
}

// ===================== AFF-ACCOUNT =====================

TEST_P(TransferTest, AFF_ACCOUNT_BytesSentReceivedAndLocalMatchThePlan) {
    check_property([] { return gen_case(1, world().size()); },
                   [](const RankEnv &, const RankResult &r, Failures &f) {
                       status_ok(r, f);
                       accounted(r, f);
                   });
}

TEST_P(TransferTest, AFF_ACCOUNT_DisjointSourceAndTargetRanksCopyNothingLocally) {
    const int w = world().size();
    const std::vector<int> low = labels_of(w / 2), high = labels_of(w - w / 2, w / 2);
    const Case c = make_case(aff::split_even(kShape, 0, low), aff::split_even(kShape, 1, high), 8, 100);
    EXPECT_TRUE(all_ranks_passed(run(c, {}, [](const RankEnv &, const RankResult &r, Failures &f) {
        status_ok(r, f);
        accounted(r, f);
        if (r.stats.bytes_copied_locally != 0)
            f.push_back("copied " + std::to_string(r.stats.bytes_copied_locally) +
                        " B locally, though no rank is both source and target");
    })));
}

// ===================== AFF-GROUP =====================

auto ok_and_exact = [](const RankEnv &, const RankResult &r, Failures &f) {
    status_ok(r, f);
    exact(r, f);
};

TEST_P(TransferTest, AFF_GROUP_RankLabels3And9) {
    const Case c = make_case(aff::split_even(kShape, 0, {3, 9}), aff::split_even(kShape, 1, {9, 3}), 4, 40);
    RunSpec spec;
    spec.groups = {GroupSpec{{0, 1}, {3, 9}}};
    EXPECT_TRUE(all_ranks_passed(run(c, spec, ok_and_exact)));
}

// Group order (and so each rank's position) differs from the world's: labels are world ranks.
TEST_P(TransferTest, AFF_GROUP_GroupOrderDiffersFromTheWorld) {
    GroupSpec reversed = whole_world(world());
    std::reverse(reversed.members.begin(), reversed.members.end());
    reversed.labels.assign(reversed.members.begin(), reversed.members.end());
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 40);
    RunSpec spec;
    spec.groups = {reversed};
    EXPECT_TRUE(all_ranks_passed(run(c, spec, ok_and_exact)));
}

// Groups made of part of the world, labelled by world rank: {1, 3} and {0, 2} at once (with 4
// ranks or more), else {1} alone.
TEST_P(TransferTest, AFF_GROUP_SubsetsOfTheWorld) {
    const bool four = world().size() >= 4;
    std::vector<GroupSpec> groups(four ? 2 : 1);
    if (four) {
        groups[0].members = {1, 3};
        groups[1].members = {0, 2};
    } else {
        groups[0].members = {1};
    }
    for (GroupSpec &g : groups) g.labels.assign(g.members.begin(), g.members.end());
    const Case odd = make_case(aff::split_even(kShape, 0, {1, 3}), aff::split_even(kShape, 1, {3, 1}), 2, 16);
    const Case even = make_case(aff::split_even(kShape, 1, {0, 2}), aff::block_cyclic(kShape, 0, 3, {2, 0}), 8, 64);
    const Case alone = make_case(aff::split_even(kShape, 0, {1}), aff::block_cyclic(kShape, 1, 2, {1}), 4, 64);
    RunSpec spec;
    spec.groups = groups;
    spec.case_of = [&](const RankEnv &env) -> const Case & { return !four ? alone : env.group == 0 ? odd : even; };
    EXPECT_TRUE(all_ranks_passed(run(odd, spec, ok_and_exact)));
}

// ===================== AFF-NO-HANG =====================

// Ranks that meet a failure must return an error within this bound: every rank may wait out one
// operation timeout in turn, plus a slack for a loaded machine.
constexpr uint32_t kOpTimeoutMs = 300;
uint32_t no_hang_bound_ms() { return kOpTimeoutMs * uint32_t(world().size() + 2) + 2000; }

void failed_in_time(const RankResult &r, Failures &f) {
    if (!r.called) return;
    if (r.status != XMC_ERR_TIMEOUT && r.status != XMC_ERR_PEER_FAILED)
        f.push_back(std::string("expected timeout or peer_failed, got ") + xmc_status_string(r.status) + ": " +
                    r.error.message);
    if (r.ms > no_hang_bound_ms())
        f.push_back("returned after " + std::to_string(int(r.ms)) + " ms, over the bound of " +
                    std::to_string(no_hang_bound_ms()) + " ms");
}

TEST_P(TransferTest, AFF_NO_HANG_RankThatNeverJoins) {
    const std::vector<int> all = labels_of(world().size());
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 64);
    RunSpec spec;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.joins = [](const RankEnv &env) { return env.world_rank != world().size() - 1; };
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) { failed_in_time(r, f); })));
}

TEST_P(TransferTest, AFF_NO_HANG_TransportFailureOnOneRankReachesEveryRank) {
    const std::vector<int> all = labels_of(world().size());
    // An 8-byte budget: rank 1 exchanges several chunks with every peer, so operation 3 happens.
    const Case c = make_case(aff::split_even(kShape, 0, all), aff::split_even(kShape, 1, all), 4, 8);
    // Ranks of one process with device buffers may copy from peer to peer without any send or
    // receive: there is then no message to fail, and the all_gathers are what can fail.
    const bool threads = std::string(world().name()) == "threads";
    const bool direct = threads && uses_device_buffers(api, inst);
    if (threads) {  // one all_gather of rank 1 fails: its second (after the agreement)
        RunSpec spec;
        spec.op_timeout_ms = kOpTimeoutMs;
        spec.deadline_ms = no_hang_bound_ms() + 1000;
        spec.fail_gather = [](const RankEnv &env) { return env.world_rank == kBadRank ? int64_t{1} : int64_t{-1}; };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            failed_in_time(r, f);
        }))) << "failing all_gather 1";
    }
    for (int64_t op : {0, 3}) {  // its first message, and one in the middle of the exchange
        if (direct) break;
        RunSpec spec;
        spec.op_timeout_ms = kOpTimeoutMs;
        spec.deadline_ms = no_hang_bound_ms() + 1000;
        spec.fail_op = [op](const RankEnv &env) { return env.world_rank == kBadRank ? op : int64_t{-1}; };
        EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
            failed_in_time(r, f);
        }))) << "failing operation " << op;
    }
}

// The receiver refuses a large chunk (its receive fails) while the sender has chunks in flight: the
// sender must not wait for that receiver without a bound (seed bug: an oversized chunk refused by
// the receiver, and a sender waiting forever for its acknowledgement).
TEST_P(TransferTest, AFF_NO_HANG_SenderOfAChunkTheReceiverRefusesReturns) {
    if (std::string(world().name()) == "threads" && uses_device_buffers(api, inst))
        XMC_SKIP(SkipKind::Unsupported, "ranks of one process with device buffers copy peer to peer: no message to refuse");
    const int w = world().size();
    std::vector<int64_t> on_first(size_t(w), 0), on_second(size_t(w), 0);
    on_first[0] = on_second[1] = 65536;  // 256 KiB from rank 0 to rank 1, in 64 KiB chunks
    const Case c = make_case(aff::split_sizes({65536}, 0, on_first, labels_of(w)),
                             aff::split_sizes({65536}, 0, on_second, labels_of(w)), 4, 65536);
    RunSpec spec;
    spec.op_timeout_ms = kOpTimeoutMs;
    spec.deadline_ms = no_hang_bound_ms() + 1000;
    spec.fail_op = [](const RankEnv &env) { return env.world_rank == 1 ? int64_t{0} : int64_t{-1}; };  // its first receive
    EXPECT_TRUE(all_ranks_passed(run(c, spec, [](const RankEnv &, const RankResult &r, Failures &f) {
        failed_in_time(r, f);
    })));
}

XMC_INSTANTIATE_FOR_BACKENDS(TransferTest);

} // namespace
} // namespace xmc::conformance
