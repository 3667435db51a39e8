#include "catalogue.hpp"

#include <fnmatch.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

namespace xmc::conformance {

extern const char *const kCatalogueTsv;  // generated from requirements.tsv

std::string Requirement::test_prefix() const {
    std::string p = id;
    for (char &c : p)
        if (c == '-') c = '_';
    return p + "_";
}

bool Requirement::in_tier(const std::string &t) const {
    for (const auto &x : tiers)
        if (x == t) return true;
    return false;
}

static std::vector<std::string> split_filter(const std::string &filter) {
    std::vector<std::string> globs;
    size_t start = 0;
    while (true) {
        const size_t comma = filter.find(',', start);
        globs.push_back(filter.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return globs;
        start = comma + 1;
    }
}

std::string filter_problem(const std::string &filter) {
    if (filter.empty()) return "";
    for (const std::string &g : split_filter(filter))
        if (g.empty() || g == "-")
            return "'" + filter + "' has an empty glob (globs are separated by ',', an exclusion is '-GLOB')";
    return "";
}

bool filter_matches(const std::string &filter, const std::string &id) {
    if (filter.empty()) return true;
    bool any_positive = false, positive = false;
    for (const std::string &g : split_filter(filter)) {
        if (!g.empty() && g[0] == '-') {
            if (fnmatch(g.c_str() + 1, id.c_str(), 0) == 0) return false;
        } else {
            any_positive = true;
            positive = positive || fnmatch(g.c_str(), id.c_str(), 0) == 0;
        }
    }
    return positive || !any_positive;
}

bool Requirement::selected_by(const std::string &filter, const std::string &tier) const {
    return filter_matches(filter, id) && (tier.empty() || in_tier(tier));
}

std::string Requirement::missing_capability(xmc_caps declared) const {
    for (const auto &c : capabilities)
        if (c != "model" && c != "always" && !(declared & capability_bit(c))) return c;
    return "";
}

bool parse_catalogue(const std::string &tsv, std::vector<Requirement> *out, std::string *error) {
    std::vector<Requirement> v;
    std::istringstream in(tsv);
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        Requirement r;
        std::string caps, tiers, alone;
        std::getline(fields, r.id, '\t');
        std::getline(fields, caps, '\t');
        std::getline(fields, tiers, '\t');
        std::getline(fields, r.summary, '\t');
        std::getline(fields, alone, '\t');
        std::string threads;
        std::getline(fields, threads);
        std::istringstream cs(caps);
        for (std::string c; std::getline(cs, c, '+');) r.capabilities.push_back(c);
        std::istringstream ts(tiers);
        for (std::string t; std::getline(ts, t, ',');) r.tiers.push_back(t);
        std::string bad;
        if (r.id.empty() || r.summary.empty() || r.tiers.empty() || r.capabilities.empty()) bad = "four tab-separated fields";
        for (const auto &c : r.capabilities)
            if (c != "model" && c != "always" && !capability_bit(c)) bad = "a known capability, not '" + c + "'";
        // The optional fifth column says how the requirement shares the machine under --jobs:
        // never, or only when its device is one other processes share (a GPU, not the host
        // backend's model of one nor a fake driver's, which each process has to itself); or
        // that its tests mostly sleep, so it runs in the waiting lane.
        constexpr const char *kAlone = "alone: ", *kShared = "alone on a shared device: ", *kWaits = "waits: ";
        if (bad.empty() && !alone.empty()) {
            const std::string a = kAlone, sh = kShared, w = kWaits;
            if (alone.rfind(sh, 0) == 0 && alone.size() > sh.size()) {
                r.alone = alone.substr(sh.size());
                r.alone_if_shared = true;
            } else if (alone.rfind(a, 0) == 0 && alone.size() > a.size()) {
                r.alone = alone.substr(a.size());
            } else if (alone.rfind(w, 0) == 0 && alone.size() > w.size()) {
                r.waits = alone.substr(w.size());
            } else {
                bad = "a fifth field 'alone: <why it cannot share the machine>', 'alone on a shared device: <why>', "
                      "'waits: <why its tests mostly sleep>' or none, not '" + alone + "'";
            }
        }
        constexpr const char *kThreads = "threads: ";
        if (bad.empty() && !threads.empty()) {
            if (threads.rfind(kThreads, 0) == 0 && threads.size() > std::strlen(kThreads))
                r.threads = threads.substr(std::strlen(kThreads));
            else
                bad = "a sixth field 'threads: <why its tests are the concurrency checks>' or none, not '" + threads + "'";
        }
        if (!bad.empty()) {
            if (error) *error = "catalogue line " + std::to_string(line_no) + ": expected " + bad + ": " + line;
            return false;
        }
        r.capability = r.capabilities.front();
        v.push_back(r);
    }
    *out = std::move(v);
    return true;
}

namespace {
std::vector<Requirement> &rows() {
    static std::vector<Requirement> v = [] {
        std::vector<Requirement> r;
        std::string err;
        if (!parse_catalogue(kCatalogueTsv, &r, &err)) throw std::runtime_error("embedded " + err);
        return r;
    }();
    return v;
}
} // namespace

const std::vector<Requirement> &catalogue() { return rows(); }

void use_catalogue(std::vector<Requirement> r) { rows() = std::move(r); }

xmc_caps capability_bit(const std::string &name) {
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (name == xmc_cap_string(1ull << i)) return 1ull << i;
    return 0;
}

const Requirement *requirement_of_test(const std::string &test_name) {
    const Requirement *best = nullptr;
    for (const auto &r : catalogue()) {
        const std::string p = r.test_prefix();
        if (test_name.rfind(p, 0) == 0 && (!best || p.size() > best->test_prefix().size())) best = &r;
    }
    return best;
}

} // namespace xmc::conformance
