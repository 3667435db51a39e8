// The one fault-script parser of both fakes (grammar: fakes/README.md).
#include "fault_script.hpp"

namespace xmc_faults {

const Entry* Dialect::find(std::string_view name) const {
    for (const Entry& e : entries)
        if (name == e.name) return &e;
    return nullptr;
}

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// A printable, quoted copy of (the first `limit` bytes of) a rule for messages.
std::string quote(std::string_view s, size_t limit = 80) {
    std::string q;
    for (char c : s.substr(0, limit)) q.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
    if (s.size() > limit) q += "...";
    return "'" + q + "'";
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            parts.push_back(trim(s.substr(start, i - start)));
            start = i + 1;
        }
    return parts;
}

// NUMBER: decimal, or hex with 0x. False when malformed or above max.
bool parse_number(std::string_view s, uint64_t max, uint64_t* out) {
    uint64_t base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    }
    if (s.empty()) return false;
    uint64_t v = 0;
    for (char c : s) {
        uint64_t d = 16;
        if (c >= '0' && c <= '9') d = static_cast<uint64_t>(c - '0');
        if (base == 16 && c >= 'a' && c <= 'f') d = static_cast<uint64_t>(c - 'a' + 10);
        if (base == 16 && c >= 'A' && c <= 'F') d = static_cast<uint64_t>(c - 'A' + 10);
        // (d > max first: max - d must not wrap, as it did for the NCCL fake's max of 7)
        if (d >= base || d > max || v > (max - d) / base) return false;
        v = v * base + d;
    }
    *out = v;
    return true;
}

// WHEN: K or K+, K >= 1.
bool parse_when(std::string_view s, uint64_t* k, bool* and_later) {
    *and_later = !s.empty() && s.back() == '+';
    if (*and_later) s.remove_suffix(1);
    return parse_number(trim(s), kMaxK, k) && *k != 0;
}

// DURATION: a decimal number with its unit, us, ms or s; *no_unit when it has none.
bool parse_duration(std::string_view s, uint64_t* us, bool* no_unit) {
    uint64_t scale = 0;
    size_t digits = s.size();
    if (s.ends_with("us")) scale = 1, digits -= 2;
    else if (s.ends_with("ms")) scale = 1000, digits -= 2;
    else if (s.ends_with("s")) scale = 1000 * 1000, digits -= 1;
    uint64_t n = 0;
    std::string_view number = s.substr(0, digits);
    bool decimal = !number.empty() && number.find_first_not_of("0123456789") == std::string_view::npos;
    *no_unit = scale == 0 && decimal;
    if (scale == 0 || !decimal || !parse_number(number, kMaxDelayUs / scale, &n)) return false;
    *us = n * scale;
    return true;
}

// BYTES: NUMBER with an optional K, M or G (binary multiples).
bool parse_bytes(std::string_view s, uint64_t* out) {
    uint64_t mult = 1;
    char last = s.empty() ? '\0' : s.back();
    if (last == 'K' || last == 'k') mult = uint64_t(1) << 10;
    if (last == 'M' || last == 'm') mult = uint64_t(1) << 20;
    if (last == 'G' || last == 'g') mult = uint64_t(1) << 30;
    if (mult != 1) s.remove_suffix(1);
    uint64_t n = 0;
    if (!parse_number(s, kMaxBytes / mult, &n)) return false;
    *out = n * mult;
    return true;
}

bool is_identifier(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

struct ActionInfo {
    Action action;
    const char* name;
    const char* usage;  // nonidentity's depends on the dialect
};
const ActionInfo kActions[] = {
    {Action::fail, "fail", "fail:ENTRY:CODE[@WHEN]"},
    {Action::delay, "delay", "delay:ENTRY:DURATION[@WHEN]"},
    {Action::exec_delay, "exec_delay", "exec_delay:ENTRY:DURATION[@WHEN]"},
    {Action::nonidentity, "nonidentity", nullptr},
    {Action::size_limit, "size_limit", "size_limit:ENTRY:BYTES:CODE[@WHEN]"},
    {Action::exhaust, "exhaust", "exhaust:ENTRY:N:CODE[@WHEN]"},
};

const ActionInfo* action_named(std::string_view s) {
    for (const ActionInfo& a : kActions)
        if (s == a.name) return &a;
    return nullptr;
}

std::string usage(const ActionInfo& a, const Dialect& d) {
    if (a.usage != nullptr) return a.usage;
    return d.nonidentity_offset ? "nonidentity:ENTRY:OFFSET[@WHEN]" : "nonidentity:ENTRY[@WHEN]";
}

// Whether an action applies to an entry, and the entries it applies to (for messages).
bool applies(Action a, const Entry& e) {
    switch (a) {
        case Action::fail:
        case Action::delay: return true;
        case Action::exec_delay: return e.enqueues;
        case Action::nonidentity: return e.nonidentity;
        case Action::size_limit: return e.takes_size;
        case Action::exhaust: return e.live != nullptr;
    }
    return false;
}

std::string entries_for(Action a, const Dialect& d) {
    std::string list;
    for (const Entry& e : d.entries)
        if (applies(a, e)) list += (list.empty() ? "" : ", ") + std::string(e.name);
    return list;
}

bool parse_code(const Dialect& d, std::string_view s, int64_t* out, std::string& why) {
    int64_t v = 0;
    uint64_t n = 0;
    if (d.code_by_name(s, &v)) {
    } else if (parse_number(s, static_cast<uint64_t>(d.max_code), &n)) {
        v = static_cast<int64_t>(n);
    } else {
        why = std::string("unknown ") + d.code_type + " " + quote(s) + " (a name or a number 1.." +
              std::to_string(d.max_code) + ")";
        return false;
    }
    if (v == 0) {
        why = quote(s) + " is success, not a failure";
        return false;
    }
    *out = v;
    return true;
}

// The Level Zero fake's old form ENTRY:WHEN:ACTION (zeMemFree:1:ZE_RESULT_ERROR_DEVICE_LOST).
// Refused with the same rule spelt in the new form, so the message is the fix. False
// when the fields do not look like that form.
bool old_form(const Dialect& d, const std::vector<std::string_view>& f, std::string& why) {
    const std::string_view entry = f[0], when = f[1], act = f[2];
    uint64_t k = 0;
    bool and_later = false;
    const bool when_ok = when == "*" || parse_when(when, &k, &and_later);
    const bool known = is_identifier(entry) && d.find(d.canonical ? d.canonical(entry) : entry) != nullptr;
    if (!when_ok && !known) return false;
    why = "the old form ENTRY:WHEN:ACTION is gone (rules are ACTION:ENTRY:ARG[@WHEN])";
    if (!when_ok) {
        why += ", and " + quote(when) + " is not a call number K, K+ or *";
        return true;
    }
    const std::string e(entry), at = when == "*" ? "" : "@" + std::string(when);
    std::string rule;
    if (act.starts_with("delay="))
        rule = "delay:" + e + ":" + std::string(trim(act.substr(6))) + "ms";
    else if (act.starts_with("exec_delay="))
        rule = "exec_delay:" + e + ":" + std::string(trim(act.substr(11))) + "ms";
    else if (act == "nonidentity")
        rule = "nonidentity:" + e;
    else
        rule = "fail:" + e + ":" + std::string(act);
    why += ": write " + quote(rule + at, 200);
    return true;
}

bool parse_rule(const Dialect& d, std::string_view text, Rule& r, std::string& why) {
    r.text = std::string(text);
    const size_t at = text.find('@');
    const std::vector<std::string_view> f = split(text.substr(0, at), ':');
    const ActionInfo* a = action_named(f[0]);
    if (a == nullptr) {
        if (at == std::string_view::npos && f.size() == 3 && old_form(d, f, why)) return false;
        why = "unknown action " + quote(f[0]) + " (fail, delay, exec_delay, nonidentity, size_limit or exhaust)";
        return false;
    }
    r.action = a->action;
    if (f.size() < 2 || f[1].empty()) {
        why = "expected " + usage(*a, d);
        return false;
    }

    // ENTRY
    const std::string_view written = f[1];
    if (written == "*") {
        if (r.action != Action::fail && r.action != Action::delay) {
            why = std::string(a->name) + " needs a named entry point, not '*' (it applies to: " +
                  entries_for(r.action, d) + ")";
            return false;
        }
        r.entry = "*";
    } else {
        if (!is_identifier(written)) {
            why = "bad entry point name " + quote(written);
            return false;
        }
        const std::string_view name = d.canonical ? d.canonical(written) : written;
        r.target = d.find(name);
        if (r.target == nullptr) {
            why = "unknown entry point " + quote(written) + " (" + d.fake + " does not implement it)";
            return false;
        }
        r.entry = std::string(name);
        if (!applies(r.action, *r.target)) {
            why = std::string(a->name) + " does not apply to " + quote(written) + " (it applies to: " +
                  entries_for(r.action, d) + ")";
            return false;
        }
    }

    // ARG...
    size_t want = 1;
    if (r.action == Action::nonidentity) want = d.nonidentity_offset ? 1 : 0;
    if (r.action == Action::size_limit || r.action == Action::exhaust) want = 2;
    bool empty_arg = false;
    for (size_t i = 2; i < f.size(); ++i) empty_arg = empty_arg || f[i].empty();
    if (f.size() - 2 != want || empty_arg) {
        why = "expected " + usage(*a, d);
        return false;
    }
    switch (r.action) {
        case Action::fail:
            if (!parse_code(d, f[2], &r.code, why)) return false;
            break;
        case Action::delay:
        case Action::exec_delay: {
            bool no_unit = false;
            if (!parse_duration(f[2], &r.value, &no_unit)) {
                if (no_unit)
                    why = "duration " + quote(f[2]) + " has no unit: write " +
                          quote(std::string(a->name) + ":" + std::string(written) + ":" + std::string(f[2]) + "us" +
                                    (at == std::string_view::npos ? "" : std::string(text.substr(at))),
                                200) +
                          " (microseconds, as the CUDA fake read a bare number), or use ms or s";
                else
                    why = "bad duration " + quote(f[2]) + " (a number with its unit us, ms or s; at most 600s)";
                return false;
            }
            break;
        }
        case Action::nonidentity:
            if (want == 1 && (!parse_number(f[2], kMaxOffset, &r.value) || r.value == 0)) {
                why = "bad offset " + quote(f[2]) + " (non-zero, below 2^40, decimal or 0x hex)";
                return false;
            }
            break;
        case Action::size_limit:
            if (!parse_bytes(f[2], &r.value)) {
                why = "bad byte count " + quote(f[2]) + " (a number with an optional K, M or G, at most 2^62)";
                return false;
            }
            if (!parse_code(d, f[3], &r.code, why)) return false;
            break;
        case Action::exhaust:
            if (!parse_number(f[2], kMaxObjects, &r.value)) {
                why = "bad object count " + quote(f[2]) + " (0..2^32)";
                return false;
            }
            if (!parse_code(d, f[3], &r.code, why)) return false;
            break;
    }

    // WHEN
    if (at != std::string_view::npos) {
        const std::string_view when = trim(text.substr(at + 1));
        if (!parse_when(when, &r.k, &r.and_later)) {
            why = "bad call number " + quote(when) + " (WHEN is K or K+ with K >= 1; leave out '@' for every call)";
            return false;
        }
    }
    return true;
}

}  // namespace

bool parse(const Dialect& d, std::string_view script, std::vector<Rule>& out, std::string& error) {
    out.clear();
    if (script.size() > kMaxScriptBytes) {
        error = "fault script longer than " + std::to_string(kMaxScriptBytes) + " bytes";
        return false;
    }
    if (script.find('\0') != std::string_view::npos) {
        error = "fault script holds a NUL byte";
        return false;
    }
    std::vector<Rule> rules;
    size_t index = 0;
    for (std::string_view line : split(script, '\n')) {
        line = line.substr(0, line.find('#'));  // '#' starts a comment
        for (std::string_view text : split(line, ';')) {
            if (text.empty()) continue;
            ++index;
            if (rules.size() >= kMaxRules) {
                error = "fault script has more than " + std::to_string(kMaxRules) + " rules";
                return false;
            }
            Rule r;
            std::string why;
            if (!parse_rule(d, text, r, why)) {
                error = "rule " + std::to_string(index) + " " + quote(text) + ": " + why;
                return false;
            }
            rules.push_back(std::move(r));
        }
    }
    out = std::move(rules);
    return true;
}

}  // namespace xmc_faults
