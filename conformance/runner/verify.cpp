#include "verify.hpp"

#include "catalogue.hpp"
#include "bench.hpp"
#include "package.hpp"
#include "report.hpp"

#include <unistd.h>

#include <pugixml.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace xmc::conformance {
namespace {

// Collects the problems; each is printed once, with its reason.
struct Problems {
    std::vector<std::string> list;
    void add(const std::string &what) {
        list.push_back(what);
        std::printf("xmc verify: PROBLEM: %s\n", what.c_str());
    }
};

std::string join(const std::vector<std::string> &v, const char *sep = ", ") {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

bool failing(const std::string &status) { return status != "passed" && status != "skipped"; }

// ---- the checks, one function each ------------------------------------------

// The member of j at `path`, or null where a step is missing or not an object: operator[] of a
// const json asserts on a missing key (verify aborted on an environment.json lacking cpu.cores).
const json &member(const json &j, std::initializer_list<const char *> path) {
    static const json none;
    const json *at = &j;
    for (const char *k : path) {
        if (!at->is_object() || !at->contains(k)) return none;
        at = &(*at)[k];
    }
    return *at;
}

void check_summary(const json &results, const std::string &summary_txt, Problems &p) {
    std::map<std::string, int> n;
    for (const auto &r : member(results, {"requirements"})) n[r.value("verdict", "")]++;
    const std::string recount = summary_line(static_cast<int>(member(results, {"requirements"}).size()), n["passed"], n["failed"],
                                             n["unsupported"], n["waived"]);
    std::string line = summary_txt.substr(0, summary_txt.find('\n'));
    if (line.rfind("xmc: tests:", 0) != 0)
        p.add("summary.txt does not hold a summary line ('xmc: tests:N passed:N failed:N unsupported:N waived:N')");
    else if (line != recount)
        p.add("summary.txt says '" + line + "' but the verdicts in results.json count '" + recount + "'");
    const json &s = member(results, {"summary"});
    const std::string obj = summary_line(s.value("tests", -1), s.value("passed", -1), s.value("failed", -1),
                                         s.value("unsupported", -1), s.value("waived", -1));
    if (obj != recount) p.add("results.json's summary says '" + obj + "' but its verdicts count '" + recount + "'");
}

void check_verdicts(const std::string &dir, const json &results, const MustPass &mp, Problems &p) {
    std::set<std::string> seen;
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", ""), v = r.value("verdict", "");
        const Requirement *req = nullptr;
        for (const auto &c : catalogue())
            if (c.id == id) req = &c;
        if (!req) p.add("results.json: requirement '" + id + "' is not in the catalogue of suite " + suite_version());
        if (!seen.insert(id).second) p.add("results.json: requirement " + id + " appears twice");
        if (v != "passed" && v != "failed" && v != "unsupported" && v != "waived")
            p.add("results.json: " + id + " has verdict '" + v + "' (not passed, failed, unsupported or waived)");
        int passed = 0, failed = 0;
        std::string first_failed, first_passed;
        for (const auto &t : member(r, {"tests"})) {
            const std::string st = t.value("status", "");
            if (st == "passed") { ++passed; if (first_passed.empty()) first_passed = t.value("name", ""); }
            else if (failing(st)) { ++failed; if (first_failed.empty()) first_failed = t.value("name", "") + " " + st; }
        }
        const bool unexpected_pass = r.value("reason", "").rfind("unexpected pass", 0) == 0;
        if (v == "passed" && (failed || !passed))
            p.add(id + " is 'passed' but its tests say otherwise (" +
                  (failed ? "test " + first_failed : std::string("no test passed")) + ")");
        if (v == "failed" && !member(r, {"tests"}).empty() && !failed && !unexpected_pass)
            p.add(id + " is 'failed' but none of its tests failed");
        if (v == "waived" && !failed) p.add(id + " is 'waived' but none of its tests failed");
        if (v == "unsupported" && (passed || failed))
            p.add(id + " is 'unsupported' but its tests ran to a result (" +
                  (failed ? "test " + first_failed : "test " + first_passed + " passed") + ")");
        if (r.value("mustpass", false) != mp.contains(id))
            p.add("results.json marks " + id + (r.value("mustpass", false) ? " must-pass" : " not must-pass") +
                  ", but mustpass.txt " + (mp.contains(id) ? "lists it" : "does not list it"));
        if (!member(r, {"tests"}).empty() && access((dir + "/logs/" + id + ".log").c_str(), R_OK) != 0)
            p.add("missing log logs/" + id + ".log of a requirement whose tests ran");
    }
}

void check_mustpass(const json &results, const json &caps, const MustPass &mp, Problems &p) {
    // The lists a backend with these capabilities runs against, of the suite
    // version the package names (qualify --mustpass), which this xmc must hold.
    xmc_caps declared = 0;
    for (const auto &c : caps.value("capabilities", json::array())) declared |= capability_bit(c.get<std::string>());
    MustPass want;
    std::string err;
    if (!mustpass_for(mp.suite, declared, &want, &err)) { p.add("mustpass.txt names suite " + mp.suite + ": " + err); return; }
    const json &rm = results.value("mustpass", json::object());
    if (rm.value("suite", "") != mp.suite)
        p.add("results.json records the must-pass lists of suite " + rm.value("suite", "") + " but mustpass.txt those of suite " +
              mp.suite);
    if (mp.lists != want.lists)
        p.add("mustpass.txt names the lists [" + join(mp.lists) + "] but a backend declaring [" +
              caps_to_string(declared) + "] runs against [" + join(want.lists) + "] of suite " + mp.suite);
    if (rm.value("lists", json::array()) != json(mp.lists))
        p.add("results.json records the must-pass lists " + rm.value("lists", json::array()).dump() +
              " but mustpass.txt names [" + join(mp.lists) + "]");
    std::vector<std::string> missing, extra;
    for (const auto &id : want.ids)
        if (!mp.contains(id)) missing.push_back(id);
    for (const auto &id : mp.ids)
        if (!want.contains(id)) extra.push_back(id);
    if (!missing.empty()) p.add("mustpass.txt leaves out " + join(missing) + " of the checked-in lists of suite " + mp.suite);
    if (!extra.empty()) p.add("mustpass.txt adds " + join(extra) + ", which the checked-in lists of suite " + mp.suite + " do not hold");
    std::set<std::string> have;
    for (const auto &r : member(results, {"requirements"})) have.insert(r.value("id", ""));
    std::string selection;
    if (!results.value("filter", "").empty()) selection = "--filter '" + results.value("filter", "") + "'";
    if (!results.value("tier", "").empty()) selection += (selection.empty() ? "" : " ") + ("--tier " + results.value("tier", ""));
    if (results.contains("shard") && member(results, {"shard"}).is_object())
        selection += (selection.empty() ? "" : " ") + ("--shard " + std::to_string(member(results, {"shard"}).value("index", 0)) + "/" +
                                                       std::to_string(member(results, {"shard"}).value("count", 0)) +
                                                       ": xmc merge joins the shards into a complete package");
    for (const auto &id : mp.ids)
        if (!have.count(id))
            p.add("must-pass requirement " + id + " has no result in results.json" +
                  (selection.empty() ? "" : " (the run selected requirements with " + selection + ")"));
}

void check_waivers(const json &results, const std::vector<Waiver> &waivers, const MustPass &mp,
                   const std::vector<DeviceFacts> &devices, Problems &p) {
    const std::string backend = member(results, {"backend"}).value("name", "");
    std::map<std::string, const Waiver *> applies;
    for (const auto &w : waivers) {
        if (!waiver_applies(w, backend, devices)) continue;
        if (!mp.contains(w.id))
            p.add("waivers.tsv:" + std::to_string(w.line) + ": waiver for " + w.id + " (backend " + w.backend +
                  "), which is not in the must-pass list: only a must-pass requirement can be waived");
        applies[w.id] = &w;
    }
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", ""), v = r.value("verdict", "");
        if (v == "waived" && !applies.count(id))
            p.add(id + " is 'waived' but waivers.tsv holds no waiver for it that applies to backend " + backend);
        if (v == "passed" && applies.count(id))
            p.add(id + " is waived (waivers.tsv:" + std::to_string(applies[id]->line) +
                  ") but passed: an unexpected pass of a waived requirement must fail the run");
    }
}

void check_capabilities(const json &results, const json &caps, const json &env, Problems &p) {
    const json &rb = member(results, {"backend"});
    const std::string name = rb.value("name", "");
    if (caps.value("backend", "") != name || caps.value("version", "") != rb.value("version", ""))
        p.add("capabilities.json names backend " + caps.value("backend", "") + " " + caps.value("version", "") +
              " but results.json names " + name + " " + rb.value("version", ""));
    if (member(env, {"backend"}).value("name", "") != name)
        p.add("environment.json names backend " + member(env, {"backend"}).value("name", "") + " but results.json names " + name);
    xmc_caps declared = 0;
    std::vector<std::string> names;
    for (const auto &c : caps.value("capabilities", json::array())) {
        const std::string s = c.get<std::string>();
        if (!capability_bit(s)) p.add("capabilities.json lists '" + s + "', which is not a capability");
        declared |= capability_bit(s);
        names.push_back(s);
    }
    if (caps.value("mask", 0ull) != declared)
        p.add("capabilities.json: the mask " + std::to_string(caps.value("mask", 0ull)) + " does not match the names [" +
              join(names) + "]");
    if (rb.value("capabilities", "") != caps_to_string(declared))
        p.add("capabilities.json declares [" + caps_to_string(declared) + "] but results.json records the backend's "
              "capabilities as [" + rb.value("capabilities", "") + "]");
    if (member(env, {"backend"}).value("capabilities", "") != caps_to_string(declared))
        p.add("capabilities.json declares [" + caps_to_string(declared) + "] but environment.json records [" +
              member(env, {"backend"}).value("capabilities", "") + "]");
    // A requirement is unsupported-by-capability exactly when one of its row's
    // capabilities is not declared (the catalogue says which it needs).
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", "");
        const Requirement *row = nullptr;
        for (const auto &c : catalogue())
            if (c.id == id) row = &c;
        if (!row) continue;  // an unknown ID is reported above
        const std::string missing = row->missing_capability(declared);
        const bool says_undeclared = r.value("reason", "").find("' not declared") != std::string::npos &&
                                     r.value("reason", "").rfind("capability '", 0) == 0;
        if (!missing.empty() && r.value("verdict", "") != "unsupported")
            p.add(id + " needs capability '" + missing + "', which capabilities.json does not declare, yet it is '" +
                  r.value("verdict", "") + "'");
        if (missing.empty() && says_undeclared)
            p.add(id + " says " + r.value("reason", "") + ", but capabilities.json declares all it needs");
    }
    // The library itself, where it is on this machine.
    const std::string path = rb.value("path", "");
    if (!path.empty() && access(path.c_str(), R_OK) == 0) {
        std::string err;
        if (const LoadedBackend *b = load_backend(path, &err)) {
            if (std::string(b->api->name) != name || b->api->capabilities != declared)
                p.add("the library " + path + " is backend " + b->api->name + " declaring [" +
                      caps_to_string(b->api->capabilities) + "], but the package records " + name + " declaring [" +
                      caps_to_string(declared) + "]");
        }
    } else {
        std::printf("xmc verify: note: the backend library %s is not on this machine; its capabilities are taken "
                    "from the package\n", path.c_str());
    }
}

// Where two texts first differ, for a message that names it: the character
// index, and what each holds there (a lost newline is the usual case: written
// unescaped into an attribute, a newline is read back as a space).
std::string first_difference(const std::string &want, const std::string &got) {
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    auto at = [i](const std::string &s) -> std::string {
        if (i >= s.size()) return "the end";
        const char c = s[i];
        if (c == '\n') return "a newline";
        if (c == '\r') return "a carriage return";
        if (c == '\t') return "a tab";
        if (c == ' ') return "a space";
        if (static_cast<unsigned char>(c) >= 0x80) {  // part of a multi-byte character: not printable alone
            char hex[16];
            std::snprintf(hex, sizeof hex, "byte 0x%02x", static_cast<unsigned char>(c));
            return hex;
        }
        return "'" + std::string(1, c) + "'";
    };
    return "at character " + std::to_string(i) + ": " + at(want) + " in results.json, " + at(got) + " in junit.xml";
}

// XML's end-of-line handling, which every parser applies to element text:
// "\r\n" and "\r" read as "\n".
std::string xml_eol(const std::string &s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\r') o += s[i];
        else if (i + 1 >= s.size() || s[i + 1] != '\n') o += '\n';
    }
    return o;
}

// One testcase against what results.json says of it: the outcome element
// (<failure> for a failing status, <skipped> for a skip, none for a pass) and
// its text exactly as results.json has it.
void check_testcase(const std::string &id, const pugi::xml_node &tc, const std::string &name,
                    const std::string &status, const std::string &message, Problems &p) {
    const std::string where = "junit.xml disagrees with results.json on " + id + ": testcase '" + name + "'";
    if (std::string(tc.attribute("classname").value()) != id)
        p.add(where + " has classname '" + tc.attribute("classname").value() + "'");
    int failures = 0, skips = 0;
    for (const pugi::xml_node &c : tc.children()) {
        if (c.type() != pugi::node_element) continue;
        const std::string tag = c.name();
        if (tag == "failure") ++failures;
        else if (tag == "skipped") ++skips;
        else p.add(where + " holds an unexpected <" + tag + ">");
    }
    const int want_failures = failing(status) ? 1 : 0, want_skips = status == "skipped" ? 1 : 0;
    if (failures != want_failures || skips != want_skips) {
        p.add(where + " holds " + std::to_string(failures) + " <failure> and " + std::to_string(skips) +
              " <skipped>, but its status is '" + status + "'");
        return;
    }
    const std::string text = junit_text(message);
    if (want_failures) {
        const pugi::xml_node f = tc.child("failure");
        if (std::string(f.attribute("type").value()) != status)
            p.add(where + ": <failure type=\"" + f.attribute("type").value() + "\">, but its status is '" + status + "'");
        if (f.attribute("message").value() != text)
            p.add(where + ": the failure message differs " + first_difference(text, f.attribute("message").value()));
        else if (f.text().get() != xml_eol(text))
            p.add(where + ": the failure text differs " + first_difference(xml_eol(text), f.text().get()));
    }
    if (want_skips && tc.child("skipped").attribute("message").value() != text)
        p.add(where + ": the skip message differs " + first_difference(text, tc.child("skipped").attribute("message").value()));
}

// junit.xml, parsed with pugixml as a CI system reads it (attribute values
// normalised: a newline survives only written as &#10;), checked against
// results.json: root <testsuites> with tests (requirements) and failures
// (failed requirements), one <testsuite> per requirement, one <testcase> per
// test in results.json's order (one named after the requirement when it ran
// no test), and each outcome as check_testcase says.
void check_junit(const json &results, const std::string &xml, Problems &p) {
    pugi::xml_document doc;
    // (parse_ws_pcdata_single: a message of only whitespace is still a message)
    const pugi::xml_parse_result parsed =
        doc.load_buffer(xml.data(), xml.size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
    if (!parsed) {
        const auto offset = static_cast<size_t>(parsed.offset);
        const long line = 1 + std::count(xml.begin(), xml.begin() + static_cast<long>(std::min(offset, xml.size())), '\n');
        p.add("junit.xml is not well-formed XML: " + std::string(parsed.description()) + " at offset " +
              std::to_string(offset) + " (line " + std::to_string(line) + ")");
        return;
    }
    const pugi::xml_node root = doc.document_element();
    if (std::string(root.name()) != "testsuites") {
        p.add("junit.xml's root element is <" + std::string(root.name()) + ">, not <testsuites>");
        return;
    }
    std::map<std::string, int> n;
    for (const auto &r : member(results, {"requirements"})) n[r.value("verdict", "")]++;
    const std::string tests = root.attribute("tests").value(), failures = root.attribute("failures").value();
    if (tests != std::to_string(member(results, {"requirements"}).size()) || failures != std::to_string(n["failed"]))
        p.add("junit.xml counts tests=" + tests + " failures=" + failures + " but results.json holds " +
              std::to_string(member(results, {"requirements"}).size()) + " requirements, " + std::to_string(n["failed"]) +
              " failed");
    std::map<std::string, pugi::xml_node> suites;
    for (const pugi::xml_node &s : root.children()) {
        if (s.type() != pugi::node_element) continue;
        const std::string name = s.attribute("name").value();
        if (std::string(s.name()) != "testsuite") p.add("junit.xml holds <" + std::string(s.name()) + "> in <testsuites>");
        else if (!suites.emplace(name, s).second) p.add("junit.xml holds two testsuites for " + name);
    }
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", ""), v = r.value("verdict", "");
        const auto it = suites.find(id);
        if (it == suites.end()) { p.add("junit.xml has no testsuite for " + id); continue; }
        const pugi::xml_node suite = it->second;
        suites.erase(it);
        // What results.json says the testcases are: name, status, message.
        std::vector<std::array<std::string, 3>> want;
        for (const auto &t : member(r, {"tests"})) want.push_back({t.value("name", ""), t.value("status", ""), t.value("message", "")});
        if (want.empty())
            want.push_back({id, v == "passed" ? "passed" : v == "failed" ? "failed" : "skipped", r.value("reason", "")});
        if (std::string(suite.attribute("tests").value()) != std::to_string(want.size()))
            p.add("junit.xml disagrees with results.json on " + id + ": testsuite tests=" + suite.attribute("tests").value() +
                  " for " + std::to_string(want.size()) + " testcase(s)");
        std::vector<pugi::xml_node> cases;
        for (const pugi::xml_node &c : suite.children()) {
            if (c.type() != pugi::node_element) continue;
            if (std::string(c.name()) == "testcase") cases.push_back(c);
            else p.add("junit.xml disagrees with results.json on " + id + ": <" + c.name() + "> in its testsuite");
        }
        if (cases.size() != want.size()) {
            p.add("junit.xml disagrees with results.json on " + id + ": " + std::to_string(cases.size()) +
                  " testcase(s) for " + std::to_string(want.size()) + " test(s)");
            continue;
        }
        for (size_t i = 0; i < cases.size(); ++i) {
            if (cases[i].attribute("name").value() != want[i][0]) {
                p.add("junit.xml disagrees with results.json on " + id + ": testcase " + std::to_string(i + 1) + " is '" +
                      cases[i].attribute("name").value() + "' where results.json has '" + want[i][0] + "'");
                continue;
            }
            check_testcase(id, cases[i], want[i][0], want[i][1], want[i][2], p);
        }
    }
    for (const auto &[id, node] : suites) p.add("junit.xml holds " + id + ", which results.json does not");
}

void check_environment(const json &results, const json &env, Problems &p) {
    for (const char *key : {"suite", "os", "cpu", "compiler", "backend", "devices", "date", "hugepages"})
        if (!env.contains(key)) p.add(std::string("environment.json lacks '") + key + "'");
    // The host: CPU model and core count; transparent and explicit huge pages.
    if (env.contains("cpu") && (!member(env, {"cpu", "model"}).is_string() || !member(env, {"cpu", "cores"}).is_number()))
        p.add("environment.json: the CPU model or core count (cpu.model, cpu.cores) is not recorded");
    if (env.contains("hugepages")) {
        const json &h = member(env, {"hugepages"});
        if (!member(h, {"transparent", "enabled"}).is_string() || !member(h, {"transparent", "defrag"}).is_string())
            p.add("environment.json: the transparent huge page settings (hugepages.transparent.enabled, defrag) are not recorded");
        if (!member(h, {"explicit"}).is_object() || member(h, {"explicit"}).empty())
            p.add("environment.json: the explicit huge pages (hugepages.explicit, /proc/meminfo HugePages_*) are not recorded");
    }
    // Each device: its PCI link and NUMA node, or why they are not known.
    if (env.contains("devices") && member(env, {"devices"}).is_array())
        for (const auto &d : member(env, {"devices"})) {
            if (d.contains("error")) continue;  // device_info failed: said so
            const std::string which = "device " + std::to_string(d.value("index", -1));
            if (!d.contains("pci") || !member(d, {"pci"}).is_object()) {
                p.add("environment.json: " + which + " has no 'pci' (its PCI link speed, width and NUMA node, or why they are unknown)");
                continue;
            }
            const json &pci = member(d, {"pci"});
            if (pci.contains("error")) continue;
            for (const char *k : {"bus_id", "current_link_speed", "current_link_width", "numa_node"})
                if (!member(pci, {k}).is_string())
                    p.add("environment.json: " + which + "'s pci lacks '" + k + "' (and gives no error saying why)");
        }
    if (!env.contains("suite") || !env.contains("os") || !env.contains("devices")) return;
    if (member(env, {"suite"}).value("version", "") != member(results, {"suite"}).value("version", "") ||
        member(env, {"suite"}).value("git_revision", "") != member(results, {"suite"}).value("git_revision", ""))
        p.add("environment.json records suite " + member(env, {"suite"}).value("version", "") + " (" +
              member(env, {"suite"}).value("git_revision", "") + ") but results.json " + member(results, {"suite"}).value("version", "") +
              " (" + member(results, {"suite"}).value("git_revision", "") + ")");
    if (member(env, {"suite"}).value("git_revision", "").empty()) p.add("environment.json: the git revision is empty (\"unknown\" if not known)");
    if (member(env, {"os"}).value("sysname", "").empty() || member(env, {"os"}).value("release", "").empty())
        p.add("environment.json: the OS (uname) is not recorded");
    if (!member(env, {"devices"}).is_array()) p.add("environment.json: 'devices' is not a list");
    else if (env.contains("device_count") && member(env, {"device_count"}).get<int>() != static_cast<int>(member(env, {"devices"}).size()))
        p.add("environment.json: device_count " + member(env, {"device_count"}).dump() + " but " +
              std::to_string(member(env, {"devices"}).size()) + " devices listed");
}

void check_bench(const std::string &dir, const json &results, Problems &p) {
    const bool asked = results.value("bench", false);
    const bool present = access((dir + "/bench.json").c_str(), R_OK) == 0;
    if (asked && !present) { p.add("missing file: bench.json (results.json says the run had --bench)"); return; }
    if (!asked && present) { p.add("bench.json is present but results.json says the run had no --bench"); return; }
    if (!present) return;
    std::string text;
    read_text(dir + "/bench.json", &text);
    const json b = json::parse(text, nullptr, false);
    if (b.is_discarded() || !b.contains("rows")) { p.add("bench.json is not valid JSON with 'rows'"); return; }
    if (b.value("backend", "") != member(results, {"backend"}).value("name", ""))
        p.add("bench.json measured backend " + b.value("backend", "") + ", the package is of " +
              member(results, {"backend"}).value("name", ""));
    // bench.csv beside it: the same rows, in the same order, with the same verdicts.
    std::string csv;
    if (!read_text(dir + "/bench.csv", &csv)) p.add("missing file: bench.csv (written beside bench.json)");
    else {
        std::vector<std::string> lines;
        std::istringstream in(csv);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        if (lines.empty() || lines[0].rfind("path,", 0) != 0) p.add("bench.csv has no header line ('path,series,...')");
        else if (lines.size() - 1 != member(b, {"rows"}).size())
            p.add("bench.csv holds " + std::to_string(lines.size() - 1) + " rows, bench.json " + std::to_string(member(b, {"rows"}).size()));
        else
            for (size_t i = 0; i < member(b, {"rows"}).size(); ++i) {
                const std::string want = member(b, {"rows"})[i].value("verdict", "");
                const std::string &line = lines[i + 1];
                if (line.size() < want.size() + 1 || line.compare(line.size() - want.size() - 1, std::string::npos, "," + want) != 0)
                    p.add("bench.csv row " + std::to_string(i + 1) + " does not end in its verdict '" + want + "' of bench.json");
            }
    }
    for (const auto &r : member(b, {"rows"})) {
        // The verdict follows from the ratio, its spread, the target and the baseline
        // (which can only turn an ok or noisy row into a noisy or below-baseline one).
        const std::string v = r.value("verdict", "");
        const std::string expect = bench_row_verdict(r);
        const bool by_baseline = r.contains("baseline") && (expect == "ok" || expect == "noisy") &&
                                 (v == "noisy" || v == "below baseline");
        if (v != expect && !by_baseline)
            p.add("bench.json: row '" + r.value("path", "") + "' has verdict '" + v + "', but its ratio, target and peak give '" +
                  expect + "'");
        if (v == "below baseline" && !r.contains("baseline"))
            p.add("bench.json: row '" + r.value("path", "") + "' is below a baseline it does not name");
        if (!member(r, {"ratio"}).is_number()) continue;
        if (!member(r, {"figure"}).is_number() || !member(r, {"peak"}).is_number()) {
            p.add("bench.json: row '" + r.value("path", "") + "' has a ratio but no figure or peak");
            continue;
        }
        const double f = member(r, {"figure"}).get<double>(), pk = member(r, {"peak"}).get<double>(), ratio = member(r, {"ratio"}).get<double>();
        const double want = r.value("higher_is_better", true) ? f / pk : pk / f;
        if (r.value("samples", 0) > 0) {
            // Paired samples: the ratio is the median of the per-pair ratios, which
            // lies within their quartiles (not figure/peak, a ratio of two medians).
            const RatioSpread sp = ratio_spread(r);
            if (!member(r, {"ratio_lo"}).is_number() || !member(r, {"ratio_hi"}).is_number() ||
                member(r, {"ratio_lo"}).get<double>() > ratio || member(r, {"ratio_hi"}).get<double>() < ratio)
                p.add("bench.json: row '" + r.value("path", "") + "' has ratio " + std::to_string(ratio) + " of " +
                      std::to_string(sp.samples) + " pairs outside its quartiles");
            // With its pairs: the ratio, the spread and the count are theirs (a row edited by hand is not).
            if (member(r, {"pairs"}).is_array()) {
                json again = r;
                set_pairs(r["pairs"].get<std::vector<double>>(), &again);
                for (const char *k : {"ratio", "median_lo", "median_hi", "samples"})
                    if (!again[k].is_number() || !member(r, {k}).is_number() ||
                        std::fabs(again[k].get<double>() - member(r, {k}).get<double>()) > 1e-9)
                        p.add("bench.json: row '" + r.value("path", "") + "' has " + k + " " +
                              (member(r, {k}).is_number() ? std::to_string(member(r, {k}).get<double>()) : "none") +
                              ", but its pairs give " + std::to_string(again[k].get<double>()));
            }
            continue;
        }
        if (!(std::fabs(ratio - want) <= 1e-6 * std::max(1.0, std::fabs(want))))
            p.add("bench.json: row '" + r.value("path", "") + "' has ratio " + std::to_string(ratio) +
                  ", but its figure and peak give " + std::to_string(want));
    }
}

// --jobs, --shard, merge, --rerun-failed, --repeat: what results.json says of
// them agrees with itself (and with the parent, where it is on this machine).
void check_fleet(const std::string &dir, const json &results, const json &env, Problems &p) {
    const int repeat = results.value("repeat", 1);
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", ""), v = r.value("verdict", "");
        if (!r.contains("runs")) continue;  // (a package of an xmc before --repeat)
        const int runs = r.value("runs", -1), failed = r.value("failed_runs", -1);
        const double rate = r.value("flake_rate", -1.0);
        if (runs < 0 || failed < 0 || failed > runs)
            p.add(id + ": " + std::to_string(failed) + " failed runs of " + std::to_string(runs) + " is not a count of runs");
        else if (std::fabs(rate - (runs ? static_cast<double>(failed) / runs : 0.0)) > 1e-9)
            p.add(id + ": flake rate " + std::to_string(rate) + " is not its failed runs / runs (" + std::to_string(failed) +
                  "/" + std::to_string(runs) + ")");
        if (failed > 0 && v != "failed" && v != "waived")
            p.add(id + " failed " + std::to_string(failed) + " of its runs but is '" + v + "': any failing run fails it");
        if (v == "passed" && runs == 0) p.add(id + " is 'passed' but its tests ran 0 times");
        if (!r.value("taken_over", false) && !member(r, {"tests"}).empty() && runs != repeat && !results.contains("shards"))
            p.add(id + " ran " + std::to_string(runs) + " times, but the package was made with --repeat " + std::to_string(repeat));
    }
    // A shard: its share of the selection, exactly.
    std::vector<std::string> selection;  // the catalogue rows of the package's filter and tier
    for (const auto &row : catalogue())
        if (row.selected_by(results.value("filter", ""), results.value("tier", ""))) selection.push_back(row.id);
    std::set<std::string> have;
    for (const auto &r : member(results, {"requirements"})) have.insert(r.value("id", ""));
    if (member(results, {"shard"}).is_object()) {
        const int i = member(results, {"shard"}).value("index", 0), n = member(results, {"shard"}).value("count", 0);
        if (n < 1 || i < 1 || i > n) p.add("results.json: shard " + std::to_string(i) + "/" + std::to_string(n) + " is not a share I/N");
        else
            for (size_t k = 0; k < selection.size(); ++k)
                if ((static_cast<int>(k % n) == i - 1) != (have.count(selection[k]) > 0))
                    p.add("results.json: shard " + std::to_string(i) + "/" + std::to_string(n) + (have.count(selection[k]) ? " holds " : " lacks ") +
                          selection[k] + ", which is " + (have.count(selection[k]) ? "not " : "") + "in its share");
    }
    // A merge: its shards of one backend, suite and environment, each
    // selected row in exactly one of them, and every row there.
    if (results.contains("shards")) {
        const json &shards = member(results, {"shards"});
        std::map<std::string, int> in;
        std::set<int> indices;
        int count = -1;
        const std::string backend = member(results, {"backend"}).dump(), suite = member(results, {"suite"}).dump(), devices = device_identity(env).dump();
        for (const auto &s : shards) {
            const std::string name = "shard " + std::to_string(s.value("index", 0)) + "/" + std::to_string(s.value("count", 0));
            if (count >= 0 && s.value("count", 0) != count) p.add("results.json: the merged shards are not all of one N (" + name + ")");
            count = s.value("count", 0);
            if (!indices.insert(s.value("index", 0)).second) p.add("results.json: " + name + " is merged twice");
            if (member(s, {"backend"}).dump() != backend) p.add("results.json: merged " + name + " is of backend " + member(s, {"backend"}).dump() + ", the package of " + backend);
            if (member(s, {"suite"}).dump() != suite) p.add("results.json: merged " + name + " was made by suite " + member(s, {"suite"}).dump() + ", the package by " + suite);
            if (member(s, {"devices"}).dump() != devices) p.add("results.json: merged " + name + " ran on devices " + member(s, {"devices"}).dump() + ", the package's environment has " + devices);
            if (s.value("results_sha256", "").size() != 64) p.add("results.json: merged " + name + " has no results digest");
            for (const auto &id : s.value("requirements", json::array())) {
                if (in[id.get<std::string>()]++) p.add("results.json: the merged shards overlap: " + id.get<std::string>() + " is in two");
                if (!have.count(id.get<std::string>())) p.add("results.json: merged " + name + " names " + id.get<std::string>() + ", which has no result");
            }
        }
        for (const auto &id : have)
            if (!in.count(id)) p.add("results.json: " + id + " is in no merged shard");
        for (const auto &id : selection)
            if (!have.count(id)) p.add("results.json: the merged shards leave a gap: " + id + " has no result");
    }
    // A rerun: its parent, and which requirements ran again.
    if (results.contains("parent")) {
        const json &parent = member(results, {"parent"});
        std::set<std::string> rerun, kept;
        for (const auto &id : parent.value("rerun", json::array())) rerun.insert(id.get<std::string>());
        for (const auto &id : parent.value("taken_over", json::array())) kept.insert(id.get<std::string>());
        for (const auto &r : member(results, {"requirements"})) {
            const std::string id = r.value("id", "");
            if (r.value("taken_over", false) != (kept.count(id) > 0) || r.value("rerun", false) != (rerun.count(id) > 0))
                p.add(id + " is marked " + (r.value("taken_over", false) ? "taken over" : r.value("rerun", false) ? "rerun" : "neither taken over nor rerun") +
                      ", but results.json's parent lists it " + (kept.count(id) ? "taken over" : rerun.count(id) ? "rerun" : "nowhere"));
        }
        if (parent.value("results_sha256", "").size() != 64) p.add("results.json: the parent's results digest is missing");
        const std::string path = parent.value("path", "");
        json pr;
        std::string err;
        if (!read_package_results(path, &pr, &err)) {
            std::printf("xmc verify: note: the parent package %s is not on this machine; its digest is not checked\n", path.c_str());
        } else if (sha256_file(path + "/results.json") != parent.value("results_sha256", "")) {
            p.add("the parent package " + path + " is not the one this rerun names: its results.json's digest differs");
        } else {
            for (const auto &r : member(pr, {"requirements"})) {
                const std::string id = r.value("id", "");
                if ((r.value("verdict", "") == "failed") != (rerun.count(id) > 0))
                    p.add(id + " was '" + r.value("verdict", "") + "' in the parent, so it should " +
                          (r.value("verdict", "") == "failed" ? "" : "not ") + "have been rerun");
            }
        }
    }
    (void)dir;
}

void check_report(const std::string &dir, const std::string &summary_txt, Problems &p) {
    const std::string line = summary_txt.substr(0, summary_txt.find('\n'));
    for (const char *f : {"report.html", "report.md"}) {
        std::string text;
        if (!read_text(dir + "/" + f, &text)) continue;  // reported as a missing file
        if (line.empty() || text.find(line) == std::string::npos)
            p.add(std::string(f) + " does not show the summary line of summary.txt (a stale or edited report)");
    }
    std::string md;
    if (!read_text(dir + "/report.md", &md)) return;
    for (const auto &plot : plots_named_in(md)) {
        std::string svg;
        if (!read_text(dir + "/" + plot, &svg)) p.add("the report names " + plot + ", which is missing");
        else if (svg.rfind("<svg", 0) != 0 || svg.find("</svg>") == std::string::npos)
            p.add(plot + " is not an SVG document");
    }
}

// Must-pass requirements that did not pass: failed, or unsupported for a
// reason other than a declared skip (no device, no driver).
void check_qualified(const json &results, const MustPass &mp, Problems &p) {
    for (const auto &r : member(results, {"requirements"})) {
        const std::string id = r.value("id", ""), v = r.value("verdict", "");
        if (!mp.contains(id)) continue;
        if (v == "failed") p.add("must-pass requirement " + id + " failed: " + r.value("reason", ""));
        if (v == "unsupported" && member(r, {"tests"}).empty())
            p.add("must-pass requirement " + id + " was not run: " + r.value("reason", ""));
    }
}

} // namespace

int verify(const std::string &dir, bool require_qualified) {
    if (!std::filesystem::is_directory(dir)) {
        std::fprintf(stderr, "xmc verify: %s is not a folder (give the --out folder of xmc qualify)\n", dir.c_str());
        return 2;
    }
    Problems p;
    // files: every file present, JSON parses.
    for (const char *f : kPackageFiles)
        if (access((dir + "/" + f).c_str(), R_OK) != 0) p.add(std::string("missing file: ") + f);
    if (!std::filesystem::is_directory(dir + "/logs")) p.add("missing folder: logs/");
    auto load = [&](const char *f, json *out) {
        std::string text;
        if (!read_text(dir + "/" + f, &text)) return false;
        *out = json::parse(text, nullptr, false);
        if (out->is_discarded() || !out->is_object()) {
            p.add(std::string(f) + " is not a valid JSON object");
            return false;
        }
        return true;
    };
    json results, caps, env;
    const bool have_results = load("results.json", &results);
    const bool have_caps = load("capabilities.json", &caps);
    const bool have_env = load("environment.json", &env);
    if (!have_results || !results.contains("requirements") || !member(results, {"requirements"}).is_array() ||
        !results.contains("backend") || !results.contains("summary")) {
        if (have_results) p.add("results.json lacks 'requirements', 'backend' or 'summary'");
        std::printf("xmc verify: %s: %zu problem(s); results.json is needed for the other checks\n", dir.c_str(),
                    p.list.size());
        return 1;
    }
    // A member of another type than the checks read (value() of a non-object, a string where a number
    // belongs) throws: the package is malformed, said as a problem like any other, never an abort.
    std::string made_by;
    MustPass mp;
    try {
        // suite: format and version.
        if (results.value("format", "") != kPackageFormat)
            p.add("results.json: format '" + results.value("format", "") + "' is not " + kPackageFormat);
        made_by = results.contains("suite") ? member(results, {"suite"}).value("version", "") : "";
        if (made_by != suite_version())
            p.add("the package was made by suite " + made_by + "; this xmc is suite " + suite_version() +
                  ": verify it with the xmc that made it");

        std::string summary_txt, mustpass_txt, waivers_txt, junit;
        read_text(dir + "/summary.txt", &summary_txt);
        check_summary(results, summary_txt, p);

        std::string err;
        const bool have_mp = read_text(dir + "/mustpass.txt", &mustpass_txt);
        if (have_mp && !parse_mustpass(mustpass_txt, &mp, &err)) p.add(err);
        check_verdicts(dir, results, mp, p);
        if (have_mp && have_caps) check_mustpass(results, caps, mp, p);

        const std::vector<DeviceFacts> devices = have_env ? devices_of(env) : std::vector<DeviceFacts>{};
        std::vector<Waiver> waivers;
        if (read_text(dir + "/waivers.tsv", &waivers_txt)) {
            if (!parse_waivers(waivers_txt, "waivers.tsv", &waivers, &err)) p.add(err);
            else if (have_mp) check_waivers(results, waivers, mp, devices, p);
        }
        if (have_caps && have_env) check_capabilities(results, caps, env, p);
        if (read_text(dir + "/junit.xml", &junit)) check_junit(results, junit, p);
        if (have_env) check_environment(results, env, p);
        if (have_env) check_fleet(dir, results, env, p);
        check_bench(dir, results, p);
        check_report(dir, summary_txt, p);
        if (require_qualified && have_mp) check_qualified(results, mp, p);
    } catch (const json::exception &e) {
        p.add(std::string("a member of the package's JSON has the wrong type: ") + e.what());
    }

    if (!p.list.empty()) {
        std::printf("xmc verify: %s: %zu problem(s)\n", dir.c_str(), p.list.size());
        return 1;
    }
    int must_failed = 0;  // (no problem: every requirement is an object, every verdict a string)
    for (const auto &r : member(results, {"requirements"}))
        must_failed += mp.contains(r.value("id", "")) && r.value("verdict", "") == "failed";
    std::printf("xmc verify: %s: complete and consistent (backend %s %s, suite %s, %zu requirements, %zu must-pass)\n",
                dir.c_str(), member(results, {"backend"}).value("name", "").c_str(), member(results, {"backend"}).value("version", "").c_str(),
                made_by.c_str(), member(results, {"requirements"}).size(), mp.ids.size());
    std::printf("xmc verify: %s\n", must_failed ? (std::to_string(must_failed) + " must-pass requirement(s) failed: the "
                                                   "backend does not qualify (see report.html)").c_str()
                                                : "every must-pass requirement passed, was waived or is unsupported for a declared reason");
    return 0;
}

} // namespace xmc::conformance
