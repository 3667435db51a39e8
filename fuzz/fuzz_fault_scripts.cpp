// libFuzzer harness: the fault-script parser both fakes share (fakes/common/, grammar in
// fakes/README.md), with each fake's dialect (xmc_fake::fault_dialect for fakes/cuda,
// xmc_fake_ze::fault_dialect for fakes/level_zero), the matching of rules to calls,
// and the fakes' exported xmc_fake_cuda_set_faults / xmc_fake_ze_set_faults.
// Every input goes to both dialects. Properties, any breach traps: an input is accepted
// or refused with a message naming the rule and no rules; accepted rules respect the
// grammar's limits and the dialect (entry, what the action applies to, code range);
// the C APIs agree with the parser; parsing is deterministic; accepted rules written
// back in the grammar (the harness's own writer: the fakes have none) parse to the same
// rules; and matching counts each call once per rule and lets the first fail rule that
// fires decide.
#include "fake_cuda_control.h"
#include "fake_cuda_internal.h"
#include "fake_ze_control.h"
#include "fake_ze_internal.h"
#include "fault_script.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
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
#define CHECK(cond, msg)                                                        \
    do {                                                                        \
        if (!(cond)) finding(std::string("check failed: " #cond ": ") + (msg)); \
    } while (0)

using xmc_faults::Action;
using xmc_faults::Dialect;
using xmc_faults::Rule;

const char *action_name(Action a) {
    switch (a) {
        case Action::fail: return "fail";
        case Action::delay: return "delay";
        case Action::exec_delay: return "exec_delay";
        case Action::nonidentity: return "nonidentity";
        case Action::size_limit: return "size_limit";
        case Action::exhaust: return "exhaust";
    }
    return "?";
}

// The rules in the grammar: codes as numbers, durations in us, sizes in bytes.
std::string write(const std::vector<Rule> &rules) {
    std::string s;
    for (const Rule &r : rules) {
        s += std::string(action_name(r.action)) + ":" + r.entry;
        switch (r.action) {
            case Action::fail: s += ":" + std::to_string(r.code); break;
            case Action::delay:
            case Action::exec_delay: s += ":" + std::to_string(r.value) + "us"; break;
            case Action::nonidentity:
                if (r.value != 0) s += ":" + std::to_string(r.value);
                break;
            case Action::size_limit:
            case Action::exhaust: s += ":" + std::to_string(r.value) + ":" + std::to_string(r.code); break;
        }
        if (r.k) s += "@" + std::to_string(r.k) + (r.and_later ? "+" : "");
        s += ";\n";
    }
    return s;
}

bool same(const std::vector<Rule> &a, const std::vector<Rule> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].action != b[i].action || a[i].entry != b[i].entry || a[i].target != b[i].target ||
            a[i].code != b[i].code || a[i].value != b[i].value || a[i].k != b[i].k ||
            a[i].and_later != b[i].and_later || a[i].seen != 0 || b[i].seen != 0)
            return false;
    return true;
}

void check_rule(const Dialect &d, const std::string &who, const Rule &r) {
    const bool star = r.entry == "*";
    CHECK(star ? r.target == nullptr : r.target == d.find(r.entry) && r.target != nullptr,
          who + ": entry " + r.entry);
    CHECK(!star || r.action == Action::fail || r.action == Action::delay, who + ": '*' with " + action_name(r.action));
    CHECK(r.k <= xmc_faults::kMaxK && (!r.and_later || r.k >= 1), who + ": WHEN");
    const bool has_code = r.action == Action::fail || r.action == Action::size_limit || r.action == Action::exhaust;
    CHECK(!has_code || (r.code >= 1 && r.code <= d.max_code), who + ": code beyond the range");
    switch (r.action) {
        case Action::fail: break;
        case Action::delay: CHECK(r.value <= xmc_faults::kMaxDelayUs, who + ": delay"); break;
        case Action::exec_delay:
            CHECK(r.value <= xmc_faults::kMaxDelayUs && r.target->enqueues, who + ": exec_delay");
            break;
        case Action::nonidentity:
            CHECK(r.target->nonidentity, who + ": nonidentity entry");
            CHECK(d.nonidentity_offset ? r.value >= 1 && r.value <= xmc_faults::kMaxOffset : r.value == 0,
                  who + ": nonidentity offset");
            break;
        case Action::size_limit:
            CHECK(r.target->takes_size && r.value <= xmc_faults::kMaxBytes, who + ": size_limit");
            break;
        case Action::exhaust:
            CHECK(r.target->live != nullptr && r.value <= xmc_faults::kMaxObjects, who + ": exhaust");
            break;
    }
}

// Matching: each call counts once against every rule of its entry (or '*'), and the
// first fail rule due decides (size_limit and exhaust may come first: checked only
// when none of them is due before it).
void check_matching(const Dialect &d, std::vector<Rule> rules, const std::string &who, uint64_t size) {
    // The exhaust rules' live counts read the fakes' state under their locks.
    std::scoped_lock lock(xmc_fake::state().mu, xmc_fake_ze::S().mu);
    for (size_t call = 0; call < 8 && call < rules.size(); ++call) {
        const std::string entry = rules[call].entry == "*" ? d.entries[call % d.entries.size()].name : rules[call].entry;
        std::vector<uint64_t> before;
        for (const Rule &r : rules) before.push_back(r.seen);
        const xmc_faults::Decision dec = xmc_faults::decide(rules, {entry, true, size});
        const Rule *first_fail = nullptr;
        bool other_due_first = false;
        for (size_t i = 0; i < rules.size(); ++i) {
            const Rule &r = rules[i];
            const bool match = r.entry == "*" || r.entry == entry;
            CHECK(r.seen == before[i] + (match ? 1 : 0), who + ": a call counted " +
                                                            std::to_string(r.seen - before[i]) + " times");
            const bool due = match && (r.k == 0 || r.seen == r.k || (r.and_later && r.seen >= r.k));
            if (!due || first_fail != nullptr) continue;
            if (r.action == Action::fail) first_fail = &r;
            if (r.action == Action::size_limit || r.action == Action::exhaust) other_due_first = true;
        }
        if (first_fail != nullptr && !other_due_first)
            CHECK(dec.fail && dec.code == first_fail->code, who + ": the first fail rule due did not decide");
        if (first_fail == nullptr && !other_due_first) CHECK(!dec.fail, who + ": a call failed with no rule due");
    }
}

void fuzz_dialect(const Dialect &d, const std::string &who, std::string_view script, uint64_t size) {
    std::vector<Rule> rules{Rule{}};  // the parser must clear what it is given
    std::string error;
    const bool ok = xmc_faults::parse(d, script, rules, error);
    if (!ok) {
        CHECK(!error.empty(), who + ": refused without a message");
        CHECK(error.rfind("rule ", 0) == 0 || error.rfind("fault script ", 0) == 0, who + ": message " + error);
        CHECK(rules.empty(), who + ": refused but left rules");
    } else {
        CHECK(rules.size() <= xmc_faults::kMaxRules, who + ": more than 256 rules");
        for (const Rule &r : rules) check_rule(d, who, r);
        std::vector<Rule> again;
        std::string e2;
        const std::string text = write(rules);
        CHECK(xmc_faults::parse(d, text, again, e2), who + ": rewritten script refused: " + e2 + "\n" + text);
        CHECK(same(rules, again), who + ": rewritten script parses differently:\n" + text);
        check_matching(d, rules, who, size);
    }
    std::vector<Rule> twice;
    std::string e3;
    CHECK(xmc_faults::parse(d, script, twice, e3) == ok && e3 == error, who + ": a second parse differs");
}

// The exported C APIs agree with the parser (a C string ends at the first NUL, so only
// NUL-free scripts compare).
void fuzz_c_apis(std::string_view script, size_t errbuf) {
    if (script.find('\0') != std::string_view::npos) return;
    const std::string cstr(script);
    std::vector<Rule> rules;
    std::string error;

    const bool cuda_ok = xmc_faults::parse(xmc_fake::fault_dialect(), script, rules, error);
    CHECK((xmc_fake_cuda_set_faults(cstr.c_str()) == 0) == cuda_ok, "CUDA: set_faults disagrees with the parser");
    std::vector<char> buf(errbuf + 1, '\x7f');
    const size_t full = xmc_fake_cuda_last_error(buf.data(), errbuf);
    if (!cuda_ok) CHECK(full == error.size(), "CUDA: last_error length");
    if (errbuf > 0) {
        const size_t n = std::min(full, errbuf - 1);
        CHECK(buf[n] == '\0', "CUDA: last_error not NUL-terminated within the buffer");
        if (!cuda_ok) CHECK(std::string(buf.data()) == error.substr(0, n), "CUDA: last_error text");
    }
    CHECK(buf[errbuf] == '\x7f' || errbuf == 0, "CUDA: last_error wrote past the buffer");
    xmc_fake_cuda_set_faults(nullptr);

    const bool ze_ok = xmc_faults::parse(xmc_fake_ze::fault_dialect(), script, rules, error);
    CHECK((xmc_fake_ze_set_faults(cstr.c_str()) == 0) == ze_ok, "ZE: set_faults disagrees with the parser");
    CHECK(ze_ok ? std::string(xmc_fake_ze_fault_error()).empty() : xmc_fake_ze_fault_error() == error,
          "ZE: fault_error after set_faults");
    xmc_fake_ze_set_faults(nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    if (FILE *f = fdopen(dup(2), "w")) g_report = f;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 70 * 1024) return 0;
    const std::string_view script(reinterpret_cast<const char *>(data), size);
    const size_t errbuf = size ? data[0] % 97 : 0;
    const uint64_t call_size = size ? uint64_t{1} << (data[size - 1] % 40) : 0;  // what the matched calls pass
    fuzz_dialect(xmc_fake::fault_dialect(), "CUDA", script, call_size);
    fuzz_dialect(xmc_fake_ze::fault_dialect(), "ZE", script, call_size);
    fuzz_c_apis(script, errbuf);
    return 0;
}
