// libFuzzer harness: the fault-script parsers of both fakes (SPEC 7).
//  - fakes/cuda: xmc_fake::parse_fault_script (fake_cuda_internal.h; grammar in
//    fake_cuda_control.h: ACTION:ENTRY:ARG[@K[+]]), and the exported
//    xmc_fake_cuda_set_faults / xmc_fake_cuda_last_error it backs;
//  - fakes/level_zero: parse_script, file-local to fake_ze_state.cpp, which is compiled
//    into this harness (grammar in fake_ze_control.h: entry:when:action), and the
//    exported xmc_fake_ze_set_faults / xmc_fake_ze_fault_error.
// Every input goes to both parsers. Properties, any breach traps: an input is accepted
// or refused with a non-empty message and no rules; accepted rules respect the grammar's
// limits; the C API agrees with the parser; parsing is deterministic; and accepted
// rules written back in the grammar (the harness's own writer: the fakes have none)
// parse to the same rules.
#include "fake_cuda_control.h"
#include "fake_cuda_internal.h"

// The Level Zero fake's state, configuration and script parser, with its file-local
// functions visible to this translation unit (the rest of the fake is linked).
#include "../fakes/level_zero/fake_ze_state.cpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The fakes print every refused script to stderr, so the tests run with
// -close_fd_mask=2; findings go to a copy of stderr made before libFuzzer closes it.
FILE *g_report = stderr;

[[noreturn]] void finding(const std::string &what) {
    std::fprintf(g_report, "fuzz_fault_scripts: FINDING: %s\n", what.c_str());
    std::fflush(g_report);
    __builtin_trap();
}
#define CHECK(cond, msg)                                            \
    do {                                                            \
        if (!(cond)) finding(std::string("check failed: " #cond ": ") + (msg)); \
    } while (0)

// ---- CUDA ----
using CudaRule = xmc_fake::FaultRule;

std::string cuda_write(const std::vector<CudaRule> &rules) {
    std::string s;
    for (const CudaRule &r : rules) {
        const char *action = r.action == CudaRule::Action::fail    ? "fail"
                             : r.action == CudaRule::Action::delay ? "delay"
                                                                   : "nonidentity";
        s += std::string(action) + ":" + r.entry + ":" + std::to_string(r.arg);
        if (r.k) s += "@" + std::to_string(r.k) + (r.and_later ? "+" : "");
        s += ";\n";
    }
    return s;
}

bool cuda_same(const std::vector<CudaRule> &a, const std::vector<CudaRule> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].action != b[i].action || a[i].entry != b[i].entry || a[i].arg != b[i].arg || a[i].k != b[i].k ||
            a[i].and_later != b[i].and_later || a[i].seen != 0)
            return false;
    return true;
}

void fuzz_cuda(std::string_view script, size_t errbuf) {
    std::vector<CudaRule> rules{CudaRule{}};  // the parser must clear what it is given
    std::string error;
    const bool ok = xmc_fake::parse_fault_script(script, rules, error);
    if (!ok) {
        CHECK(!error.empty(), "CUDA: refused without a message");
        CHECK(rules.empty(), "CUDA: refused but left rules");
    } else {
        CHECK(rules.size() <= 256, "CUDA: more than 256 rules");
        for (const CudaRule &r : rules) {
            CHECK(r.entry == "*" || xmc_fake::known_entry(r.entry), "CUDA: unknown entry " + r.entry);
            CHECK(!r.and_later || r.k >= 1, "CUDA: K+ with K = 0");
            CHECK(r.k <= (uint64_t{1} << 40), "CUDA: K beyond 2^40");
            switch (r.action) {
                case CudaRule::Action::fail: CHECK(r.arg > 0 && r.arg <= 1023, "CUDA: fail code beyond CUresult"); break;
                case CudaRule::Action::delay: CHECK(r.arg >= 0 && r.arg <= 60000000, "CUDA: delay"); break;
                case CudaRule::Action::nonidentity:
                    CHECK(r.entry == "cuMemHostRegister" && r.arg > 0 && r.arg < (int64_t{1} << 40), "CUDA: nonidentity");
                    break;
            }
        }
        // Written back and read again: the same rules.
        std::vector<CudaRule> again;
        std::string e2;
        const std::string text = cuda_write(rules);
        CHECK(xmc_fake::parse_fault_script(text, again, e2), "CUDA: rewritten script refused: " + e2 + "\n" + text);
        CHECK(cuda_same(rules, again), "CUDA: rewritten script parses differently:\n" + text);
    }
    // Deterministic.
    std::vector<CudaRule> twice;
    std::string e3;
    CHECK(xmc_fake::parse_fault_script(script, twice, e3) == ok && e3 == error, "CUDA: a second parse differs");

    // The C API: a C string ends at the first NUL, so only NUL-free scripts compare.
    if (script.find('\0') != std::string_view::npos) return;
    const std::string cstr(script);
    const int rc = xmc_fake_cuda_set_faults(cstr.c_str());
    CHECK((rc == 0) == ok, "CUDA: xmc_fake_cuda_set_faults disagrees with the parser");
    std::vector<char> buf(errbuf + 1, '\x7f');
    const size_t full = xmc_fake_cuda_last_error(buf.data(), errbuf);
    if (!ok) CHECK(full == error.size(), "CUDA: last_error length");
    if (errbuf > 0) {
        const size_t n = std::min(full, errbuf - 1);
        CHECK(buf[n] == '\0', "CUDA: last_error not NUL-terminated within the buffer");
        if (!ok) CHECK(std::string(buf.data()) == error.substr(0, n), "CUDA: last_error text");
    }
    CHECK(buf[errbuf] == '\x7f' || errbuf == 0, "CUDA: last_error wrote past the buffer");
    if (ok) {
        // What the installed rules decide for calls of their entries (fail codes become
        // CUresult values here). Delays are only added up, never slept, at this level.
        xmc_fake::State &g = xmc_fake::state();
        std::lock_guard<std::mutex> lock(g.mu);
        for (size_t i = 0; i < rules.size() && i < 8; ++i) {
            const xmc_fake::FaultDecision d =
                xmc_fake::decide_faults_locked(g, rules[i].entry == "*" ? "cuMemAlloc" : rules[i].entry);
            CHECK(d.fail == CUDA_SUCCESS || xmc_fake::result_name(d.fail) != nullptr || int(d.fail) > 0,
                  "CUDA: decision");
        }
    }
    xmc_fake_cuda_set_faults(nullptr);
}

// ---- Level Zero ----
using ZeRule = xmc_fake_ze::Rule;

std::string ze_write(const std::vector<ZeRule> &rules) {
    std::string s;
    for (const ZeRule &r : rules) {
        s += r.entry + ":" + std::to_string(r.k) + (r.and_later ? "+" : "") + ":";
        switch (r.action) {
            case ZeRule::Result: s += std::to_string(static_cast<uint32_t>(r.result)); break;
            case ZeRule::Delay: s += "delay=" + std::to_string(r.ms); break;
            case ZeRule::ExecDelay: s += "exec_delay=" + std::to_string(r.ms); break;
            case ZeRule::NonIdentity: s += "nonidentity"; break;
        }
        s += "\n";
    }
    return s;
}

bool ze_same(const std::vector<ZeRule> &a, const std::vector<ZeRule> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].entry != b[i].entry || a[i].k != b[i].k || a[i].and_later != b[i].and_later ||
            a[i].action != b[i].action || a[i].result != b[i].result || a[i].ms != b[i].ms || a[i].seen != 0)
            return false;
    return true;
}

void fuzz_ze(const std::string &cstr) {
    std::vector<ZeRule> rules{ZeRule{}};
    std::string error;
    const bool ok = xmc_fake_ze::parse_script(cstr.c_str(), rules, error);
    if (!ok) {
        CHECK(!error.empty(), "ZE: refused without a message");
    } else {
        for (const ZeRule &r : rules) {
            CHECK(xmc_fake_ze::known_entry(r.entry), "ZE: unknown entry " + r.entry);
            CHECK(r.k >= 1, "ZE: K = 0");
            if (r.action == ZeRule::Delay || r.action == ZeRule::ExecDelay) CHECK(r.ms <= 600000, "ZE: delay");
            if (r.action == ZeRule::ExecDelay) CHECK(xmc_fake_ze::is_append(r.entry), "ZE: exec_delay entry");
            if (r.action == ZeRule::NonIdentity) CHECK(r.entry == "zeMemAllocHost", "ZE: nonidentity entry");
            if (r.action == ZeRule::Result) CHECK(static_cast<uint64_t>(r.result) <= 0x7fffffffu, "ZE: result beyond ze_result_t");
        }
        std::vector<ZeRule> again;
        std::string e2;
        const std::string text = ze_write(rules);
        CHECK(xmc_fake_ze::parse_script(text.c_str(), again, e2), "ZE: rewritten script refused: " + e2 + "\n" + text);
        CHECK(ze_same(rules, again), "ZE: rewritten script parses differently:\n" + text);
    }
    std::vector<ZeRule> twice;
    std::string e3;
    CHECK(xmc_fake_ze::parse_script(cstr.c_str(), twice, e3) == ok && (ok || e3 == error), "ZE: a second parse differs");
    // The C API agrees and keeps the reason.
    const int rc = xmc_fake_ze_set_faults(cstr.c_str());
    CHECK((rc == 0) == ok, "ZE: xmc_fake_ze_set_faults disagrees with the parser");
    CHECK(ok == (std::string(xmc_fake_ze_fault_error()).empty()), "ZE: fault_error after set_faults");
    xmc_fake_ze_set_faults(nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    if (FILE *f = fdopen(dup(2), "w")) g_report = f;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 70 * 1024) return 0;
    std::string_view script(reinterpret_cast<const char *>(data), size);
    const size_t errbuf = size ? data[0] % 97 : 0;
    fuzz_cuda(script, errbuf);
    fuzz_ze(std::string(script.substr(0, script.find('\0'))));
    return 0;
}
