// libFuzzer harness: operation sequences on the host backend (reference/host, linked
// in through its entry table) and on the models (reference/model: PinModel, RegModel,
// SlotModel) side by side (SPEC 5 PIN-*, REG-*, VMM-*).
//
// Input: a sequence of operations decoded with FuzzedDataProvider: pin alloc (small
// sizes and 2 MiB blocks for slot sources; alignments valid and not), free, query,
// ref, unref, stats; register, unregister, query over a private arena of pageable
// pages; slot create, release, remap (single and batch, deferred or not, valid and
// invalid sources), launch, adopt, destroy, close, read/write. Every release or remap
// that is accepted is waited for at once, so the run is deterministic. Any status,
// address, size or content that differs from the models, and any sanitizer report,
// is a finding (trap). Everything is freed at the end of each input and the backend's
// accounting checked back to empty (the pin and registration registries are
// process-wide).
#include <fuzzer/FuzzedDataProvider.h>

#include "host.hpp"
#include "pin_model.hpp"
#include "reg_model.hpp"
#include "slot_model.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>
#include <vector>

using namespace xmc::model;

extern "C" const char *__asan_default_options() {
    // A huge power-of-two alignment is valid for PIN-ALLOC; posix_memalign answers
    // ENOMEM for it (the backend says out of memory) instead of ASan aborting.
    return "allocator_may_return_null=1";
}

namespace {

[[noreturn]] void finding(const std::string &what) {
    std::fprintf(stderr, "fuzz_host_ops: FINDING: %s\n", what.c_str());
    std::fflush(stderr);
    __builtin_trap();
}

std::string st(xmc_status s) { return xmc_status_string(s); }

// XMC_FUZZ_TRACE=1 prints every checked call (for reading a corpus input or a crash).
const bool g_trace = std::getenv("XMC_FUZZ_TRACE") != nullptr;

void expect_status(const char *op, xmc_status got, xmc_status want) {
    if (g_trace) std::fprintf(stderr, "  %-28s -> %s\n", op, st(got).c_str());
    if (got != want) finding(std::string(op) + ": backend answered " + st(got) + ", the model " + st(want));
}

constexpr size_t kArenaPages = 32;
constexpr uint32_t kWaitMs = 20000;           // longer means a hang: a finding
constexpr int kMaxBlocks = 24, kMaxSlots = 3;

struct Process {
    xmc_backend api{};
    xmc_instance *inst = nullptr;
    xmc_stream *stream = nullptr;
    char *arena = nullptr;  // pageable pages: registration, and addresses no block holds
    size_t page = 0;
    size_t granule = 0;  // the backend's slot granularity, as its one-byte slot says (never a copy of it)
    Process() {
        xmc::host::fill_table(api);
        xmc_open_params p{sizeof p, "vmm_workers=1"};
        if (api.open(&p, &inst) != XMC_OK) finding("open");
        if (api.stream_create(inst, 0, &stream) != XMC_OK) finding("stream_create");
        page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void *a = mmap(nullptr, kArenaPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED) finding("mmap arena");
        arena = static_cast<char *>(a);
        std::memset(arena, 0x11, kArenaPages * page);
        xmc_slot *one = nullptr;
        xmc_slot_info info{};
        if (api.slot_create(inst, 0, 1, &one, &info) != XMC_OK || api.slot_close(inst, one) != XMC_OK || info.size == 0)
            finding("slot_create of one byte (the granularity)");
        granule = info.size;
    }
};

Process &proc() {
    static Process p;
    return p;
}

uint8_t pattern(int tag) { return static_cast<uint8_t>(tag * 37 + 11); }

struct Run {
    Process &P = proc();
    const xmc_backend &api = P.api;
    FuzzedDataProvider &in;
    PinModel pins;
    std::vector<std::pair<uint64_t, uint64_t>> real;  // block -> real base, size
    RegModel regs;
    SlotModel slots;
    std::vector<xmc_slot *> slot_handles;
    std::vector<xmc_slot_info> slot_infos;
    std::vector<xmc_request *> req_handles;
    int next_write_tag = 1000;

    explicit Run(FuzzedDataProvider &d) : in(d) {
        regs.policy = api.reg_align_policy(P.inst);
        regs.page = P.page;
        int32_t n = 0;
        api.device_count(P.inst, &n);
        regs.devices = n;
    }

    // ---- pinning ----
    // An address: inside a block (base + delta below the bytes asked), past a block's
    // real end, or in the arena (which no block holds).
    uintptr_t pick_pin_addr() {
        const int kind = in.ConsumeIntegralInRange(0, 3);
        if (!real.empty() && kind <= 1) {
            const size_t b = in.ConsumeIntegralInRange<size_t>(0, real.size() - 1);
            const size_t asked = pins.blocks()[b].bytes;
            if (kind == 0) {
                const uint64_t d = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint64_t>(0, asked - 1);
                return real[b].first + d;
            }
            return real[b].first + real[b].second + in.ConsumeIntegralInRange<uint64_t>(0, 2 * P.page);
        }
        if (kind == 2) return reinterpret_cast<uintptr_t>(P.arena) + in.ConsumeIntegralInRange<size_t>(0, kArenaPages * P.page - 1);
        return in.ConsumeBool() ? 0 : UINTPTR_MAX - in.ConsumeIntegralInRange<uintptr_t>(0, 64);
    }
    // The model's name for a real address; false when the address is in a live block's
    // slack (past the bytes asked, before its real end), where the model says nothing.
    bool model_addr(uintptr_t a, PinAddr *out) {
        const int b = pins.containing_block(a, 1, real);
        if (b < 0) {
            *out = PinAddr{};
            return true;
        }
        const uint64_t d = a - real[b].first;
        if (d >= pins.blocks()[b].bytes) return false;
        *out = PinAddr{b, PinAddr::Base, d};
        return true;
    }

    void pin_alloc() {
        if (static_cast<int>(real.size()) >= kMaxBlocks) return;
        size_t bytes = 0;
        switch (in.ConsumeIntegralInRange(0, 5)) {
            case 0: bytes = 0; break;
            case 1: bytes = P.granule + in.ConsumeIntegralInRange<size_t>(0, P.page); break;  // a slot source
            default: bytes = in.ConsumeIntegralInRange<size_t>(1, 3 * P.page + 17); break;
        }
        size_t align = 0;
        switch (in.ConsumeIntegralInRange(0, 7)) {
            case 0: align = in.PickValueInArray<size_t>({0, 3, 6, 12, 4097, 3 * 4096, SIZE_MAX}); break;
            case 1: align = size_t{1} << in.ConsumeIntegralInRange(41, 46); break;  // valid, unobtainable (above ASan's 2^40 maximum; 2^63 trips an ASan CHECK)
            default: align = size_t{1} << in.ConsumeIntegralInRange(0, 21); break;
        }
        const bool valid = bytes != 0 && align != 0 && (align & (align - 1)) == 0;
        xmc_pin_result r{};
        const xmc_status got = api.pin_alloc(P.inst, bytes, align, XMC_NO_DEVICE, &r);
        if (got != XMC_OK) {
            if (!valid) return expect_status("pin_alloc", got, XMC_ERR_INVALID_ARGUMENT);
            // PIN-KINDS: an alignment the backend cannot honour is refused as invalid, never weakened.
            if (align > (size_t{1} << 30) && got == XMC_ERR_INVALID_ARGUMENT) return;
            if (align >= (size_t{1} << 40) && (got == XMC_ERR_OUT_OF_MEMORY || got == XMC_ERR_MEMLOCK)) return;
            finding("pin_alloc(" + std::to_string(bytes) + ", " + std::to_string(align) + ") refused: " + st(got));
        }
        if (!valid) finding("pin_alloc accepted bytes " + std::to_string(bytes) + " alignment " + std::to_string(align));
        const auto base = reinterpret_cast<uintptr_t>(r.base);
        const size_t want_align = align < P.page ? P.page : align;
        if (base % want_align || r.size < bytes || r.size % P.page || r.registered)
            finding("pin_alloc result: base " + std::to_string(base) + " size " + std::to_string(r.size));
        expect_status("pin_alloc (model)", pins.alloc(bytes, align), XMC_OK);
        real.emplace_back(base, r.size);
        // The block's contents name it: slots reloaded from it must hold these bytes.
        std::memset(r.base, pattern(static_cast<int>(real.size()) - 1), r.size);
    }

    void pin_free() { pin_op("pin_free", api.pin_free, [&](const PinAddr &a) { return pins.free(a); }); }
    void pin_ref() {
        pin_op("pin_ref", [](xmc_instance *i, void *p) { return proc().api.pin_ref(i, p); },
               [&](const PinAddr &a) { return pins.ref(a); });
    }
    void pin_unref() {
        pin_op("pin_unref", [](xmc_instance *i, void *p) { return proc().api.pin_unref(i, p); },
               [&](const PinAddr &a) { return pins.unref(a); });
    }
    // Blocks that are the sources of deferred copies not launched yet, per
    // request: the caller keeps a source until its copy has run (docs/abi.md),
    // so they are not freed or unreferenced meanwhile (a fuzzer finding: the
    // harness freed one, and the later launch read freed memory).
    std::map<int, std::vector<int>> deferred_sources;
    bool deferred_source(int block) const {
        for (const auto &[r, blocks] : deferred_sources)
            for (int b : blocks)
                if (b == block) return true;
        return false;
    }

    template <class Model>
    void pin_op(const char *name, xmc_status (*call)(xmc_instance *, void *), Model model) {
        const uintptr_t a = pick_pin_addr();
        PinAddr pa;
        if (!model_addr(a, &pa)) return;
        if (std::string(name) != "pin_ref" && pa.block >= 0 && deferred_source(pa.block)) return;
        const xmc_status want = model(pa);
        expect_status(name, call(P.inst, reinterpret_cast<void *>(a)), want);
    }

    void pin_query() {
        const uintptr_t a = pick_pin_addr();
        size_t len = 0;
        switch (in.ConsumeIntegralInRange(0, 4)) {
            case 0: len = 0; break;
            case 1: len = 1; break;
            case 2: len = in.ConsumeIntegralInRange<size_t>(1, P.granule + 2 * P.page); break;
            case 3: len = SIZE_MAX - in.ConsumeIntegralInRange<size_t>(0, 8); break;
            default: len = P.page; break;
        }
        xmc_pin_info q{};
        expect_status("pin_query", api.pin_query(P.inst, reinterpret_cast<void *>(a), len, &q), XMC_OK);
        const int b = pins.containing_block(a, len, real);
        if ((b >= 0) != (q.pinned == 1))
            finding("pin_query(" + std::to_string(a) + ", " + std::to_string(len) + "): pinned " +
                    std::to_string(q.pinned) + ", model block " + std::to_string(b));
        if (b >= 0 && (reinterpret_cast<uintptr_t>(q.base) != real[b].first || q.size != real[b].second))
            finding("pin_query: owning base or size differs from the block's");
    }

    void pin_stats() {
        xmc_pin_stats s{};
        expect_status("pin_stats", api.pin_stats(P.inst, &s), XMC_OK);
        uint64_t now = 0;
        for (size_t b = 0; b < real.size(); ++b)
            if (pins.blocks()[b].live) now += real[b].second;
        if (s.bytes_now != now || s.blocks_now != pins.live_blocks() || s.bytes_peak < s.bytes_now)
            finding("pin_stats: " + std::to_string(s.bytes_now) + " bytes in " + std::to_string(s.blocks_now) +
                    " blocks, the model " + std::to_string(now) + " in " + std::to_string(pins.live_blocks()));
    }

    // ---- registration ----
    size_t reg_offset(size_t max_pages) {
        return in.ConsumeIntegralInRange(0, 5) ? in.ConsumeIntegralInRange<size_t>(0, max_pages) * P.page
                                               : in.ConsumeIntegralInRange<size_t>(0, max_pages * P.page);
    }
    void reg_register() {
        const size_t off = reg_offset(kArenaPages - 9);
        const size_t n = in.ConsumeIntegralInRange(0, 5) ? in.ConsumeIntegralInRange<size_t>(0, 8) * P.page
                                                         : in.ConsumeIntegralInRange<size_t>(0, 8 * P.page);
        const int32_t dev = in.PickValueInArray<int32_t>({0, 0, 0, 1, -1});
        RegModel next = regs;
        const xmc_status want = next.reg(off, n, dev);
        xmc_reg_info info{};
        expect_status("reg_register", api.reg_register(P.inst, P.arena + off, n, dev, 0, &info), want);
        if (want != XMC_OK) return;
        size_t base = 0, size = 0;
        regs.recorded(off, n, &base, &size);
        if (info.base != P.arena + base || info.size != size || info.device != dev || !info.registered)
            finding("reg_register: recorded range differs from the model's");
        regs = next;
    }
    void reg_unregister() {
        size_t off = reg_offset(kArenaPages - 1);
        if (!regs.live.empty() && in.ConsumeBool()) {
            auto it = regs.live.begin();
            std::advance(it, in.ConsumeIntegralInRange<size_t>(0, regs.live.size() - 1));
            off = it->first + in.PickValueInArray<size_t>({0, 0, 0, 64, P.page});
        }
        const xmc_status want = regs.unreg(off);
        expect_status("reg_unregister", api.reg_unregister(P.inst, P.arena + off), want);
    }
    void reg_query() {
        const size_t off = in.ConsumeIntegralInRange<size_t>(0, kArenaPages * P.page - 1);
        xmc_reg_info q{};
        expect_status("reg_query", api.reg_query(P.inst, P.arena + off, &q), XMC_OK);
        const long long b = regs.holder(off);
        if (q.registered != (b >= 0 ? 1 : 0)) finding("reg_query: registered " + std::to_string(q.registered));
        if (b >= 0) {
            const auto &r = regs.live.at(static_cast<size_t>(b));
            if (q.base != P.arena + b || q.size != r.size || q.device != r.device) finding("reg_query: range differs");
        }
    }

    // ---- slots ----
    int pick_slot() {
        if (slot_handles.empty()) return -1;
        return in.ConsumeIntegralInRange<int>(0, static_cast<int>(slot_handles.size()) - 1);
    }
    int pick_request() {
        if (req_handles.empty()) return -1;
        return in.ConsumeIntegralInRange<int>(0, static_cast<int>(req_handles.size()) - 1);
    }
    xmc_slot *slot_handle(int s) {
        // A slot never created: a handle the backend never issued.
        return s < 0 ? reinterpret_cast<xmc_slot *>(uintptr_t{0xdead0000}) : slot_handles[s];
    }
    xmc_request *request_handle(int r) {
        return r < 0 ? reinterpret_cast<xmc_request *>(uintptr_t{0xdead1000}) : req_handles[r];
    }
    std::vector<int> pick_batch() {
        std::vector<int> b;
        const int n = in.ConsumeIntegralInRange(1, 3);
        for (int i = 0; i < n && !slot_handles.empty(); ++i) b.push_back(pick_slot());
        return b;
    }

    void slot_create() {
        if (static_cast<int>(slot_handles.size()) >= kMaxSlots) return;
        const size_t bytes = in.ConsumeIntegralInRange(0, 7) ? in.ConsumeIntegralInRange<size_t>(1, 2 * P.granule) : 0;
        const int32_t dev = in.ConsumeIntegralInRange(0, 7) ? 0 : 1;
        xmc_slot *h = nullptr;
        xmc_slot_info info{};
        const xmc_status got = api.slot_create(P.inst, dev, bytes, &h, &info);
        if (dev != 0) return expect_status("slot_create", got, XMC_ERR_NO_DEVICE);
        expect_status("slot_create", got, slots.create(bytes));
        if (got != XMC_OK) return;
        const auto addr = reinterpret_cast<uintptr_t>(info.address);
        if (addr % P.granule || info.size % P.granule || info.size < bytes || info.size >= bytes + P.granule)
            finding("slot_create: address or size not granule-rounded");
        slot_handles.push_back(h);
        slot_infos.push_back(info);
    }

    // Waits at once for a request the backend accepted, as the model does.
    void wait_new(const char *op, int r) {
        const xmc_status got = api.request_wait(P.inst, req_handles[r], kWaitMs);
        if (got == XMC_ERR_TIMEOUT) finding(std::string(op) + ": request not finished after the wait bound (hang)");
        expect_status(op, got, slots.wait(r));
    }

    void slot_release() {
        std::vector<int> b = pick_batch();
        if (b.empty()) b.push_back(-1);
        std::vector<xmc_slot *> hs;
        std::vector<int> ids;
        bool unknown = false;
        for (int s : b) hs.push_back(slot_handle(s)), ids.push_back(s), unknown |= s < 0;
        xmc_request *h = nullptr;
        const bool batch = hs.size() > 1 || in.ConsumeBool();
        const xmc_status got = batch ? api.slot_release_batch(P.inst, hs.data(), hs.size(), P.stream, &h)
                                     : api.slot_release(P.inst, hs[0], P.stream, &h);
        if (unknown) return expect_status("slot_release", got, XMC_ERR_INVALID_HANDLE);
        expect_status("slot_release", got, slots.release(ids));
        if (got != XMC_OK) return;
        req_handles.push_back(h);
        wait_new("slot_release wait", static_cast<int>(req_handles.size()) - 1);
    }

    void slot_remap() {
        std::vector<int> b = pick_batch();
        if (b.empty()) return;
        std::vector<xmc_slot *> hs;
        std::vector<const void *> srcs;
        std::vector<size_t> lens;
        std::vector<Source> kinds;
        std::vector<int> tags;
        for (int s : b) {
            hs.push_back(slot_handles[s]);
            const size_t need = slot_infos[s].size;
            const void *src = nullptr;
            int tag = kNoTag;
            switch (in.ConsumeIntegralInRange(0, 5)) {
                case 0: src = nullptr; break;
                case 1: src = P.arena; break;
                default:
                    if (!real.empty()) {
                        const size_t k = in.ConsumeIntegralInRange<size_t>(0, real.size() - 1);
                        src = reinterpret_cast<const void *>(real[k].first + (in.ConsumeIntegralInRange(0, 7) ? 0 : P.page));
                        tag = static_cast<int>(k);
                    }
            }
            const size_t len = in.PickValueInArray<size_t>({need, need, need, need - 1, need + P.page});
            // The model's class of this source, from the real blocks (VMM-REMAP-COPY).
            Source kind = Source::NotPinned;
            const int blk = src ? pins.containing_block(reinterpret_cast<uintptr_t>(src), len, real) : -1;
            if (!src) kind = Source::Null;
            else if (len < need) kind = Source::Short;
            else if (blk >= 0 && real[blk].first == reinterpret_cast<uintptr_t>(src)) kind = Source::Valid;
            if (kind == Source::Valid) tag = blk;  // the live block there (a freed one's memory may be reused)
            srcs.push_back(src);
            lens.push_back(len);
            kinds.push_back(kind);
            tags.push_back(tag);
        }
        const uint32_t flags = in.PickValueInArray<uint32_t>({0, 0, XMC_REMAP_DEFER_COPY, XMC_REMAP_DEFER_COPY, 2});
        xmc_request *h = nullptr;
        const bool batch = hs.size() > 1 || in.ConsumeBool();
        const xmc_status got = batch ? api.slot_remap_batch(P.inst, hs.data(), hs.size(), P.stream, srcs.data(),
                                                             lens.data(), flags, &h)
                                     : api.slot_remap(P.inst, hs[0], P.stream, srcs[0], lens[0], flags, &h);
        expect_status("slot_remap", got, slots.remap(b, kinds, tags, flags));
        if (got != XMC_OK) return;
        if (flags & XMC_REMAP_DEFER_COPY) {
            std::vector<int> blocks;
            for (size_t i = 0; i < kinds.size(); ++i) blocks.push_back(kinds[i] == Source::Valid ? tags[i] : -1);
            deferred_sources[static_cast<int>(req_handles.size())] = blocks;
        }
        req_handles.push_back(h);
        wait_new("slot_remap wait", static_cast<int>(req_handles.size()) - 1);
        check_contents();
    }

    void launch() {
        const int r = pick_request();
        const uint32_t idx = in.ConsumeIntegralInRange<uint32_t>(0, 3);
        const xmc_status got = api.request_launch_copy(P.inst, request_handle(r), idx, P.stream);
        if (r < 0) return expect_status("request_launch_copy", got, XMC_ERR_INVALID_HANDLE);
        expect_status("request_launch_copy", got, slots.launch(r, idx));
        if (got == XMC_OK) wait_new("request_launch_copy wait", r);
        if (got == XMC_OK && deferred_sources.count(r) && idx < deferred_sources[r].size())
            deferred_sources[r][idx] = -1;  // copied: the source may go
        check_contents();
    }
    void adopt() {
        const int r = pick_request();
        const xmc_status got = api.request_adopt(P.inst, request_handle(r));
        expect_status("request_adopt", got, r < 0 ? XMC_ERR_INVALID_HANDLE : slots.adopt(r));
        check_contents();
    }
    void destroy() {
        const int r = pick_request();
        const xmc_status got = api.request_destroy(P.inst, request_handle(r));
        expect_status("request_destroy", got, r < 0 ? XMC_ERR_INVALID_HANDLE : slots.destroy(r));
        if (got == XMC_OK) deferred_sources.erase(r);
    }
    void query() {
        const int r = pick_request();
        xmc_request_info q{};
        const xmc_status got = api.request_query(P.inst, request_handle(r), &q);
        const bool live = r >= 0 && slots.live_request(r);
        expect_status("request_query", got, live ? XMC_OK : XMC_ERR_INVALID_HANDLE);
        if (!live) return;
        const ModelRequest &m = slots.requests()[r];
        if (q.slots != m.slots.size() || q.adopted != (m.adopted ? 1u : 0u) || !q.done || !q.callback_fired)
            finding("request_query: slots/adopted/done differ from the model");
    }
    void close() {
        const int s = pick_slot();
        const xmc_status got = api.slot_close(P.inst, slot_handle(s));
        expect_status("slot_close", got, s < 0 ? XMC_ERR_INVALID_HANDLE : slots.close(s));
    }
    void write() {
        const int s = pick_slot();
        if (s < 0 || !slots.accessible(s)) return;
        const int tag = next_write_tag++;
        auto *p = static_cast<uint8_t *>(slot_infos[s].address);
        const size_t n = slot_infos[s].size;
        p[0] = p[n / 2] = p[n - 1] = pattern(tag);
        slots.write(s, tag);
    }
    // Every slot the model calls accessible is mapped (a fault would be a finding) and
    // holds the tag the model names, at its first, middle and last byte.
    void check_contents() {
        for (size_t s = 0; s < slot_handles.size(); ++s) {
            if (!slots.accessible(static_cast<int>(s))) continue;
            const auto *p = static_cast<const volatile uint8_t *>(slot_infos[s].address);
            const size_t n = slot_infos[s].size;
            const uint8_t a = p[0], m = p[n / 2], z = p[n - 1];
            const int tag = slots.slots()[s].content;
            if (tag == kNoTag) continue;
            if (a != pattern(tag) || m != pattern(tag) || z != pattern(tag))
                finding("slot " + std::to_string(s) + " does not hold the contents of tag " + std::to_string(tag));
        }
    }

    // ---- end of input: everything goes, and the backend's accounting is back to empty ----
    void cleanup() {
        for (size_t r = 0; r < req_handles.size(); ++r)
            if (slots.live_request(static_cast<int>(r)))
                expect_status("cleanup request_destroy", api.request_destroy(P.inst, req_handles[r]),
                              slots.destroy(static_cast<int>(r)));
        for (size_t s = 0; s < slot_handles.size(); ++s)
            if (slots.live_slot(static_cast<int>(s)))
                expect_status("cleanup slot_close", api.slot_close(P.inst, slot_handles[s]), slots.close(static_cast<int>(s)));
        for (const auto &[b, r] : std::map<size_t, RegModel::Range>(regs.live))
            expect_status("cleanup reg_unregister", api.reg_unregister(P.inst, P.arena + b), regs.unreg(b));
        for (size_t b = 0; b < real.size(); ++b) {
            const PinAddr base{static_cast<int>(b), PinAddr::Base, 0};
            while (pins.blocks()[b].live && pins.blocks()[b].refs > 0)
                expect_status("cleanup pin_unref", api.pin_unref(P.inst, reinterpret_cast<void *>(real[b].first)),
                              pins.unref(base));
            if (pins.blocks()[b].live)
                expect_status("cleanup pin_free", api.pin_free(P.inst, reinterpret_cast<void *>(real[b].first)),
                              pins.free(base));
        }
        xmc_pin_stats s{};
        api.pin_stats(P.inst, &s);
        if (s.bytes_now != 0 || s.blocks_now != 0) finding("pinned blocks left after every block was freed");
        uint64_t free_bytes = 0, total = 0;
        api.device_free_memory(P.inst, 0, &free_bytes, &total);
        if (free_bytes != total) finding("slot memory left after every slot was closed");
        for (size_t off = 0; off < kArenaPages * P.page; off += P.page) {
            xmc_reg_info q{};
            api.reg_query(P.inst, P.arena + off, &q);
            if (q.registered) finding("registration left after every range was unregistered");
        }
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    Run run(in);
    for (int ops = 0; ops < 64 && in.remaining_bytes() > 0; ++ops) {
        switch (in.ConsumeIntegralInRange(0, 18)) {
            case 0: case 1: run.pin_alloc(); break;
            case 2: run.pin_free(); break;
            case 3: run.pin_query(); break;
            case 4: run.pin_ref(); break;
            case 5: run.pin_unref(); break;
            case 6: run.pin_stats(); break;
            case 7: run.reg_register(); break;
            case 8: run.reg_unregister(); break;
            case 9: run.reg_query(); break;
            case 10: run.slot_create(); break;
            case 11: run.slot_release(); break;
            case 12: run.slot_remap(); break;
            case 13: run.launch(); break;
            case 14: run.adopt(); break;
            case 15: run.destroy(); break;
            case 16: run.query(); break;
            case 17: run.close(); break;
            default: run.write(); break;
        }
    }
    run.cleanup();
    return 0;
}
