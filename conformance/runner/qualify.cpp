#include "qualify.hpp"

#include "catalogue.hpp"
#include "loader.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace xmc::conformance {
namespace {

using json = nlohmann::json;

struct TestOutcome {
    std::string name;
    std::string status;  // passed | failed | skipped | crashed | timeout
    std::string message;
    double ms = 0;
};

struct Verdict {
    const Requirement *req = nullptr;
    std::string verdict;  // passed | failed | unsupported | waived
    std::string reason;
    std::vector<TestOutcome> tests;
    double seconds = 0;
};

std::string xml_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        switch (c) {
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '&': o += "&amp;"; break;
        case '"': o += "&quot;"; break;
        default: o += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
        }
    }
    return o;
}

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

// Runs `tests` in a child `xmc run`; each line of its results file is one
// event. Tests that never ended are reported crashed or timed out.
std::vector<TestOutcome> run_child(const QualifyOptions &o, const std::vector<std::string> &tests,
                                   const std::string &log_path, const std::string &results_path,
                                   std::string *child_note) {
    std::string filter;
    for (const auto &t : tests) filter += (filter.empty() ? "" : ":") + t;
    std::vector<std::string> args = {"xmc", "run", "--backend", o.backend, "--xmc-results", results_path,
                                     "--gtest_filter=" + filter};
    std::remove(results_path.c_str());
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        setpgid(0, 0);  // its own group: a timeout kills the backend's helpers too
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    int status = 0;
    bool timed_out = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (timed_out) *child_note = "timed out after " + std::to_string(o.timeout_s) + " s";
    else if (WIFSIGNALED(status)) *child_note = std::string("died by signal ") + strsignal(WTERMSIG(status));

    std::map<std::string, TestOutcome> done;
    std::string running;
    std::ifstream in(results_path);
    for (std::string line; std::getline(in, line);) {
        json ev = json::parse(line, nullptr, false);
        if (ev.is_discarded()) continue;
        if (ev["event"] == "start") running = ev["name"];
        else {
            TestOutcome t{ev["name"], ev["status"], ev["message"], ev["ms"].get<double>()};
            done[t.name] = t;
            running.clear();
        }
    }
    std::vector<TestOutcome> out;
    for (const auto &name : tests) {
        if (done.count(name)) { out.push_back(done[name]); continue; }
        TestOutcome t{name, "", "", 0};
        if (name == running) {
            t.status = timed_out ? "timeout" : "crashed";
            t.message = "the test " + (child_note->empty() ? std::string("process exited") : *child_note) +
                        " while this test ran (log: " + log_path + ")";
        } else {
            t.status = "failed";
            t.message = "not run: the process ended before it (" +
                        (child_note->empty() ? std::string("exit") : *child_note) + ")";
        }
        out.push_back(t);
    }
    return out;
}

struct Waiver {
    std::string id, backend, reason;
};

std::vector<Waiver> read_waivers(const std::string &path, std::string *error) {
    std::vector<Waiver> v;
    if (path.empty()) return v;
    std::ifstream in(path);
    if (!in) { *error = "cannot read waiver file " + path; return v; }
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream f(line);
        Waiver w;
        std::getline(f, w.id, '\t');
        std::getline(f, w.backend, '\t');
        std::getline(f, w.reason, '\t');
        v.push_back(w);
    }
    return v;
}

} // namespace

int qualify(const QualifyOptions &o) {
    std::string err;
    const LoadedBackend *b = load_backend(o.backend, &err);
    if (!b) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }
    const std::vector<Waiver> waivers = read_waivers(o.waivers, &err);
    if (!err.empty()) { std::fprintf(stderr, "xmc qualify: %s\n", err.c_str()); return 2; }
    const std::string logs = o.out_dir + "/logs";
    std::error_code ec;
    std::filesystem::create_directories(logs, ec);
    if (ec) {
        std::fprintf(stderr, "xmc qualify: cannot create %s: %s\n", logs.c_str(), ec.message().c_str());
        return 2;
    }
    std::printf("xmc qualify: backend %s %s (%s), capabilities: %s\n", b->api->name, b->api->version,
                b->path.c_str(), caps_to_string(b->api->capabilities).c_str());

    std::vector<Verdict> verdicts;
    std::vector<const Requirement *> selected;
    for (const auto &r : catalogue())
        if (o.filter.empty() || fnmatch(o.filter.c_str(), r.id.c_str(), 0) == 0) selected.push_back(&r);
    if (selected.empty()) {
        std::fprintf(stderr, "xmc qualify: the filter '%s' selects no requirement\n", o.filter.c_str());
        return 2;
    }
    size_t k = 0;
    for (const Requirement *r : selected) {
        Verdict v;
        v.req = r;
        const auto t0 = std::chrono::steady_clock::now();
        const xmc_caps bit = capability_bit(r->capability);
        const std::vector<std::string> tests = tests_of(*r);
        if (r->capability != "model" && !b->has(bit)) {
            v.verdict = "unsupported";
            v.reason = "capability '" + r->capability + "' not declared";
        } else if (!r->in_tier("pr")) {
            v.verdict = "unsupported";
            v.reason = "measured by the hardware tier (" + r->tiers.front() + "): ctest -L " + r->tiers.front();
        } else if (tests.empty()) {
            v.verdict = "failed";
            v.reason = "no test is registered for this requirement, whose capability the backend declares";
        } else {
            std::string note;
            v.tests = run_child(o, tests, logs + "/" + r->id + ".log", logs + "/" + r->id + ".jsonl", &note);
            int failed = 0, passed = 0, unsupported = 0;
            for (auto &t : v.tests) {
                if (t.status == "passed") ++passed;
                else if (t.status == "skipped") {
                    // A skip must declare why: a missing capability or device.
                    if (t.message.find("unsupported:") != std::string::npos ||
                        t.message.find("no device:") != std::string::npos) ++unsupported;
                    else { t.status = "failed"; t.message = "skipped without a declared reason: " + t.message; ++failed; }
                } else ++failed;
            }
            if (failed) {
                v.verdict = "failed";
                v.reason = std::to_string(failed) + " of " + std::to_string(v.tests.size()) + " tests failed" +
                           (note.empty() ? "" : " (" + note + ")");
            } else if (passed == 0) {
                v.verdict = "unsupported";
                for (auto &t : v.tests)
                    if (t.status == "skipped") { v.reason = t.message.substr(t.message.find(": ") + 2); break; }
            } else {
                v.verdict = "passed";
                v.reason = std::to_string(passed) + " tests" +
                           (unsupported ? ", " + std::to_string(unsupported) + " unsupported" : "");
            }
        }
        for (const auto &w : waivers) {
            if (w.id != r->id || (w.backend != "*" && w.backend != b->api->name)) continue;
            if (v.verdict == "failed") { v.verdict = "waived"; v.reason = "waived: " + w.reason + " (" + v.reason + ")"; }
            else if (v.verdict == "passed") { v.verdict = "failed"; v.reason = "unexpected pass of a waived requirement"; }
        }
        v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[%2zu/%zu] %-24s %-11s %s (%.2f s)\n", ++k, selected.size(), r->id.c_str(),
                    v.verdict.c_str(), v.reason.c_str(), v.seconds);
        std::fflush(stdout);
        verdicts.push_back(v);
    }

    std::map<std::string, int> count;
    for (const auto &v : verdicts) count[v.verdict]++;
    char summary[256];
    std::snprintf(summary, sizeof summary, "xmc: tests:%zu passed:%d failed:%d unsupported:%d waived:%d",
                  verdicts.size(), count["passed"], count["failed"], count["unsupported"], count["waived"]);
    std::printf("%s\n", summary);

    // Each failure's reproducer.
    for (const auto &v : verdicts) {
        if (v.verdict != "failed") continue;
        std::printf("\nFAILED %s: %s\n", v.req->id.c_str(), v.reason.c_str());
        std::string filter;
        for (const auto &t : v.tests) {
            if (t.status == "passed" || t.status == "skipped") continue;
            filter += (filter.empty() ? "" : ":") + t.name;
            std::printf("  %s [%s]\n    %s\n", t.name.c_str(), t.status.c_str(),
                        t.message.substr(0, 2000).c_str());
        }
        if (!filter.empty())
            std::printf("  reproduce: xmc run --backend %s --gtest_filter='%s'\n", o.backend.c_str(), filter.c_str());
    }

    // results.json, junit.xml, summary.txt.
    json j;
    j["backend"] = {{"name", b->api->name}, {"version", b->api->version}, {"path", b->path},
                    {"capabilities", caps_to_string(b->api->capabilities)}};
    j["summary"] = {{"tests", verdicts.size()}, {"passed", count["passed"]}, {"failed", count["failed"]},
                    {"unsupported", count["unsupported"]}, {"waived", count["waived"]}};
    j["requirements"] = json::array();
    std::ostringstream xml;
    xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"xmc\" tests=\"" << verdicts.size()
        << "\" failures=\"" << count["failed"] << "\">\n";
    for (const auto &v : verdicts) {
        json r = {{"id", v.req->id}, {"capability", v.req->capability}, {"verdict", v.verdict},
                  {"reason", v.reason}, {"seconds", v.seconds}, {"tests", json::array()}};
        xml << "  <testsuite name=\"" << v.req->id << "\" tests=\"" << std::max<size_t>(1, v.tests.size()) << "\">\n";
        if (v.tests.empty()) {
            xml << "    <testcase classname=\"" << v.req->id << "\" name=\"" << v.req->id << "\">";
            if (v.verdict == "failed") xml << "<failure message=\"" << xml_escape(v.reason) << "\"/>";
            else if (v.verdict != "passed") xml << "<skipped message=\"" << xml_escape(v.reason) << "\"/>";
            xml << "</testcase>\n";
        }
        for (const auto &t : v.tests) {
            r["tests"].push_back({{"name", t.name}, {"status", t.status}, {"ms", t.ms}, {"message", t.message}});
            xml << "    <testcase classname=\"" << v.req->id << "\" name=\"" << xml_escape(t.name) << "\" time=\""
                << t.ms / 1000.0 << "\">";
            if (t.status == "skipped") xml << "<skipped message=\"" << xml_escape(t.message) << "\"/>";
            else if (t.status != "passed")
                xml << "<failure message=\"" << t.status << "\">" << xml_escape(t.message) << "</failure>";
            xml << "</testcase>\n";
        }
        xml << "  </testsuite>\n";
        j["requirements"].push_back(r);
    }
    xml << "</testsuites>\n";
    std::ofstream(o.out_dir + "/results.json") << j.dump(2) << "\n";
    std::ofstream(o.out_dir + "/junit.xml") << xml.str();
    std::ofstream(o.out_dir + "/summary.txt") << summary << "\n";
    std::printf("xmc qualify: results in %s (results.json, junit.xml, summary.txt, logs/)\n", o.out_dir.c_str());

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
    return count["failed"] ? 1 : 0;
}

} // namespace xmc::conformance
