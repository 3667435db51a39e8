#include "qualify.hpp"

#include "bench.hpp"
#include "catalogue.hpp"
#include "loader.hpp"
#include "package.hpp"
#include "report.hpp"
#include "sanitize.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace xmc::conformance {
namespace {

SanitizedRun g_sanitized;  // --sanitize thread: what the children exec and load (empty: this runner, o.backend)

struct TestOutcome {
    std::string name;
    std::string status;  // passed | failed | skipped | crashed | timeout
    std::string message;
    double ms = 0;
    std::string skip_kind;    // a declared skip: "unsupported" or "no_device" (fixture.hpp)
    std::string skip_reason;
};

struct Verdict {
    const Requirement *req = nullptr;
    std::string verdict;  // passed | failed | unsupported | waived
    std::string reason;
    std::vector<TestOutcome> tests;
    double seconds = 0;
    bool mustpass = false;
    std::string reproduce;      // the command that reruns the failed tests
    const Waiver *waiver = nullptr;  // the waiver that applied, if any
};

// Full names ("Suite.Test") of the registered tests that belong to `r`.
std::vector<std::string> tests_of(const Requirement &r) {
    std::vector<std::string> names;
    const auto *ut = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < ut->total_test_suite_count(); ++i) {
        const auto *suite = ut->GetTestSuite(i);
        for (int j = 0; j < suite->total_test_count(); ++j) {
            const auto *t = suite->GetTestInfo(j);
            if (requirement_of_test(t->name()) == &r)
                names.push_back(std::string(suite->name()) + "." + t->name());
        }
    }
    return names;
}

// Runs `tests` in one child `xmc run` with a time limit; each line of its
// results file is one event. Returns the finished tests, and in *running the
// test that was running when the child died or timed out ("" if none).
std::map<std::string, TestOutcome> run_once(const QualifyOptions &o, const std::vector<std::string> &tests,
                                            const std::string &log_path, const std::string &results_path,
                                            std::string *running, std::string *child_note, bool *timed_out) {
    std::string filter;
    for (const auto &t : tests) filter += (filter.empty() ? "" : ":") + t;
    const bool tsan = !g_sanitized.runner.empty();
    std::vector<std::string> args = {"xmc", "run", "--backend", tsan ? g_sanitized.backend : o.backend,
                                     "--xmc-results", results_path, "--gtest_filter=" + filter};
    const std::string tsan_env = tsan_options();
    std::remove(results_path.c_str());
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        setpgid(0, 0);  // its own group: a timeout kills the backend's helpers too
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (tsan) setenv("TSAN_OPTIONS", tsan_env.c_str(), 1);
        execv(tsan ? g_sanitized.runner.c_str() : "/proc/self/exe", argv.data());
        _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    int status = 0;
    *timed_out = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            *timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    child_note->clear();
    if (*timed_out) *child_note = "timed out after " + std::to_string(o.timeout_s) + " s";
    else if (WIFSIGNALED(status)) *child_note = std::string("died by signal ") + strsignal(WTERMSIG(status));

    std::map<std::string, TestOutcome> done;
    running->clear();
    std::ifstream in(results_path);
    for (std::string line; std::getline(in, line);) {
        json ev = json::parse(line, nullptr, false);
        if (ev.is_discarded()) continue;
        if (ev["event"] == "start") *running = ev["name"];
        else {
            TestOutcome t{ev["name"], ev["status"], ev["message"], ev["ms"].get<double>(),
                          ev.value("skip_kind", ""), ev.value("skip_reason", "")};
            done[t.name] = t;
            running->clear();
        }
    }
    return done;
}

// Runs a requirement's tests; a test that crashes or hangs is reported so and
// the rest run on in a fresh child, so one bad entry point costs one test.
std::vector<TestOutcome> run_tests(const QualifyOptions &o, const std::vector<std::string> &tests,
                                   const std::string &log_path, const std::string &results_path,
                                   std::string *notes) {
    std::remove(log_path.c_str());
    std::map<std::string, TestOutcome> all;
    std::vector<std::string> left = tests;
    while (!left.empty()) {
        std::string running, note;
        bool timed_out = false;
        auto done = run_once(o, left, log_path, results_path, &running, &note, &timed_out);
        for (auto &[name, t] : done) all[name] = t;
        if (!note.empty()) *notes += (notes->empty() ? "" : "; ") + note;
        if (!running.empty()) {
            all[running] = TestOutcome{running, timed_out ? "timeout" : "crashed",
                                       "the test process " + (note.empty() ? std::string("exited") : note) +
                                           " while this test ran (log: " + log_path + ")", 0};
        }
        std::vector<std::string> rest;
        for (const auto &t : left)
            if (!all.count(t)) rest.push_back(t);
        if (running.empty() && !rest.empty()) {
            // The child ended between tests without running the rest: no
            // progress can be made, so they fail as not run.
            for (const auto &t : rest)
                all[t] = TestOutcome{t, "failed", "not run: the test process ended before it (" +
                                                      (note.empty() ? std::string("exit") : note) + ")", 0};
            rest.clear();
        }
        left = rest;
    }
    std::vector<TestOutcome> out;
    for (const auto &t : tests) out.push_back(all[t]);
    return out;
}

// A testcase's outcome element: <failure message type>text</failure> for a
// failing status, <skipped message/> for a skip, nothing for a pass.
void junit_outcome(pugi::xml_node tc, const std::string &status, const std::string &message) {
    if (status == "passed") return;
    const std::string text = junit_text(message);
    if (status == "skipped") {
        tc.append_child("skipped").append_attribute("message") = text.c_str();
        return;
    }
    pugi::xml_node f = tc.append_child("failure");
    f.append_attribute("message") = text.c_str();
    f.append_attribute("type") = status.c_str();
    f.text() = text.c_str();
}

// junit.xml, written by pugixml: it escapes what XML needs, a newline in an
// attribute as &#10; (written raw, a parser reads it back as a space). One
// testsuite per requirement, one testcase per test (one named after the
// requirement when it ran none); verify reads it back the same way.
std::string junit_xml(const std::vector<Verdict> &verdicts, int failed) {
    pugi::xml_document doc;
    pugi::xml_node decl = doc.append_child(pugi::node_declaration);
    decl.append_attribute("version") = "1.0";
    decl.append_attribute("encoding") = "UTF-8";
    pugi::xml_node root = doc.append_child("testsuites");
    root.append_attribute("name") = "xmc";
    root.append_attribute("tests") = static_cast<unsigned long long>(verdicts.size());
    root.append_attribute("failures") = failed;
    for (const auto &v : verdicts) {
        pugi::xml_node suite = root.append_child("testsuite");
        suite.append_attribute("name") = v.req->id.c_str();
        suite.append_attribute("tests") = static_cast<unsigned long long>(std::max<size_t>(1, v.tests.size()));
        if (v.tests.empty()) {
            pugi::xml_node tc = suite.append_child("testcase");
            tc.append_attribute("classname") = v.req->id.c_str();
            tc.append_attribute("name") = v.req->id.c_str();
            junit_outcome(tc, v.verdict == "passed" ? "passed" : v.verdict == "failed" ? "failed" : "skipped", v.reason);
        }
        for (const auto &t : v.tests) {
            pugi::xml_node tc = suite.append_child("testcase");
            tc.append_attribute("classname") = v.req->id.c_str();
            tc.append_attribute("name") = t.name.c_str();
            char seconds[32];
            std::snprintf(seconds, sizeof seconds, "%.3f", t.ms / 1000.0);
            tc.append_attribute("time") = seconds;
            junit_outcome(tc, t.status, t.message);
        }
    }
    std::ostringstream out;
    doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
    return out.str();
}

// The package's files besides the report (SPEC 9; docs/qualify.md).
bool write_package(const QualifyOptions &o, const LoadedBackend &b, const std::vector<Verdict> &verdicts,
                   std::map<std::string, int> &count, const std::string &summary, const MustPass &mustpass,
                   const std::string &waivers_text, const json &environment, const json *bench, std::string *err) {
    json j;
    j["format"] = kPackageFormat;
    j["suite"] = {{"version", suite_version()}, {"git_revision", git_revision()}};
    j["backend"] = {{"name", b.api->name}, {"version", b.api->version}, {"path", b.path},
                    {"capabilities", caps_to_string(b.api->capabilities)}};
    j["filter"] = o.filter;
    j["tier"] = o.tier;
    j["timeout_s"] = o.timeout_s;
    j["waivers_source"] = o.waivers;
    j["mustpass"] = {{"suite", mustpass.suite}, {"lists", mustpass.lists}};
    j["bench"] = bench != nullptr;
    j["summary"] = {{"tests", verdicts.size()}, {"passed", count["passed"]}, {"failed", count["failed"]},
                    {"unsupported", count["unsupported"]}, {"waived", count["waived"]}};
    j["requirements"] = json::array();
    for (const auto &v : verdicts) {
        json r = {{"id", v.req->id}, {"capability", v.req->capability}, {"verdict", v.verdict},
                  {"reason", v.reason}, {"seconds", v.seconds}, {"mustpass", v.mustpass},
                  {"reproduce", v.reproduce}, {"tests", json::array()}};
        if (v.waiver)
            r["waiver"] = {{"reason", v.waiver->reason}, {"link", v.waiver->link}, {"device", v.waiver->device},
                           {"line", v.waiver->line}};
        for (const auto &t : v.tests)
            r["tests"].push_back({{"name", t.name}, {"status", t.status}, {"ms", t.ms}, {"message", t.message}});
        j["requirements"].push_back(r);
    }

    json caps = {{"backend", b.api->name}, {"version", b.api->version}, {"path", b.path},
                 {"abi_version", b.api->abi_version}, {"mask", b.api->capabilities}, {"capabilities", json::array()}};
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (b.api->capabilities & (1ull << i)) caps["capabilities"].push_back(xmc_cap_string(1ull << i));

    const std::string &d = o.out_dir;
    return write_text(d + "/results.json", j.dump(2) + "\n", err) &&
           write_text(d + "/junit.xml", junit_xml(verdicts, count["failed"]), err) &&
           write_text(d + "/summary.txt", summary + "\n", err) &&
           write_text(d + "/mustpass.txt", mustpass_text(mustpass), err) &&
           write_text(d + "/waivers.tsv", waivers_text, err) &&
           write_text(d + "/capabilities.json", caps.dump(2) + "\n", err) &&
           write_text(d + "/environment.json", environment.dump(2) + "\n", err) &&
           (!bench || write_text(d + "/bench.json", bench->dump(2) + "\n", err));
}

} // namespace

int qualify(const QualifyOptions &o) {
    std::string err;
    const LoadedBackend *b = load_backend(o.backend, &err);
    if (!b) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }
    if (o.sanitize == "thread") {
        if (!sanitized_run(o.backend, &g_sanitized, &err)) {
            std::fprintf(stderr, "xmc qualify: --sanitize thread: %s\n", err.c_str());
            return 2;
        }
        std::printf("xmc qualify: under ThreadSanitizer: %s run --backend %s\n", g_sanitized.runner.c_str(),
                    g_sanitized.backend.c_str());
    }
    // The waiver file (copied into the package as waivers.tsv).
    std::vector<Waiver> waivers;
    std::string waivers_text = "# xmc waivers: ID<TAB>backend<TAB>device<TAB>reason<TAB>link (none given)\n";
    if (!o.waivers.empty()) {
        if (!read_text(o.waivers, &waivers_text)) {
            std::fprintf(stderr, "xmc qualify: cannot read waiver file %s\n", o.waivers.c_str());
            return 2;
        }
        if (!parse_waivers(waivers_text, o.waivers, &waivers, &err)) {
            std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
            return 2;
        }
    }
    // The must-pass list: `model`, `always` and one per declared capability, of
    // the suite version asked for (--mustpass; this suite's by default).
    MustPass mustpass;
    if (!mustpass_for(o.mustpass.empty() ? suite_version() : o.mustpass, b->api->capabilities, &mustpass, &err)) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }
    const std::string logs = o.out_dir + "/logs";
    std::error_code ec;
    std::filesystem::create_directories(logs, ec);
    if (ec) {
        std::fprintf(stderr, "xmc qualify: cannot create %s: %s\n", logs.c_str(), ec.message().c_str());
        return 2;
    }
    // Files of an earlier run in the same folder that this run may not rewrite.
    std::filesystem::remove(o.out_dir + "/bench.json", ec);
    std::filesystem::remove_all(o.out_dir + "/plots", ec);
    std::printf("xmc qualify: backend %s %s (%s), capabilities: %s\n", b->api->name, b->api->version,
                b->path.c_str(), caps_to_string(b->api->capabilities).c_str());

    // The environment statement; the devices it names select device waivers.
    const json environment = collect_environment(*b, std::min(o.timeout_s, 60));
    const std::vector<DeviceFacts> devices = devices_of(environment);
    {
        std::string names;
        for (const auto &dv : devices) names += (names.empty() ? "" : ", ") + dv.name + " (" + dv.uuid + ")";
        std::printf("xmc qualify: %zu device(s)%s%s; must-pass lists %s/", devices.size(), names.empty() ? "" : ": ",
                    names.c_str(), mustpass.suite.c_str());
        for (size_t i = 0; i < mustpass.lists.size(); ++i) std::printf("%s%s", i ? "," : "", mustpass.lists[i].c_str());
        std::printf(" (%zu requirements)\n", mustpass.ids.size());
    }
    // A waiver may only name a requirement that must pass for this backend.
    for (const auto &w : waivers) {
        if (!waiver_applies(w, b->api->name, devices) || mustpass.contains(w.id)) continue;
        std::string lists;
        for (const auto &l : mustpass.lists) lists += (lists.empty() ? "" : ", ") + l;
        std::fprintf(stderr, "xmc qualify: %s:%d: waiver for %s, which is not in the must-pass list of backend %s "
                             "(lists %s): only a must-pass requirement can be waived\n",
                     o.waivers.c_str(), w.line, w.id.c_str(), b->api->name, lists.c_str());
        return 2;
    }

    // The variables that chose the driver, so that a reproducer runs on the same one.
    std::string driver_env;
    for (const auto &[k, val] : driver_variables()) driver_env += k + "=" + val + " ";

    std::vector<Verdict> verdicts;
    std::vector<const Requirement *> selected;
    for (const auto &r : catalogue())
        if ((o.filter.empty() || fnmatch(o.filter.c_str(), r.id.c_str(), 0) == 0) && (o.tier.empty() || r.in_tier(o.tier)))
            selected.push_back(&r);
    if (selected.empty()) {
        std::string what = o.filter.empty() ? "" : "the filter '" + o.filter + "'";
        if (!o.tier.empty()) what += (what.empty() ? "tier " : " in tier ") + o.tier;
        std::fprintf(stderr, "xmc qualify: %s selects no requirement\n", what.c_str());
        return 2;
    }
    size_t k = 0;
    for (const Requirement *r : selected) {
        Verdict v;
        v.req = r;
        v.mustpass = mustpass.contains(r->id);
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<std::string> tests = tests_of(*r);
        if (const std::string cap = r->missing_capability(b->api->capabilities); !cap.empty()) {
            v.verdict = "unsupported";
            v.reason = "capability '" + cap + "' not declared";
        } else if (!r->in_tier("pr")) {
            // A benchmark's requirement (REG-SPEED, ...): its tier's benchmarks measure it.
            const std::string &tier = !o.tier.empty() && r->in_tier(o.tier) ? o.tier : r->tiers.front();
            v.verdict = "unsupported";
            v.reason = "measured by the hardware tier (" + tier + "): ctest -L " + tier;
        } else if (tests.empty()) {
            v.verdict = "failed";
            v.reason = "no test is registered for this requirement, whose capability the backend declares";
        } else {
            std::string note;
            const std::string log = logs + "/" + r->id + ".log";
            v.tests = run_tests(o, tests, log, logs + "/" + r->id + ".jsonl", &note);
            int failed = 0, passed = 0, unsupported = 0;
            // A ThreadSanitizer report fails the requirement even when every check passed.
            std::string race;
            const bool raced = !g_sanitized.runner.empty() && tsan_reported(log, &race);
            for (auto &t : v.tests) {
                if (t.status == "passed") ++passed;
                else if (t.status == "skipped") {
                    // A skip must declare why (XMC_SKIP): a missing capability, feature or device.
                    if ((t.skip_kind == "unsupported" || t.skip_kind == "no_device") && !t.skip_reason.empty()) ++unsupported;
                    else { t.status = "failed"; t.message = "skipped without a declared reason: " + t.message; ++failed; }
                } else ++failed;
            }
            if (raced) {
                v.verdict = "failed";
                v.reason = "ThreadSanitizer reported a data race (" + race + "; the report is in " + log + "), " +
                           std::to_string(failed) + " of " + std::to_string(v.tests.size()) + " tests failed" +
                           (note.empty() ? "" : " (" + note + ")");
            } else if (failed) {
                v.verdict = "failed";
                v.reason = std::to_string(failed) + " of " + std::to_string(v.tests.size()) + " tests failed" +
                           (note.empty() ? "" : " (" + note + ")");
            } else if (passed == 0) {
                v.verdict = "unsupported";
                for (auto &t : v.tests)
                    if (t.status == "skipped") { v.reason = t.skip_kind + ": " + t.skip_reason; break; }
            } else {
                v.verdict = "passed";
                v.reason = std::to_string(passed) + " tests" +
                           (unsupported ? ", " + std::to_string(unsupported) + " unsupported" : "");
            }
        }
        for (const auto &w : waivers) {
            if (w.id != r->id || !waiver_applies(w, b->api->name, devices)) continue;
            v.waiver = &w;
            if (v.verdict == "failed") { v.verdict = "waived"; v.reason = "waived: " + w.reason + " (" + v.reason + ")"; }
            else if (v.verdict == "passed") { v.verdict = "failed"; v.reason = "unexpected pass of a waived requirement"; }
        }
        // The command that reruns exactly the tests that did not pass.
        std::string filter;
        for (const auto &t : v.tests)
            if (t.status != "passed" && t.status != "skipped") filter += (filter.empty() ? "" : ":") + t.name;
        if (!filter.empty()) v.reproduce = driver_env + "xmc run --backend " + o.backend + " --gtest_filter='" + filter + "'";
        v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[%2zu/%zu] %-24s %-11s %s (%.2f s)\n", ++k, selected.size(), r->id.c_str(),
                    v.verdict.c_str(), v.reason.c_str(), v.seconds);
        std::fflush(stdout);
        verdicts.push_back(v);
    }

    std::map<std::string, int> count;
    for (const auto &v : verdicts) count[v.verdict]++;
    const std::string summary = summary_line(static_cast<int>(verdicts.size()), count["passed"], count["failed"],
                                             count["unsupported"], count["waived"]);
    std::printf("%s\n", summary.c_str());

    // Each failure's reproducer.
    for (const auto &v : verdicts) {
        if (v.verdict != "failed") continue;
        std::printf("\nFAILED %s: %s\n", v.req->id.c_str(), v.reason.c_str());
        for (const auto &t : v.tests) {
            if (t.status == "passed" || t.status == "skipped") continue;
            std::printf("  %s [%s]\n    %s\n", t.name.c_str(), t.status.c_str(),
                        t.message.substr(0, 2000).c_str());
        }
        if (!v.reproduce.empty()) std::printf("  reproduce: %s\n", v.reproduce.c_str());
    }

    // Benchmarks against the platform's peak, when asked for.
    json bench;
    bool bench_failed = false;
    if (o.bench) {
        std::printf("\nxmc qualify: benchmarks\n");
        BenchOptions bo;
        bo.backend = o.backend;
        bo.sizes = o.bench_sizes;
        bo.log_dir = logs;
        bench = run_benchmarks(bo);
        if (!bench["rows"].empty()) std::printf("\n%s", bench_table(bench).c_str());
        if (bench.contains("skipped")) std::printf("xmc qualify: benchmarks skipped: %s\n", bench["skipped"].get<std::string>().c_str());
        if (bench.contains("error")) {
            std::printf("xmc qualify: benchmarks FAILED: %s\n", bench["error"].get<std::string>().c_str());
            bench_failed = true;
        }
    }

    // The package: results.json, junit.xml, summary.txt, mustpass.txt,
    // waivers.tsv, capabilities.json, environment.json, bench.json, report.
    if (!write_package(o, *b, verdicts, count, summary, mustpass, waivers_text, environment, o.bench ? &bench : nullptr,
                       &err) ||
        !write_report(o.out_dir, &err)) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }
    std::printf("xmc qualify: results in %s (results.json, junit.xml, summary.txt, logs/)\n", o.out_dir.c_str());
    std::printf("xmc qualify: report in %s/report.html; check the package with: xmc verify %s\n", o.out_dir.c_str(),
                o.out_dir.c_str());

    if (!o.expect_fail.empty()) {
        // Self-test: the suite must fail exactly the requirements the planted
        // bug breaks, not merely everything.
        std::set<std::string> want, got;
        std::stringstream ss(o.expect_fail);
        for (std::string id; std::getline(ss, id, ',');) want.insert(id);
        for (const auto &v : verdicts)
            if (v.verdict == "failed") got.insert(v.req->id);
        if (want == got) {
            std::printf("xmc selftest: caught: the suite failed exactly %s\n", o.expect_fail.c_str());
            return 0;
        }
        for (const auto &id : want)
            if (!got.count(id)) std::printf("xmc selftest: NOT CAUGHT: %s passed on a backend that breaks it\n", id.c_str());
        for (const auto &id : got)
            if (!want.count(id)) std::printf("xmc selftest: UNEXPECTED: %s failed, but the planted bug is not there\n", id.c_str());
        return 1;
    }
    return count["failed"] || bench_failed ? 1 : 0;
}

} // namespace xmc::conformance
