// The fake's process-wide state: the entry guard every driver call passes,
// the configuration read from the environment, the ledger of live objects and
// the control API (fake_cuda_control.h).
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_cuda_control.h"
#include "fake_cuda_internal.h"

namespace xmc_fake {

State& state() {
    // Never destroyed: worker threads may still look at it while the process exits.
    static State* g = new State;
    return *g;
}

// ---- fork ---------------------------------------------------------------------
// A child forked after cuInit has none of the stream workers and maybe a
// mutex some other thread held: like a real driver, it cannot use the
// parent's driver state. Every call there answers CUDA_ERROR_NOT_INITIALIZED
// and nothing is cleaned up at its exit. (A child forked before cuInit, or one
// that only touches memory and _exits, is fine.)
namespace {
std::atomic<bool> g_forked_after_init{false};
pid_t g_loaded_pid = 0;
void on_fork_child() {
    if (state().initialized) g_forked_after_init.store(true);  // the child is single-threaded here
}
}  // namespace

// ---- per-thread state ------------------------------------------------------

namespace {
thread_local bool t_in_host_callback = false;
thread_local bool t_on_callback_thread = false;
thread_local uint64_t t_nonidentity = 0;
thread_local uint64_t t_exec_delay_us = 0;
thread_local std::vector<uint64_t> t_ctx_stack;
thread_local uint64_t t_ctx_epoch = 0;
}  // namespace

bool in_host_callback() { return t_in_host_callback; }
void set_in_host_callback(bool v) { t_in_host_callback = v; }
void set_on_callback_thread() { t_on_callback_thread = true; }
uint64_t current_nonidentity_offset() { return t_nonidentity; }
uint64_t current_exec_delay_us() { return t_exec_delay_us; }

std::vector<uint64_t>& ctx_stack() {
    ctx_stack_clear_if_stale();
    return t_ctx_stack;
}

void ctx_stack_clear_if_stale() {
    uint64_t epoch = state().epoch;  // read under the caller's lock
    if (t_ctx_epoch != epoch) {
        t_ctx_stack.clear();
        t_ctx_epoch = epoch;
    }
}

// ---- the entry guard ---------------------------------------------------------

CUresult enter(const char* name, bool need_init, const uint64_t* size) {
    if (g_forked_after_init.load()) return CUDA_ERROR_NOT_INITIALIZED;
    State& g = state();
    xmc_faults::Decision d;
    bool initialized = false;
    {
        std::lock_guard<std::mutex> lk(g.mu);
        std::string_view base = base_name(name);
        auto it = g.calls.find(base);
        if (it == g.calls.end())
            g.calls.emplace(std::string(base), 1);
        else
            ++it->second;
        ++g.total_calls;
        // The calling thread, observed here for every call (VMM-CALLBACK is checked from these).
        if (g.call_records.size() < XMC_FAKE_CUDA_CALL_RECORDS) {
            xmc_fake_cuda_call_record rec{};
            std::snprintf(rec.entry, sizeof rec.entry, "%.*s", static_cast<int>(base.size()), base.data());
            rec.tid = static_cast<int64_t>(gettid());
            rec.in_host_callback = t_in_host_callback;
            rec.on_callback_thread = t_on_callback_thread;
            g.call_records.push_back(rec);
        }
        ++g.call_records_seen;
        if (g.config.trace)
            std::fprintf(stderr, "xmc_fake_cuda: %s%s\n", name,
                         t_in_host_callback ? " (on a host-callback thread: refused)" : "");
        // The real driver may refuse calls from a host function; the fake
        // always does (except the pure string lookups), so a backend that
        // calls the driver there is caught (VMM-CALLBACK).
        bool lookup = base == "cuGetErrorName" || base == "cuGetErrorString";
        if (t_in_host_callback && !lookup) return CUDA_ERROR_NOT_PERMITTED;
        d = xmc_faults::decide(g.rules, {base, size != nullptr, size != nullptr ? *size : 0});
        initialized = g.initialized;
    }
    t_nonidentity = d.offset;
    t_exec_delay_us = d.exec_delay_us;
    if (d.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(d.delay_us));
    if (d.fail) return static_cast<CUresult>(d.code);
    if (need_init && !initialized) return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

uint64_t new_handle_locked() {
    // Spread the numbers out a little so handles of different kinds are easy
    // to tell apart in a debugger; they are never dereferenced.
    return 0x10000 + (state().next_handle++) * 0x10;
}

// ---- configuration --------------------------------------------------------------

namespace {

bool parse_u64(std::string_view s, uint64_t* out) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = v;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == sep) {
            parts.push_back(trim(s.substr(start, i - start)));
            start = i + 1;
        }
    }
    return parts;
}

// "1G", "512M", "4096" -> bytes; at most 1 TiB.
bool parse_bytes(std::string_view s, size_t* out) {
    if (s.empty()) return false;
    uint64_t mult = 1;
    char last = s.back();
    if (last == 'K' || last == 'k') mult = 1ull << 10;
    if (last == 'M' || last == 'm') mult = 1ull << 20;
    if (last == 'G' || last == 'g') mult = 1ull << 30;
    if (mult != 1) s.remove_suffix(1);
    uint64_t v = 0;
    if (!parse_u64(s, &v) || v == 0 || v > (1ull << 40) / mult) return false;
    *out = static_cast<size_t>(v * mult);
    return true;
}

int attr_by_name(std::string_view n) {
    if (n == "host_register_supported") return CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED;
    if (n == "virtual_memory_management_supported")
        return CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
    if (n == "unified_addressing") return CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING;
    if (n == "can_map_host_memory") return CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY;
    if (n == "read_only_host_register_supported") return CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED;
    uint64_t v = 0;
    if (parse_u64(n, &v) && v < CU_DEVICE_ATTRIBUTE_MAX) return static_cast<int>(v);
    return -1;
}

}  // namespace

Config read_config() {
    Config c;
    auto fail = [&c](const std::string& m) {
        if (c.error.empty()) c.error = m;
    };
    const char* v = std::getenv("XMC_FAKE_CUDA_DEVICES");
    if (v != nullptr && *v != '\0') {
        uint64_t n = 0;
        if (!parse_u64(trim(v), &n) || n > kMaxDevices)
            fail(std::string("XMC_FAKE_CUDA_DEVICES='") + v + "': expected an integer 0.." +
                 std::to_string(kMaxDevices));
        else
            c.device_count = static_cast<int>(n);
    }
    c.order.resize(static_cast<size_t>(c.device_count));
    for (int i = 0; i < c.device_count; ++i) c.order[static_cast<size_t>(i)] = i;
    v = std::getenv("XMC_FAKE_CUDA_ORDER");
    if (v != nullptr && *v != '\0') {
        std::vector<std::string_view> parts = split(v, ',');
        std::vector<int> order;
        std::vector<bool> seen(static_cast<size_t>(c.device_count), false);
        bool ok = parts.size() == static_cast<size_t>(c.device_count);
        for (std::string_view p : parts) {
            uint64_t n = 0;
            if (!ok || !parse_u64(p, &n) || n >= static_cast<uint64_t>(c.device_count) || seen[n]) {
                ok = false;
                break;
            }
            seen[n] = true;
            order.push_back(static_cast<int>(n));
        }
        if (ok)
            c.order = order;
        else
            fail(std::string("XMC_FAKE_CUDA_ORDER='") + v + "': expected a permutation of 0.." +
                 std::to_string(c.device_count - 1) + " (comma-separated, one entry per device)");
    }
    c.mem_bytes.assign(static_cast<size_t>(c.device_count), size_t(1) << 30);
    v = std::getenv("XMC_FAKE_CUDA_MEM_BYTES");
    if (v != nullptr && *v != '\0') {
        std::vector<std::string_view> parts = split(v, ',');
        bool ok = parts.size() == 1 || parts.size() == static_cast<size_t>(c.device_count);
        std::vector<size_t> bytes;
        for (std::string_view p : parts) {
            size_t b = 0;
            if (!ok || !parse_bytes(p, &b)) {
                ok = false;
                break;
            }
            bytes.push_back(b);
        }
        if (!ok)
            fail(std::string("XMC_FAKE_CUDA_MEM_BYTES='") + v +
                 "': expected bytes (e.g. 1G, 512M, 4096), one value or one per device");
        else if (bytes.size() == 1)
            c.mem_bytes.assign(static_cast<size_t>(c.device_count), bytes[0]);
        else
            c.mem_bytes = bytes;
    }
    v = std::getenv("XMC_FAKE_CUDA_STREAM_POOL_BYTES");
    if (v != nullptr && *v != '\0' && !parse_bytes(v, &c.stream_pool_bytes))
        fail(std::string("XMC_FAKE_CUDA_STREAM_POOL_BYTES='") + v + "': expected bytes (e.g. 2M, 2097152)");
    v = std::getenv("XMC_FAKE_CUDA_ATTRS");
    if (v != nullptr && *v != '\0') {
        for (std::string_view p : split(v, ',')) {
            if (p.empty()) continue;
            int phys = -1;
            if (p.size() > 2 && p[0] == 'p') {
                size_t colon = p.find(':');
                uint64_t n = 0;
                if (colon == std::string_view::npos || !parse_u64(p.substr(1, colon - 1), &n) ||
                    n >= static_cast<uint64_t>(c.device_count)) {
                    fail(std::string("XMC_FAKE_CUDA_ATTRS: bad device prefix in '") + std::string(p) + "'");
                    break;
                }
                phys = static_cast<int>(n);
                p = p.substr(colon + 1);
            }
            size_t eq = p.find('=');
            int attr = eq == std::string_view::npos ? -1 : attr_by_name(trim(p.substr(0, eq)));
            std::string_view val = eq == std::string_view::npos ? std::string_view{} : trim(p.substr(eq + 1));
            bool neg = !val.empty() && val[0] == '-';
            uint64_t n = 0;
            if (attr < 0 || !parse_u64(neg ? val.substr(1) : val, &n) || n > 0x7fffffff) {
                fail(std::string("XMC_FAKE_CUDA_ATTRS: bad entry '") + std::string(p) +
                     "' (expected [pN:]ATTR=VALUE, ATTR a number below CU_DEVICE_ATTRIBUTE_MAX or a known name)");
                break;
            }
            c.attrs.push_back({phys, {attr, neg ? -static_cast<int>(n) : static_cast<int>(n)}});
        }
    }
    v = std::getenv("XMC_FAKE_CUDA_FAULTS");
    if (v != nullptr) c.faults = v;
    v = std::getenv("XMC_FAKE_CUDA_TRACE");
    c.trace = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
    return c;
}

namespace {

// Reads the environment into the state: configuration, and the fault script
// from XMC_FAKE_CUDA_FAULTS (reported on stderr when malformed).
void load_config_locked(State& g) {
    g.config = read_config();
    g.rules.clear();
    g.rules_from_api = false;
    if (g.config.error.empty() && !g.config.faults.empty()) {
        std::string err;
        if (!xmc_faults::parse(fault_dialect(), g.config.faults, g.rules, err)) {
            g.rules.clear();
            g.config.error = "XMC_FAKE_CUDA_FAULTS: " + err;
        }
    }
    g.last_error = g.config.error;
    if (!g.config.error.empty())
        std::fprintf(stderr, "xmc_fake_cuda: %s; cuInit will answer CUDA_ERROR_INVALID_VALUE\n",
                     g.config.error.c_str());
}

__attribute__((constructor)) void on_load() {
    g_loaded_pid = getpid();
    pthread_atfork(nullptr, nullptr, on_fork_child);
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    load_config_locked(g);
}

// Every stream's worker (live, retired, each context's null stream) told to stop, and woken; the
// streams, to wait for their workers (g.mu held).
std::vector<std::shared_ptr<Stream>> abandon_all_streams_locked(State& g) {
    std::vector<std::shared_ptr<Stream>> all;
    for (auto& [h, s] : g.streams) all.push_back(s);
    for (auto& s : g.retired) all.push_back(s);
    for (auto& [h, c] : g.contexts)
        if (c->null_stream) all.push_back(c->null_stream);
    for (auto& s : all) s->abandon = true;
    g.cv.notify_all();
    return all;
}

// On unload or exit: stop the stream workers (dropping queued work) so no
// thread runs this library's code after it is gone. A worker stuck in a host
// function for more than a few seconds is left behind (detached).
__attribute__((destructor)) void on_unload() {
    if (g_forked_after_init.load() || getpid() != g_loaded_pid) return;  // not our workers
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    const std::vector<std::shared_ptr<Stream>> all = abandon_all_streams_locked(g);
    g.cv.wait_for(lk, std::chrono::seconds(5), [&] {
        return std::all_of(all.begin(), all.end(), [](auto& s) { return s->exited; });
    });
    for (auto& s : all) {
        if (!s->worker.joinable()) continue;
        if (s->exited)
            s->worker.join();
        else
            s->worker.detach();
    }
    stop_callback_thread_locked(lk, std::chrono::seconds(5));
}

}  // namespace

// ---- ledger -------------------------------------------------------------------------

std::string ledger_locked(size_t* live_out) {
    State& g = state();
    std::string body;
    size_t live = 0;
    char line[256];
    auto add = [&](const char* fmt, auto... args) {
        std::snprintf(line, sizeof line, fmt, args...);
        body += line;
        body += '\n';
    };
    for (auto& [h, c] : g.contexts) {
        if (!c->alive) continue;
        const Device& d = g.devices[static_cast<size_t>(c->ordinal)];
        if (c->primary) {
            live += static_cast<size_t>(c->refs);
            add("context 0x%" PRIx64 " primary of device %d (physical %d), retained %d time(s)", h, c->ordinal,
                d.physical, c->refs);
        } else {
            live += 1;
            add("context 0x%" PRIx64 " created on device %d (physical %d)", h, c->ordinal, d.physical);
        }
    }
    for (auto& [h, s] : g.streams) {
        live += 1;
        add("stream 0x%" PRIx64 " of context 0x%" PRIx64 ", %zu op(s) queued", h, s->ctx, s->queue.size());
    }
    for (auto& [h, e] : g.events) {
        live += 1;
        add("event 0x%" PRIx64 " of context 0x%" PRIx64, h, e->ctx);
    }
    for (auto& [b, a] : g.allocations) {
        live += 1;
        add("device allocation 0x%" PRIxPTR ", %zu bytes, device %d", b, a.size, a.ordinal);
    }
    for (auto& [b, r] : g.registrations) {
        live += 1;
        if (r.dev_base == r.base)
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%" PRIx64, b, r.size,
                r.flags, r.ordinal, r.ctx);
        else
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%" PRIx64
                ", device address 0x%" PRIxPTR,
                b, r.size, r.flags, r.ordinal, r.ctx, r.dev_base);
    }
    for (auto& [b, r] : g.reservations) {
        live += 1;
        add("address reservation 0x%" PRIxPTR ", %zu bytes", b, r.size);
    }
    for (auto& [h, p] : g.handles) {
        if (p.released) {
            add("physical handle 0x%" PRIx64 ", %zu bytes, device %d: released, freed when its %d mapping(s) go",
                h, p.size, p.ordinal, p.map_count);
        } else {
            live += 1;
            add("physical handle 0x%" PRIx64 ", %zu bytes, device %d, mapped %d time(s)", h, p.size, p.ordinal,
                p.map_count);
        }
    }
    for (auto& [va, m] : g.mappings) {
        live += 1;
        add("mapping 0x%" PRIxPTR ", %zu bytes, of handle 0x%" PRIx64 " at offset %zu", va, m.size, m.handle,
            m.offset);
    }
    for (auto& [b, o] : g.ipc_opened) {  // cuIpcOpenMemHandle: closed by cuIpcCloseMemHandle
        live += 1;
        add("IPC mapping 0x%" PRIxPTR ", %zu bytes, of export %" PRIu64 " of process %d, device %d, opened %d time(s)",
            b, o.size, o.id, o.pid, o.ordinal, o.refs);
    }
    graph_ledger_locked(body, live);  // graphs and executable graphs (fake_cuda_graph.cpp)
    std::string head = "live objects: " + std::to_string(live) + "\n";
    if (g.reclaimed > 0)
        head += "objects freed implicitly by context destruction: " + std::to_string(g.reclaimed) + "\n";
    if (live_out != nullptr) *live_out = live;
    return head + body;
}

// ---- reset ------------------------------------------------------------------------------

void free_all_locked(std::unique_lock<std::mutex>& lk) {
    State& g = state();
    const std::vector<std::shared_ptr<Stream>> all = abandon_all_streams_locked(g);
    g.cv.wait(lk, [&] { return std::all_of(all.begin(), all.end(), [](auto& s) { return s->exited; }); });
    for (auto& s : all)
        if (s->worker.joinable()) s->worker.join();
    // A host function already running is waited for (its stream is gone).
    stop_callback_thread_locked(lk, std::chrono::hours(24));
    graphs_free_all_locked();
    g.streams.clear();
    g.stream_high.clear();
    g.retired.clear();
    g.events.clear();
    for (auto& [b, a] : g.allocations) {
        munmap(reinterpret_cast<void*>(a.base), a.mapped);
        if (a.share_fd >= 0) close(a.share_fd);
    }
    g.allocations.clear();
    ipc_free_all_locked();
    for (auto& [b, f] : g.freed) munmap(reinterpret_cast<void*>(b), f.size);
    g.freed.clear();
    g.registrations.clear();
    vmm_free_all_locked();
    g.contexts.clear();
    g.primary.clear();
    g.devices.clear();
}

}  // namespace xmc_fake

// ---- the control API ---------------------------------------------------------------------

using namespace xmc_fake;

namespace {
size_t copy_out(const std::string& s, char* buf, size_t n) {
    if (buf != nullptr && n > 0) {
        size_t k = std::min(s.size(), n - 1);
        std::memcpy(buf, s.data(), k);
        buf[k] = '\0';
    }
    return s.size();
}
}  // namespace

XMC_FAKE_EXPORT int xmc_fake_cuda_set_faults(const char* script) {
    State& g = state();
    std::vector<xmc_faults::Rule> rules;
    std::string err;
    if (script != nullptr && !xmc_faults::parse(fault_dialect(), script, rules, err)) {
        std::lock_guard<std::mutex> lk(g.mu);
        g.last_error = err;
        return -1;
    }
    std::lock_guard<std::mutex> lk(g.mu);
    g.rules = std::move(rules);
    g.rules_from_api = true;
    g.last_error.clear();
    return 0;
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_last_error(char* buf, size_t n) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return copy_out(g.last_error, buf, n);
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_ledger(char* buf, size_t n) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return copy_out(ledger_locked(nullptr), buf, n);
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_live_objects(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    size_t live = 0;
    ledger_locked(&live);
    return live;
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_reclaimed_objects(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return g.reclaimed;
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_second_releases(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return g.second_releases;
}

XMC_FAKE_EXPORT uint64_t xmc_fake_cuda_call_count(const char* entry) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (entry == nullptr) return g.total_calls;
    auto it = g.calls.find(base_name(entry));
    return it == g.calls.end() ? 0 : it->second;
}

XMC_FAKE_EXPORT size_t xmc_fake_cuda_call_records(xmc_fake_cuda_call_record* out, size_t n) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    const size_t k = std::min(n, g.call_records.size());
    if (out != nullptr && k > 0) std::memcpy(out, g.call_records.data(), k * sizeof *out);
    return g.call_records_seen;
}

XMC_FAKE_EXPORT void xmc_fake_cuda_reset_call_records(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    g.call_records.clear();
    g.call_records_seen = 0;
}

XMC_FAKE_EXPORT void xmc_fake_cuda_reset(void) {
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    free_all_locked(lk);
    g.initialized = false;
    ++g.epoch;
    g.calls.clear();
    g.total_calls = 0;
    g.call_records.clear();
    g.call_records_seen = 0;
    g.reclaimed = 0;
    g.released.clear();
    g.second_releases = 0;
    load_config_locked(g);
    g.cv.notify_all();
}
