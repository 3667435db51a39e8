// libxmc_cuda_interpose.so's control API: the fake's (fake_cuda_control.h, same symbols), so a
// test body does not know which it runs over; and the ledger's listing it reads.
#include "interpose.hpp"

namespace xmc_ip {

// ---- ledger --------------------------------------------------------------------------------

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
    auto hex = [](const void* p) { return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)); };
    for (auto& [d, p] : g.primaries) {
        live += static_cast<size_t>(p.refs);
        add("context 0x%llx primary of device %d, retained %d time(s)", hex(p.ctx), static_cast<int>(d), p.refs);
    }
    for (auto& [s, c] : g.streams) {
        ++live;
        add("stream 0x%llx of context 0x%llx", hex(s), hex(c.ctx));
    }
    for (auto& [e, c] : g.events) {
        ++live;
        add("event 0x%llx of context 0x%llx", hex(e), hex(c.ctx));
    }
    for (auto& [b, a] : g.allocs) {
        ++live;
        add("device allocation 0x%llx, %zu bytes, device %d", static_cast<unsigned long long>(b), a.size, a.dev);
    }
    for (auto& [b, r] : g.regs) {
        ++live;
        if (r.offset == 0)
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%llx", b, r.size, r.flags,
                r.dev, hex(r.ctx));
        else
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%llx, device address "
                "0x%" PRIxPTR,
                b, r.size, r.flags, r.dev, hex(r.ctx), static_cast<uintptr_t>(b + r.offset));
    }
    for (auto& [b, n] : g.reservations) {
        ++live;
        add("address reservation 0x%llx, %zu bytes", static_cast<unsigned long long>(b), n);
    }
    for (auto& [h, p] : g.handles) {
        if (p.released) {
            add("physical handle 0x%llx, %zu bytes, device %d: released, freed when its %d mapping(s) go",
                static_cast<unsigned long long>(h), p.size, p.dev, p.map_count);
        } else {
            ++live;
            add("physical handle 0x%llx, %zu bytes, device %d, mapped %d time(s)", static_cast<unsigned long long>(h),
                p.size, p.dev, p.map_count);
        }
    }
    for (auto& [va, m] : g.mappings) {
        ++live;
        add("mapping 0x%llx, %zu bytes, of handle 0x%llx at offset %zu", static_cast<unsigned long long>(va), m.size,
            static_cast<unsigned long long>(m.handle), m.offset);
    }
    for (auto& [b, n] : g.ipc_opened) {
        ++live;
        add("IPC mapping 0x%llx, opened %d time(s)", static_cast<unsigned long long>(b), n);
    }
    for (auto& [h, c] : g.graphs) {
        ++live;
        add("graph 0x%llx of context 0x%llx", hex(h), hex(c.ctx));
    }
    for (auto& [h, c] : g.execs) {
        ++live;
        add("executable graph 0x%llx of context 0x%llx", hex(h), hex(c.ctx));
    }
    std::string head = "live objects: " + std::to_string(live) + "\n";
    if (g.reclaimed > 0)
        head += "objects freed implicitly by context destruction: " + std::to_string(g.reclaimed) + "\n";
    if (live_out) *live_out = live;
    return head + body;
}

size_t copy_out(const std::string& s, char* buf, size_t n) {
    if (buf != nullptr && n > 0) {
        const size_t k = std::min(s.size(), n - 1);
        std::memcpy(buf, s.data(), k);
        buf[k] = '\0';
    }
    return s.size();
}

}  // namespace xmc_ip

// ---- the control API (fake_cuda_control.h) -------------------------------------------------

using xmc_ip::state;
using xmc_ip::State;

XMC_FAKE_CUDA_EXPORT int xmc_fake_cuda_set_faults(const char* script) {
    State& g = state();
    std::vector<xmc_faults::Rule> rules;
    std::string err;
    if (script != nullptr && !xmc_faults::parse(xmc_ip::dialect(), script, rules, err)) {
        std::lock_guard<std::mutex> lk(g.mu);
        g.last_error = err;
        return -1;
    }
    std::lock_guard<std::mutex> lk(g.mu);
    g.rules = std::move(rules);
    g.last_error = g.init_error;
    xmc_ip::requiet_locked(g);
    return 0;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_last_error(char* buf, size_t n) {
    State& g = state();
    std::string msg;
    {
        std::lock_guard<std::mutex> lk(g.mu);
        msg = g.last_error;
    }
    // Over the fake (the tests here): its configuration error, which the interposer passes on.
    if (msg.empty() && g.real_lib) {
        if (auto real = reinterpret_cast<size_t (*)(char*, size_t)>(dlsym(g.real_lib, "xmc_fake_cuda_last_error"))) {
            std::vector<char> b(real(nullptr, 0) + 1);
            real(b.data(), b.size());
            msg = b.data();
        }
    }
    return xmc_ip::copy_out(msg, buf, n);
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_ledger(char* buf, size_t n) {
    std::lock_guard<std::mutex> lk(state().mu);
    return xmc_ip::copy_out(xmc_ip::ledger_locked(nullptr), buf, n);
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_live_objects(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    size_t live = 0;
    xmc_ip::ledger_locked(&live);
    return live;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_reclaimed_objects(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    return state().reclaimed;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_second_releases(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    return state().second_releases;
}

XMC_FAKE_CUDA_EXPORT uint64_t xmc_fake_cuda_call_count(const char* entry) {
    State& g = state();
    if (entry == nullptr) {  // the sum, not a counter of its own: one shared atomic less per call
        uint64_t total = 0;
        for (const auto& c : g.calls) total += c.load();
        return total;
    }
    const std::string_view base = xmc_ip::base_name(entry);
    for (int i = 0; i < xmc_ip::kEntries; ++i)
        if (base == xmc_ip::dialect().entries[static_cast<size_t>(i)].name) return g.calls[i].load();
    return 0;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_call_records(xmc_fake_cuda_call_record* out, size_t n) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return xmc_ip::read_records(g, out, out != nullptr ? n : 0);
}

XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset_call_records(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    xmc_ip::reset_records_locked(g);
}

// Over a real driver nothing can be freed behind the program's back: the reset clears the
// rules, the counters and the records and re-reads XMC_FAKE_CUDA_FAULTS; the ledger keeps the
// objects still open in the driver (they are).
XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    for (auto& c : g.calls) c.store(0);
    xmc_ip::reset_records_locked(g);
    g.reclaimed = 0;
    g.second_releases = 0;
    if (g.script_error) {  // a malformed script was the error
        g.script_error = false;
        g.init_error.clear();
        g.error_code = CUDA_SUCCESS;
        g.last_error.clear();
    }
    if (g.init_error.empty()) xmc_ip::load_faults_locked(g);
    xmc_ip::requiet_locked(g);
}

// The interposer's own: the test now running, which names the answers recorded from here on
// (XMC_CUDA_INTERPOSE_ANSWERS). The conformance harness calls it as each test starts.
extern "C" XMC_FAKE_CUDA_EXPORT void xmc_cuda_interpose_mark(const char* what) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    g.mark = what ? what : "";
    // The test ran: one that the driver answered nothing but success still counts in a comparison.
    if (g.answers != nullptr && !g.mark.empty() && g.answered.insert(g.mark + "\t-\tstarted").second) {
        std::fprintf(g.answers, "%s\t-\tstarted\n", g.mark.c_str());
        std::fflush(g.answers);
    }
}

// The interposer's own: the real driver it forwards to (copied like xmc_fake_cuda_last_error),
// so a harness can tell it runs over the interposer and name the driver beneath.
extern "C" XMC_FAKE_CUDA_EXPORT size_t xmc_cuda_interpose_real_driver(char* buf, size_t n) {
    return xmc_ip::copy_out(state().real_path, buf, n);
}
