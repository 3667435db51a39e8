// The must-pass lists (SPEC 6): the lists embedded at configure time, their generation from the
// catalogue for the current suite version, and the checks of a checked-in list against it.
#include "package.hpp"

#include "catalogue.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace xmc::conformance {

// Generated at configure time (conformance/CMakeLists.txt): package.cpp declares the rest.
namespace embedded {
struct MustPassFile {
    const char *version;
    const char *name;
    const char *text;
};
extern const MustPassFile kMustPassFiles[];
extern const int kMustPassFileCount;
} // namespace embedded
// ---- must-pass lists --------------------------------------------------------

// Trims spaces, tabs and a trailing '\r'.
std::string trim(const std::string &s) {
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

namespace {

// The IDs of a list's text: one a line, '#' starts a comment.
std::vector<std::string> ids_of_text(const std::string &text) {
    std::vector<std::string> ids;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        line = trim(line.substr(0, line.find('#')));
        if (!line.empty()) ids.push_back(line);
    }
    return ids;
}

// Dotted versions compared part by part as numbers ("0.10.0" after "0.9.0").
bool version_less(const std::string &a, const std::string &b) {
    std::istringstream x(a), y(b);
    for (;;) {
        std::string pa, pb;
        const bool ha = static_cast<bool>(std::getline(x, pa, '.')), hb = static_cast<bool>(std::getline(y, pb, '.'));
        if (!ha || !hb) return !ha && hb;
        const long na = std::strtol(pa.c_str(), nullptr, 10), nb = std::strtol(pb.c_str(), nullptr, 10);
        if (na != nb) return na < nb;
    }
}

// The first line at which two texts differ (1-based), with the line of each ("" past the end),
// or 0 when they are equal. A missing newline at the end is a difference of the last line.
int first_difference(const std::string &a, const std::string &b, std::string *line_a, std::string *line_b) {
    if (a == b) return 0;
    size_t pa = 0, pb = 0;
    for (int n = 1;; ++n) {
        const size_t ea = a.find('\n', pa), eb = b.find('\n', pb);
        // A line with its newline, so that "X" and "X\n" differ here.
        const std::string la = pa < a.size() ? a.substr(pa, ea == std::string::npos ? std::string::npos : ea - pa + 1) : "";
        const std::string lb = pb < b.size() ? b.substr(pb, eb == std::string::npos ? std::string::npos : eb - pb + 1) : "";
        if (la != lb) {
            *line_a = la;
            *line_b = lb;
            return n;
        }
        pa += la.size();
        pb += lb.size();
    }
}

// A line as a problem shows it: quoted, its newline dropped (or said missing), or the end of the file.
std::string shown_line(const std::string &line) {
    if (line.empty()) return "the end of the file";
    if (line.back() == '\n') return "'" + line.substr(0, line.size() - 1) + "'";
    return "'" + line + "' (no newline at the end)";
}

// The first line of a generated list: which backends it holds.
std::string list_heading(const std::string &version, const std::string &name) {
    const std::string head = "# xmc " + version + " must-pass list ";
    if (name == "model") return head + "'model': the suite's own reference checks, for every backend\n";
    if (name == "always") return head + "for every backend (capability 'always': the entry points every backend has)\n";
    return head + "for backends declaring capability '" + name + "'\n";
}

// Why a capability's list is empty, where the catalogue gives it no `pr` row of its own; a
// capability without an entry gets a plain statement of the fact.
const std::map<std::string, std::string> &empty_list_notes() {
    static const std::map<std::string, std::string> notes = {
        {"pin_driver", "# None of its own: a driver-pinning backend is held to pin.txt, whose bodies\n"
                       "# check the lock state by the driver's report (PIN-KINDS).\n"},
    };
    return notes;
}

} // namespace

std::string mustpass_dir(const std::string &version) { return "conformance/mustpass/" + version + "/"; }

std::vector<std::string> mustpass_versions() {
    std::set<std::string> seen;
    for (int i = 0; i < embedded::kMustPassFileCount; ++i) seen.insert(embedded::kMustPassFiles[i].version);
    std::vector<std::string> v(seen.begin(), seen.end());
    std::sort(v.begin(), v.end(), version_less);
    return v;
}

bool is_mustpass_version(const std::string &version) {
    const auto v = mustpass_versions();
    return std::find(v.begin(), v.end(), version) != v.end();
}

std::vector<MustPassList> mustpass_lists(const std::string &version) {
    std::vector<MustPassList> v;
    for (int i = 0; i < embedded::kMustPassFileCount; ++i)
        if (embedded::kMustPassFiles[i].version == version)
            v.push_back({embedded::kMustPassFiles[i].name, ids_of_text(embedded::kMustPassFiles[i].text),
                         embedded::kMustPassFiles[i].text});
    return v;
}

bool read_mustpass_lists(const std::string &dir, std::vector<MustPassList> *out, std::string *error) {
    namespace fs = std::filesystem;
    out->clear();
    const fs::path d(dir);
    std::error_code ec;
    fs::directory_iterator it(d, ec);
    if (ec) {
        *error = d.string() + ": " + ec.message();
        return false;
    }
    for (const auto &e : it) {
        if (!e.is_regular_file() || e.path().extension() != ".txt") continue;
        std::ifstream in(e.path(), std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        if (!in) {
            *error = e.path().string() + ": cannot read";
            return false;
        }
        out->push_back({e.path().stem().string(), ids_of_text(text.str()), text.str()});
    }
    std::sort(out->begin(), out->end(), [](const MustPassList &a, const MustPassList &b) { return a.name < b.name; });
    return true;
}

std::vector<MustPassList> generate_mustpass_lists() {
    const std::string version = suite_version();
    std::vector<std::string> names = {"model", "always"};
    for (int i = 0; i < XMC_CAP_COUNT_; ++i) names.push_back(xmc_cap_string(1ull << i));
    std::sort(names.begin(), names.end());
    std::vector<MustPassList> lists;
    for (const auto &name : names) {
        MustPassList l{name, {}, list_heading(version, name)};
        l.text += "# Generated from conformance/requirements.tsv by `xmc mustpass --generate`: edit the catalogue, "
                  "not this file.\n";
        l.text += "# One requirement ID a line. Requirements measured only by a hardware tier are not listed.\n";
        for (const auto &r : catalogue())
            if (r.capability == name && r.in_tier("pr")) l.ids.push_back(r.id);
        if (l.ids.empty()) {
            const auto note = empty_list_notes().find(name);
            l.text += note != empty_list_notes().end()
                          ? note->second
                          : "# None of its own: no requirement of the `pr` tier has '" + name +
                                "' as its primary capability.\n";
        }
        for (const auto &id : l.ids) l.text += id + "\n";
        lists.push_back(std::move(l));
    }
    return lists;
}

bool MustPass::contains(const std::string &id) const {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool mustpass_for(const std::string &version, xmc_caps caps, MustPass *out, std::string *error) {
    *out = MustPass{};
    const std::vector<MustPassList> lists = mustpass_lists(version);
    if (lists.empty()) {
        std::string known;
        for (const auto &v : mustpass_versions()) known += (known.empty() ? "" : ", ") + v;
        *error = "this xmc holds no must-pass lists of suite " + version + " (it holds " +
                 (known.empty() ? std::string("none") : known) + ")";
        // A new suite version's build, before its lists are generated and checked in.
        if (version == suite_version())
            *error += ": generate them from the source tree's root with `xmc mustpass --generate --out " +
                      mustpass_dir(version) + "`, then rebuild";
        return false;
    }
    out->suite = version;
    auto find = [&](const std::string &name) -> const MustPassList * {
        for (const auto &l : lists)
            if (l.name == name) return &l;
        return nullptr;
    };
    // `always` is new in 0.2.0: a version without it held every backend to `model` only.
    std::vector<std::string> want = {"model"};
    if (find("always")) want.push_back("always");
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (caps & (1ull << i)) want.push_back(xmc_cap_string(1ull << i));
    std::set<std::string> ids;
    for (const auto &name : want) {
        const MustPassList *found = find(name);
        // An earlier suite has no list for a capability it predates (0.2's
        // register_portable, ...): it held such a backend to nothing more.
        if (!found && version != suite_version()) continue;
        if (!found) {
            *error = "no must-pass list for capability '" + name + "' in suite " + version + " (" +
                     mustpass_dir(version) + name + ".txt)";
            return false;
        }
        out->lists.push_back(name);
        ids.insert(found->ids.begin(), found->ids.end());
    }
    // Catalogue order, so the file reads like the catalogue.
    for (const auto &r : catalogue())
        if (ids.count(r.id)) out->ids.push_back(r.id);
    return true;
}

std::string mustpass_text(const MustPass &m) {
    std::string s = "# xmc must-pass list: the requirements that must pass (or be waived) for this backend.\n";
    s += "# suite: " + m.suite + "\n# lists:";
    for (const auto &l : m.lists) s += " " + l;
    s += "\n# (the union of " + mustpass_dir(m.suite) + "<list>.txt for `model`, `always` and each declared capability)\n";
    for (const auto &id : m.ids) s += id + "\n";
    return s;
}

bool parse_mustpass(const std::string &text, MustPass *out, std::string *error) {
    *out = MustPass{};
    bool have_suite = false, have_lists = false;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# suite: ", 0) == 0) { out->suite = trim(line.substr(9)); have_suite = true; }
        else if (line.rfind("# lists:", 0) == 0) {
            std::istringstream ls(line.substr(8));
            for (std::string l; ls >> l;) out->lists.push_back(l);
            have_lists = true;
        }
    }
    out->ids = ids_of_text(text);
    if (!have_suite || !have_lists) {
        *error = "mustpass.txt has no '# suite:' or '# lists:' header line";
        return false;
    }
    return true;
}

namespace {

// The current version: each list equals the generated one, byte for byte.
std::vector<std::string> compare_with_generated(const std::string &version, const std::vector<MustPassList> &lists,
                                                const std::string &shown_dir) {
    std::vector<std::string> problems;
    const std::vector<MustPassList> want = generate_mustpass_lists();
    if (lists.empty()) {
        problems.push_back(shown_dir + ": no must-pass lists of suite " + version + " (this suite's)");
    } else {
        for (const auto &w : want) {
            const auto have = std::find_if(lists.begin(), lists.end(), [&](const MustPassList &l) { return l.name == w.name; });
            if (have == lists.end()) {
                problems.push_back(shown_dir + w.name + ".txt is missing: the catalogue gives it " +
                                   std::to_string(w.ids.size()) + " requirement(s)");
                continue;
            }
            std::string line_have, line_want;
            const int n = first_difference(have->text, w.text, &line_have, &line_want);
            if (n)
                problems.push_back(shown_dir + w.name + ".txt:" + std::to_string(n) + ": " + shown_line(line_have) +
                                   ", where the catalogue generates " + shown_line(line_want));
        }
        for (const auto &l : lists)
            if (std::none_of(want.begin(), want.end(), [&](const MustPassList &w) { return w.name == l.name; }))
                problems.push_back(shown_dir + l.name + ".txt is not a list the catalogue generates ('" + l.name +
                                   "' is not a capability, nor 'model' or 'always'): remove it");
    }
    return problems;
}

// An older version: its frozen lists agree with the catalogue.
std::vector<std::string> check_agreement(const std::string &version, const std::vector<MustPassList> &lists,
                                         const std::string &dir) {
    std::vector<std::string> problems;
    if (lists.empty()) return {dir + ": no must-pass lists of suite " + version};
    std::map<std::string, std::string> list_of;  // ID -> list naming it
    for (const auto &l : lists) {
        const xmc_caps bit = capability_bit(l.name);
        if (l.name != "model" && l.name != "always" && !bit)
            problems.push_back(dir + l.name + ".txt: '" + l.name + "' is not a capability (nor 'model' or 'always')");
        for (const auto &id : l.ids) {
            const Requirement *r = nullptr;
            for (const auto &c : catalogue())
                if (c.id == id) r = &c;
            if (!r) { problems.push_back(dir + l.name + ".txt: " + id + " is not in the catalogue"); continue; }
            if (r->capability != l.name)
                problems.push_back(dir + l.name + ".txt: " + id + " needs capability '" + r->capability +
                                   "', so it belongs in " + r->capability + ".txt");
            if (!r->in_tier("pr"))
                problems.push_back(dir + l.name + ".txt: " + id + " is measured by a hardware tier only, so "
                                   "qualification cannot pass it");
            if (list_of.count(id)) problems.push_back(dir + l.name + ".txt: " + id + " is listed twice");
            list_of[id] = l.name;
        }
    }
    return problems;
}

} // namespace

std::string mustpass_regenerate_hint(const std::string &version) {
    return "the lists of suite " + version + " are generated from conformance/requirements.tsv, not edited: "
           "regenerate them from the source tree's root with `xmc mustpass --generate --out " + mustpass_dir(version) +
           "` (the xmc built from that tree), then rebuild";
}

std::vector<std::string> check_mustpass_lists(const std::string &version, const std::vector<MustPassList> &lists,
                                              const std::string &shown_dir) {
    // An older version's lists predate the rows added since: they are history, not regenerated.
    if (version == suite_version()) return compare_with_generated(version, lists, shown_dir);
    return check_agreement(version, lists, shown_dir);
}

} // namespace xmc::conformance
