// The probe's recorded-result file format; see probe_format.h.
#include "probe_format.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <set>

namespace xmc::probe {

bool valid_case_name(const std::string& name) {
    if (name.empty()) return false;
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) return false;
    }
    return true;
}

namespace {

std::vector<std::string> split_tabs(const std::string& s) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : s) {
        if (c == '\t') {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    parts.push_back(cur);
    return parts;
}

bool parse_int64(const std::string& s, int64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    size_t i = (s[0] == '-') ? 1 : 0;
    if (i == s.size()) return false;
    for (size_t k = i; k < s.size(); ++k)
        if (s[k] < '0' || s[k] > '9') return false;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || end == nullptr || *end != '\0') return false;
    out = static_cast<int64_t>(v);
    return true;
}

bool valid_result_word(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c == ' ' || c == '\t' || static_cast<unsigned char>(c) < 0x20) return false;
    return true;
}

}  // namespace

bool parse_recording(std::istream& in, Recording& out, std::string& error) {
    out = Recording{};
    std::set<std::string> seen;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (line[0] == '#') {
            size_t start = (line.size() > 1 && line[1] == ' ') ? 2 : 1;
            out.comments.push_back(line.substr(start));
            continue;
        }
        std::vector<std::string> f = split_tabs(line);
        if (f.size() < 3 || f.size() > 4) {
            error = "line " + std::to_string(lineno) + ": expected 3 or 4 TAB-separated fields "
                    "(case, result, code[, note]), found " + std::to_string(f.size());
            return false;
        }
        Record r;
        r.name = f[0];
        r.result = f[1];
        r.line = lineno;
        if (!valid_case_name(r.name)) {
            error = "line " + std::to_string(lineno) + ": bad case name '" + r.name +
                    "' (letters a-z, digits and '_' only)";
            return false;
        }
        if (!valid_result_word(r.result)) {
            error = "line " + std::to_string(lineno) + ": bad result '" + r.result +
                    "' (one word, no blanks)";
            return false;
        }
        if (!parse_int64(f[2], r.code)) {
            error = "line " + std::to_string(lineno) + ": bad code '" + f[2] +
                    "' (a decimal integer)";
            return false;
        }
        if (f.size() == 4) r.note = f[3];
        if (!seen.insert(r.name).second) {
            error = "line " + std::to_string(lineno) + ": case '" + r.name + "' appears twice";
            return false;
        }
        out.records.push_back(std::move(r));
    }
    if (in.bad()) {
        error = "read error";
        return false;
    }
    return true;
}

bool read_recording(const std::string& path, Recording& out, std::string& error) {
    std::ifstream f(path);
    if (!f) {
        error = "cannot open '" + path + "'";
        return false;
    }
    std::string inner;
    if (!parse_recording(f, out, inner)) {
        error = path + ": " + inner;
        return false;
    }
    return true;
}

std::string format_record(const Record& r) {
    std::string s = r.name + "\t" + r.result + "\t" + std::to_string(r.code);
    if (!r.note.empty()) {
        std::string note = r.note;
        for (char& c : note)
            if (c == '\t' || c == '\n' || c == '\r') c = ' ';
        s += "\t" + note;
    }
    return s;
}

const Record* find_record(const Recording& rec, const std::string& name) {
    for (const Record& r : rec.records)
        if (r.name == name) return &r;
    return nullptr;
}

}  // namespace xmc::probe
