#include "qualify.hpp"

#include "bench.hpp"
#include "catalogue.hpp"
#include "loader.hpp"
#include "package.hpp"
#include "report.hpp"
#include "sanitize.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace xmc::conformance {
namespace {

SanitizedRun g_sanitized;  // --sanitize thread: what the children exec and load (empty: this runner, o.backend)
SanitizedRun g_twin;       // the ThreadSanitizer twins the concurrency rows also run under (empty: none)

struct TestOutcome {
    std::string name;
    std::string status;  // passed | failed | skipped | crashed | timeout
    std::string message;
    double ms = 0;
    std::string skip_kind;    // a declared skip: "unsupported" or "no_device" (fixture.hpp)
    std::string skip_reason;
    std::map<std::string, uint64_t> paths;  // the data paths its transfers took (count_path_taken)
};

struct Verdict {
    const Requirement *req = nullptr;
    std::string verdict;  // passed | failed | unsupported | waived
    std::string reason;
    std::vector<TestOutcome> tests;  // with --repeat, those of the first failing run (else of the last)
    double seconds = 0;
    bool mustpass = false;
    std::string reproduce;           // the command that reruns the failed tests
    const Waiver *waiver = nullptr;  // the waiver that applied, if any
    int runs = 0;                    // times its tests ran (--repeat); 0 when they did not run
    int failed_runs = 0;             // of those, the runs that failed
    json taken_over;                 // --rerun-failed: the parent's result, taken over as it is
    json worlds;                     // the transfer tests' worlds: threads, processes (--procs), paths taken
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
// (--jobs: other threads run children too, so the child's argument vector is
// built before fork; after fork it only redirects and execs.)
std::map<std::string, TestOutcome> run_once(const QualifyOptions &o, const SanitizedRun &san,
                                            const std::vector<std::string> &tests, const std::string &log_path,
                                            const std::string &results_path, std::string *running,
                                            std::string *child_note, bool *timed_out) {
    std::string filter;
    for (const auto &t : tests) filter += (filter.empty() ? "" : ":") + t;
    const bool tsan = !san.runner.empty();
    std::vector<std::string> args = {"xmc", "run", "--backend", tsan ? san.backend : o.backend,
                                     "--xmc-results", results_path, "--gtest_filter=" + filter};
    const std::string tsan_env = tsan_options();
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The child's environment, also built before fork (setenv after fork can
    // deadlock on a lock another --jobs thread held).
    std::string tsan_var = "TSAN_OPTIONS=" + tsan_env;
    std::vector<char *> envp;
    for (char **e = environ; *e; ++e)
        if (!tsan || std::strncmp(*e, "TSAN_OPTIONS=", 13) != 0) envp.push_back(*e);
    if (tsan) envp.push_back(tsan_var.data());
    envp.push_back(nullptr);
    std::remove(results_path.c_str());
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_t pid = fork();
    if (pid == 0) {
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
        setpgid(0, 0);  // its own group: a timeout kills the backend's helpers too
        execve(tsan ? san.runner.c_str() : "/proc/self/exe", argv.data(), envp.data());
        _exit(127);
    }
    if (fd >= 0) close(fd);
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
    else if (WIFSIGNALED(status)) {
        const char *what = sigdescr_np(WTERMSIG(status));  // (strsignal is not thread-safe)
        *child_note = "died by signal " + (what ? std::string(what) : std::to_string(WTERMSIG(status)));
    }

    std::map<std::string, TestOutcome> done;
    running->clear();
    std::ifstream in(results_path);
    for (std::string line; std::getline(in, line);) {
        json ev = json::parse(line, nullptr, false);
        if (ev.is_discarded()) continue;
        if (ev["event"] == "start") *running = ev["name"];
        else {
            TestOutcome t{ev["name"], ev["status"], ev["message"], ev["ms"].get<double>(),
                          ev.value("skip_kind", ""), ev.value("skip_reason", ""), {}};
            if (ev["paths"].is_object())
                for (const auto &[path, n] : ev["paths"].items()) t.paths[path] = n.get<uint64_t>();
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
                                   std::string *notes, const SanitizedRun &san = g_sanitized) {
    std::map<std::string, TestOutcome> all;
    std::vector<std::string> left = tests;
    while (!left.empty()) {
        std::string running, note;
        bool timed_out = false;
        auto done = run_once(o, san, left, log_path, results_path, &running, &note, &timed_out);
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

// ---- --procs N: the transfer tests in a world of N processes (procs.hpp) ----

// The transfer test bodies (TransferTest), which run in any world; the others run in one process.
bool is_transfer_test(const std::string &name) { return name.find("/TransferTest.") != std::string::npos; }

std::string paths_text(const std::map<std::string, uint64_t> &paths) {
    std::string s;
    for (const auto &[p, n] : paths) s += (s.empty() ? "" : ", ") + p + " " + std::to_string(n);
    return s.empty() ? "none" : s;
}

// What the ranks of one process world did.
struct ProcsRun {
    std::string why_not;                                  // the world could not start: why ("" when it ran)
    std::vector<std::map<std::string, TestOutcome>> done;  // per rank: its finished tests
    std::vector<std::string> running;                      // per rank: the test running when it ended
    std::string note;                                      // the first rank that died, or the timeout
    bool timed_out = false;
};

// Forks o.procs children `xmc run --xmc-rank K` on `tests`, joined through a FileStore in a fresh
// temporary folder (under $XMC_PROCS_TMPDIR, else the system's), and waits for all of them within
// the requirement's time limit. One that dies, or cannot join, ends the others (they would wait for
// it). Their logs are appended to `log`, each under a header naming its rank.
ProcsRun run_procs(const QualifyOptions &o, const std::vector<std::string> &tests, const std::string &id,
                   const std::string &logs, const std::string &log) {
    ProcsRun pr;
    const int n = o.procs;
    pr.done.resize(size_t(n));
    pr.running.resize(size_t(n));
    const char *fault_env = std::getenv("XMC_TEST_PROCS_FAULT");  // the hook of qualify.procs_cannot_start
    const std::string fault = fault_env ? fault_env : "";
    // The rendezvous store's folder.
    std::string store;
    {
        std::error_code ec;
        const char *parent_env = std::getenv("XMC_PROCS_TMPDIR");
        const std::filesystem::path parent = parent_env ? std::filesystem::path(parent_env)
                                                        : std::filesystem::temp_directory_path(ec);
        if (ec) {
            pr.why_not = "cannot make the rendezvous store's folder: no temporary folder: " + ec.message();
            return pr;
        }
        const std::string shown = (parent / "xmc-procs-XXXXXX").string();
        std::string tmpl = shown;  // (mkdtemp may leave its attempt here when it fails)
        if (!mkdtemp(tmpl.data())) {
            pr.why_not = "cannot make the rendezvous store's folder " + shown + ": " +
                         std::error_code(errno, std::generic_category()).message();
            return pr;
        }
        store = tmpl;
    }
    // Every child's arguments and environment, built before the first fork (--jobs: see run_once).
    std::string filter;
    for (const auto &t : tests) filter += (filter.empty() ? "" : ":") + t;
    const bool tsan = !g_sanitized.runner.empty();
    std::vector<std::vector<std::string>> args(static_cast<size_t>(n));
    std::vector<std::string> rank_logs, rank_results;
    for (int k = 0; k < n; ++k) {
        rank_logs.push_back(logs + "/" + id + ".rank" + std::to_string(k) + ".log");
        rank_results.push_back(logs + "/" + id + ".rank" + std::to_string(k) + ".jsonl");
        args[size_t(k)] = {"xmc", "run", "--backend", tsan ? g_sanitized.backend : o.backend, "--xmc-results",
                           rank_results.back(), "--xmc-rank", std::to_string(k), "--xmc-ranks", std::to_string(n),
                           "--xmc-store", store, "--gtest_filter=" + filter};
    }
    std::vector<std::vector<char *>> argv(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
        for (auto &a : args[size_t(k)]) argv[size_t(k)].push_back(a.data());
        argv[size_t(k)].push_back(nullptr);
    }
    std::string tsan_var = "TSAN_OPTIONS=" + tsan_options();
    std::vector<char *> envp;
    for (char **e = environ; *e; ++e)
        if (!tsan || std::strncmp(*e, "TSAN_OPTIONS=", 13) != 0) envp.push_back(*e);
    if (tsan) envp.push_back(tsan_var.data());
    envp.push_back(nullptr);

    std::vector<pid_t> pids;
    pid_t group = 0;  // the ranks share one process group: a timeout or a death ends all of them
    for (int k = 0; k < n; ++k) {
        std::remove(rank_results[size_t(k)].c_str());
        const int fd = open(rank_logs[size_t(k)].c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        pid_t pid = -1;
        if (fault == "fork") errno = EAGAIN;
        else pid = fork();
        if (pid == 0) {
            if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
            setpgid(0, group);
            execve(tsan ? g_sanitized.runner.c_str() : "/proc/self/exe", argv[size_t(k)].data(), envp.data());
            _exit(127);
        }
        if (fd >= 0) close(fd);
        if (pid < 0) {
            pr.why_not = "fork of rank " + std::to_string(k) + " failed: " +
                         std::error_code(errno, std::generic_category()).message() +
                         (fault == "fork" ? " (simulated: XMC_TEST_PROCS_FAULT=fork)" : "");
            break;
        }
        if (!group) group = pid;
        setpgid(pid, group);  // (the child does too: whichever runs first)
        pids.push_back(pid);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    std::vector<int> status(pids.size(), 0);
    std::vector<bool> ended(pids.size(), false);
    size_t left = pids.size();
    bool killed = !pr.why_not.empty();
    if (killed && group) kill(-group, SIGKILL);
    int exec_failed = -1;
    while (left) {
        for (size_t k = 0; k < pids.size(); ++k) {
            if (ended[k] || waitpid(pids[k], &status[k], WNOHANG) != pids[k]) continue;
            ended[k] = true;
            --left;
            const int st = status[k];
            const bool abnormal = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) > 1);
            if (!abnormal || killed) continue;
            // The first rank that ended abnormally: the others would wait for it, so they end too.
            if (WIFEXITED(st) && WEXITSTATUS(st) == 127) exec_failed = int(k);
            if (WIFSIGNALED(st)) {
                const char *what = sigdescr_np(WTERMSIG(st));
                pr.note = "rank " + std::to_string(k) + " died by signal " +
                          (what ? std::string(what) : std::to_string(WTERMSIG(st)));
            } else {
                pr.note = "rank " + std::to_string(k) + " exited with status " + std::to_string(WEXITSTATUS(st));
            }
            kill(-group, SIGKILL);
            killed = true;
        }
        if (left && !killed && std::chrono::steady_clock::now() > deadline) {
            pr.timed_out = true;
            pr.note = "timed out after " + std::to_string(o.timeout_s) + " s";
            kill(-group, SIGKILL);
            killed = true;
        }
        if (left) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Each rank's results, then its log into the requirement's.
    std::string world_error;
    for (int k = 0; k < n; ++k) {
        std::ifstream in(rank_results[size_t(k)]);
        for (std::string line; std::getline(in, line);) {
            json ev = json::parse(line, nullptr, false);
            if (ev.is_discarded()) continue;
            if (ev["event"] == "world") {
                if (world_error.empty()) world_error = "rank " + std::to_string(k) + ": " + ev.value("error", "");
            } else if (ev["event"] == "start") {
                pr.running[size_t(k)] = ev["name"];
            } else {
                TestOutcome t{ev["name"], ev["status"], ev["message"], ev["ms"].get<double>(),
                              ev.value("skip_kind", ""), ev.value("skip_reason", ""), {}};
                if (ev["paths"].is_object())
                    for (const auto &[path, c] : ev["paths"].items()) t.paths[path] = c.get<uint64_t>();
                pr.done[size_t(k)][t.name] = t;
                pr.running[size_t(k)].clear();
            }
        }
        std::remove(rank_results[size_t(k)].c_str());
        std::ifstream rank_log(rank_logs[size_t(k)]);
        std::ofstream(log, std::ios::app) << "==== xmc qualify --procs " << n << ": process world, rank " << k << " of "
                                          << n << " ====\n"
                                          << rank_log.rdbuf();
        rank_log.close();
        std::remove(rank_logs[size_t(k)].c_str());
    }
    std::error_code ec;
    std::filesystem::remove_all(store, ec);
    if (pr.why_not.empty() && !world_error.empty()) pr.why_not = world_error;
    if (pr.why_not.empty() && exec_failed >= 0)
        pr.why_not = "rank " + std::to_string(exec_failed) + " could not exec the runner (exit 127)";
    return pr;
}

// --procs not given: whether the thread world took a path within one address space (direct), which
// between processes becomes another (IPC, NCCL). Where it took only staged, processes would take
// staged again over another transport: the process world is left out, which keeps the host's whole
// qualification within its time (SPEC 10: 5 s with it left out, 11 s run).
bool took_direct(const std::vector<TestOutcome> &tests) {
    for (const auto &t : tests)
        if (auto it = t.paths.find("direct"); it != t.paths.end() && it->second > 0) return true;
    return false;
}

void skip_procs(const QualifyOptions &o, const std::vector<TestOutcome> &tests, const std::string &log, json *worlds) {
    std::map<std::string, uint64_t> threads_paths;
    for (const auto &t : tests)
        for (const auto &[p, c] : t.paths) threads_paths[p] += c;
    const std::string why = "not run (--procs not given): the thread world took no path within one address space "
                            "(direct), so processes would take the same paths";
    std::ofstream(log, std::ios::app) << "xmc qualify: thread world (one process): data paths taken: "
                                      << paths_text(threads_paths) << "\nxmc qualify: process world: " << why << "\n";
    (*worlds)["threads"] = {{"paths", threads_paths}};
    (*worlds)["processes"] = {{"ranks", o.procs}, {"started", false}, {"reason", why}};
}

// The process world's outcome folded into the requirement's tests: a failure on any rank fails the
// test, naming the rank. A world that could not start leaves no test passed: the requirement is
// then unsupported with the reason, never passed on half its worlds. *worlds records both worlds
// and the paths each took; the log says them too.
void merge_procs(const QualifyOptions &o, const ProcsRun &pr, std::vector<TestOutcome> &tests, const std::string &log,
                 json *worlds) {
    const std::string world = "process world (" + std::to_string(o.procs) + " ranks over gloo)";
    std::map<std::string, uint64_t> threads_paths, procs_paths;
    for (const auto &t : tests)
        for (const auto &[p, c] : t.paths) threads_paths[p] += c;
    std::ofstream out(log, std::ios::app);
    out << "xmc qualify: thread world (one process): data paths taken: " << paths_text(threads_paths) << "\n";
    (*worlds)["threads"] = {{"paths", threads_paths}};
    if (!pr.why_not.empty()) {
        const std::string why = "the " + world + " could not start: " + pr.why_not;
        for (auto &t : tests)
            if (t.status == "passed") {
                t.status = "skipped";
                t.skip_kind = "unsupported";
                t.skip_reason = why;
                t.message = "passed in the thread world; " + why;
            }
        out << "xmc qualify: " << why << "\n";
        (*worlds)["processes"] = {{"ranks", o.procs}, {"started", false}, {"reason", pr.why_not}};
        return;
    }
    for (auto &t : tests) {
        if (!is_transfer_test(t.name)) continue;
        for (size_t k = 0; k < pr.done.size(); ++k) {
            const std::string who = world + ", rank " + std::to_string(k) + ": ";
            TestOutcome r;
            if (auto it = pr.done[k].find(t.name); it != pr.done[k].end()) {
                r = it->second;
            } else if (pr.running[k] == t.name) {
                r.status = pr.timed_out ? "timeout" : "crashed";
                r.message = "the world ended while this test ran (" + (pr.note.empty() ? "exit" : pr.note) + ")";
            } else {
                r.status = "failed";
                r.message = "not run: the world ended before it (" + (pr.note.empty() ? "exit" : pr.note) + ")";
            }
            for (const auto &[p, c] : r.paths) procs_paths[p] += c;
            if (r.status == "skipped" && (r.skip_kind.empty() || r.skip_reason.empty())) {
                r.status = "failed";
                r.message = "skipped without a declared reason: " + r.message;
            }
            if (r.status == "passed" || r.status == "skipped") continue;
            if (t.status == "passed" || t.status == "skipped") {
                t.status = r.status;
                t.message = who + r.message;
            } else {
                t.message += "\n" + who + r.message;
            }
        }
    }
    out << "xmc qualify: " << world << ": data paths taken: " << paths_text(procs_paths)
        << (pr.note.empty() ? "" : " (" + pr.note + ")") << "\n";
    (*worlds)["processes"] = {{"ranks", o.procs}, {"started", true}, {"paths", procs_paths}};
    if (!pr.note.empty()) (*worlds)["processes"]["note"] = pr.note;
}

// One run's verdict from its tests' outcomes (a skip without a declared
// reason becomes a failure of that test).
void judge(std::vector<TestOutcome> &tests, const std::string &note, std::string *verdict, std::string *reason) {
    int failed = 0, passed = 0, unsupported = 0;
    for (auto &t : tests) {
        if (t.status == "passed") ++passed;
        else if (t.status == "skipped") {
            // A skip must declare why (XMC_SKIP): a missing capability, feature or device.
            if ((t.skip_kind == "unsupported" || t.skip_kind == "no_device") && !t.skip_reason.empty()) ++unsupported;
            else { t.status = "failed"; t.message = "skipped without a declared reason: " + t.message; ++failed; }
        } else ++failed;
    }
    if (failed) {
        *verdict = "failed";
        *reason = std::to_string(failed) + " of " + std::to_string(tests.size()) + " tests failed" +
                  (note.empty() ? "" : " (" + note + ")");
    } else if (passed == 0) {
        *verdict = "unsupported";
        for (auto &t : tests)
            if (t.status == "skipped") { *reason = t.skip_kind + ": " + t.skip_reason; break; }
    } else {
        *verdict = "passed";
        *reason = std::to_string(passed) + " tests" +
                  (unsupported ? ", " + std::to_string(unsupported) + " unsupported" : "");
    }
}

// A requirement's verdict: its tests run --repeat times (each run in fresh
// children, one log for all runs); any failing run fails it, with the tests
// of the first failing run. Safe to call from several threads (--jobs).
Verdict evaluate(const QualifyOptions &o, const Requirement &r, const std::vector<std::string> &tests,
                 xmc_caps declared, const std::string &logs) {
    Verdict v;
    v.req = &r;
    const auto t0 = std::chrono::steady_clock::now();
    if (const std::string cap = r.missing_capability(declared); !cap.empty()) {
        v.verdict = "unsupported";
        v.reason = "capability '" + cap + "' not declared";
    } else if (!r.in_tier("pr")) {
        // A benchmark's requirement (REG-SPEED, ...): its tier's benchmarks measure it.
        const std::string &tier = !o.tier.empty() && r.in_tier(o.tier) ? o.tier : r.tiers.front();
        v.verdict = "unsupported";
        v.reason = "measured by the hardware tier (" + tier + "): ctest -L " + tier;
    } else if (tests.empty()) {
        v.verdict = "failed";
        v.reason = "no test is registered for this requirement, whose capability the backend declares";
    } else {
        const std::string log = logs + "/" + r.id + ".log";
        std::remove(log.c_str());
        std::string first_failure;
        int first_failed_run = 0;
        for (int run = 1; run <= o.repeat; ++run) {
            if (o.repeat > 1) {
                std::ofstream(log, std::ios::app) << "==== xmc qualify --repeat " << o.repeat << ": run " << run << " of "
                                                  << o.repeat << " ====\n";
            }
            std::string note, verdict, reason;
            std::vector<TestOutcome> outcome = run_tests(o, tests, log, logs + "/" + r.id + ".jsonl", &note);
            // --procs: the transfer tests again, in a world of processes (the paths between them).
            std::vector<std::string> transfer;
            for (const auto &t : tests)
                if (is_transfer_test(t)) transfer.push_back(t);
            if (o.procs >= 2 && !transfer.empty()) {
                if (o.procs_auto && !took_direct(outcome)) {
                    skip_procs(o, outcome, log, &v.worlds);
                } else {
                    const ProcsRun pr = run_procs(o, transfer, r.id, logs, log);
                    merge_procs(o, pr, outcome, log, &v.worlds);
                }
            }
            judge(outcome, note, &verdict, &reason);
            if (v.worlds.contains("processes")) {
                const json &pw = v.worlds["processes"];
                if (pw.value("started", false))
                    reason += "; process world of " + std::to_string(o.procs) + " ranks: paths " +
                              paths_text(pw["paths"].get<std::map<std::string, uint64_t>>());
            }
            // A ThreadSanitizer report fails the requirement even when every check passed.
            if (std::string race; !g_sanitized.runner.empty() && tsan_reported(log, &race)) {
                reason = "ThreadSanitizer reported a data race (" + race + "; the report is in " + log + "), " + reason;
                verdict = "failed";
            }
            // A concurrency row, where the twins are built: again under ThreadSanitizer, which
            // reports a race the plain run's interleavings did not turn into a wrong answer.
            if (!r.threads.empty() && !g_twin.runner.empty() && verdict != "failed") {
                std::ofstream(log, std::ios::app) << "==== xmc qualify: " << r.id << " again under ThreadSanitizer ("
                                                  << g_twin.runner << ") ====\n";
                std::string tnote, tverdict, treason, race;
                std::vector<TestOutcome> twin = run_tests(o, tests, log, logs + "/" + r.id + ".tsan.jsonl", &tnote, g_twin);
                judge(twin, tnote, &tverdict, &treason);
                if (tsan_reported(log, &race)) {
                    verdict = "failed";
                    reason = "under ThreadSanitizer: a data race (" + race + "; the report is in " + log + ")";
                    outcome = twin;
                } else if (tverdict == "failed") {
                    verdict = "failed";
                    reason = "under ThreadSanitizer: " + treason;
                    outcome = twin;
                } else {
                    reason += "; under ThreadSanitizer too";
                }
            }
            ++v.runs;
            if (verdict == "failed") {
                if (++v.failed_runs == 1) { v.tests = outcome; first_failure = reason; first_failed_run = run; }
            } else if (v.failed_runs == 0) {
                v.tests = outcome;
                v.verdict = verdict;
                v.reason = reason;
            }
        }
        if (v.failed_runs) {
            v.verdict = "failed";
            v.reason = first_failure;
            if (o.repeat > 1) {
                char rate[160];
                std::snprintf(rate, sizeof rate, " in run %d; failed %d of %d runs (flake rate %.2f)", first_failed_run,
                              v.failed_runs, v.runs, static_cast<double>(v.failed_runs) / v.runs);
                v.reason += rate;
            }
        } else if (o.repeat > 1) {
            v.reason += ", in each of " + std::to_string(v.runs) + " runs";
        }
    }
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return v;
}

// The package's files besides the report (SPEC 9; docs/qualify.md).
bool write_package(const QualifyOptions &o, const LoadedBackend &b, const std::vector<Verdict> &verdicts,
                   const MustPass &mustpass, const std::string &waivers_source, const std::string &waivers_text,
                   const json &environment, const json *bench, const Parent *parent, std::string *summary,
                   std::string *err) {
    json j;
    j["format"] = kPackageFormat;
    j["suite"] = {{"version", suite_version()}, {"git_revision", git_revision()}};
    j["backend"] = {{"name", b.api->name}, {"version", b.api->version}, {"path", b.path},
                    {"capabilities", caps_to_string(b.api->capabilities)}};
    j["filter"] = o.filter;
    j["tier"] = o.tier;
    j["timeout_s"] = o.timeout_s;
    j["jobs"] = o.jobs;
    j["repeat"] = o.repeat;
    j["procs"] = o.procs;
    j["procs_auto"] = o.procs_auto;
    j["shard"] = o.shard_count ? json{{"index", o.shard_index}, {"count", o.shard_count}} : json(nullptr);
    j["waivers_source"] = waivers_source;
    j["mustpass"] = {{"suite", mustpass.suite}, {"lists", mustpass.lists}};
    j["bench"] = bench != nullptr;
    if (parent) {
        json rerun = json::array(), kept = json::array();
        for (const auto &v : verdicts) (v.taken_over.is_null() ? rerun : kept).push_back(v.req->id);
        j["parent"] = {{"path", parent->path}, {"results_sha256", parent->digest}, {"rerun", rerun}, {"taken_over", kept}};
    }
    j["requirements"] = json::array();
    for (const auto &v : verdicts) {
        if (!v.taken_over.is_null()) {
            json r = v.taken_over;
            r.erase("rerun");        // (rerun in the grandparent's run, maybe)
            r["taken_over"] = true;  // from the parent, as it was there
            j["requirements"].push_back(r);
            continue;
        }
        json r = {{"id", v.req->id}, {"capability", v.req->capability}, {"verdict", v.verdict},
                  {"reason", v.reason}, {"seconds", v.seconds}, {"mustpass", v.mustpass},
                  {"reproduce", v.reproduce}, {"runs", v.runs}, {"failed_runs", v.failed_runs},
                  {"flake_rate", v.runs ? static_cast<double>(v.failed_runs) / v.runs : 0.0}, {"tests", json::array()}};
        if (parent) r["rerun"] = true;
        if (!v.worlds.is_null()) r["worlds"] = v.worlds;
        if (v.waiver)
            r["waiver"] = {{"reason", v.waiver->reason}, {"link", v.waiver->link}, {"device", v.waiver->device},
                           {"line", v.waiver->line}};
        for (const auto &t : v.tests)
            r["tests"].push_back({{"name", t.name}, {"status", t.status}, {"ms", t.ms}, {"message", t.message}});
        j["requirements"].push_back(r);
    }
    *summary = recount_summary(j);

    json caps = {{"backend", b.api->name}, {"version", b.api->version}, {"path", b.path},
                 {"abi_version", b.api->abi_version}, {"mask", b.api->capabilities}, {"capabilities", json::array()}};
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (b.api->capabilities & (1ull << i)) caps["capabilities"].push_back(xmc_cap_string(1ull << i));

    const std::string &d = o.out_dir;
    return write_text(d + "/results.json", j.dump(2) + "\n", err) &&
           write_text(d + "/junit.xml", junit_xml(j), err) &&
           write_text(d + "/summary.txt", *summary + "\n", err) &&
           write_text(d + "/mustpass.txt", mustpass_text(mustpass), err) &&
           write_text(d + "/waivers.tsv", waivers_text, err) &&
           write_text(d + "/capabilities.json", caps.dump(2) + "\n", err) &&
           write_text(d + "/environment.json", environment.dump(2) + "\n", err) &&
           (!bench || write_text(d + "/bench.json", bench->dump(2) + "\n", err)) &&
           (!bench || write_text(d + "/bench.csv", bench_csv(*bench), err));
}

} // namespace


int qualify(const QualifyOptions &opts) {
    QualifyOptions o = opts;
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
    } else if (o.sanitize.empty() && sanitized_run(o.backend, &g_twin, &err)) {
        std::printf("xmc qualify: the concurrency rows (catalogue: threads) also run under ThreadSanitizer: %s run "
                    "--backend %s (--sanitize none: not)\n", g_twin.runner.c_str(), g_twin.backend.c_str());
    }
    // --rerun-failed: the parent package gives the selection, the must-pass
    // version and the waivers; it must be of this backend and this suite.
    Parent parent;
    const bool rerun = !o.rerun_failed.empty();
    if (rerun) {
        if (!read_parent(o.rerun_failed, &parent, &err)) {
            std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
            return 2;
        }
        const json &pb = parent.results["backend"], &ps = parent.results["suite"];
        const std::string here = std::string(b->api->name) + " " + b->api->version + " [" + caps_to_string(b->api->capabilities) + "]";
        const std::string there = pb.value("name", "") + " " + pb.value("version", "") + " [" + pb.value("capabilities", "") + "]";
        if (here != there) {
            std::fprintf(stderr, "xmc qualify: --rerun-failed: %s is a package of backend %s, not of %s\n",
                         o.rerun_failed.c_str(), there.c_str(), here.c_str());
            return 2;
        }
        if (ps.value("version", "") != suite_version() || ps.value("git_revision", "") != git_revision()) {
            std::fprintf(stderr, "xmc qualify: --rerun-failed: %s was made by suite %s (%s), this xmc is %s (%s): rerun with "
                                 "the xmc that made it\n", o.rerun_failed.c_str(), ps.value("version", "").c_str(),
                         ps.value("git_revision", "").c_str(), suite_version(), git_revision());
            return 2;
        }
        o.filter = parent.results.value("filter", "");
        o.tier = parent.results.value("tier", "");
        o.mustpass = parent.results["mustpass"].value("suite", suite_version());
        o.waivers = parent.results.value("waivers_source", "");
        if (parent.results["shard"].is_object()) {
            o.shard_index = parent.results["shard"].value("index", 0);
            o.shard_count = parent.results["shard"].value("count", 0);
        }
    }
    // The waiver file (copied into the package as waivers.tsv); a rerun uses its parent's.
    std::vector<Waiver> waivers;
    std::string waivers_text = "# xmc waivers: ID<TAB>backend<TAB>device<TAB>reason<TAB>link (none given)\n";
    if (rerun) {
        waivers_text = parent.waivers_text;
        if (!parse_waivers(waivers_text, o.rerun_failed + "/waivers.tsv", &waivers, &err)) {
            std::fprintf(stderr, "xmc qualify: --rerun-failed: %s\n", err.c_str());
            return 2;
        }
    } else if (!o.waivers.empty()) {
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
    // The selection: the rows of the filter and tier, then this shard's share
    // of them (every N-th, so a row's shard depends only on the selection).
    std::vector<const Requirement *> selected;
    if (rerun) {
        for (const auto &pr : parent.results["requirements"]) {
            const Requirement *row = nullptr;
            for (const auto &r : catalogue())
                if (r.id == pr.value("id", "")) row = &r;
            if (!row) {
                std::fprintf(stderr, "xmc qualify: --rerun-failed: %s holds requirement '%s', which is not in the catalogue of "
                                     "suite %s\n", o.rerun_failed.c_str(), pr.value("id", "").c_str(), suite_version());
                return 2;
            }
        }
        for (const auto &r : catalogue())
            for (const auto &pr : parent.results["requirements"])
                if (pr.value("id", "") == r.id) { selected.push_back(&r); break; }
    } else {
        size_t position = 0;
        for (const auto &r : catalogue()) {
            if (!r.selected_by(o.filter, o.tier)) continue;
            if (!o.shard_count || static_cast<int>(position % o.shard_count) == o.shard_index - 1) selected.push_back(&r);
            ++position;
        }
    }
    if (selected.empty()) {
        std::string what = o.filter.empty() ? "" : "the filter '" + o.filter + "'";
        if (!o.tier.empty()) what += (what.empty() ? "tier " : " in tier ") + o.tier;
        if (o.shard_count) what += (what.empty() ? "shard " : ", shard ") + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) + ",";
        if (what.empty()) what = "the catalogue";
        std::fprintf(stderr, "xmc qualify: %s selects no requirement\n", what.c_str());
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
    std::filesystem::remove(o.out_dir + "/bench.csv", ec);
    std::filesystem::remove_all(o.out_dir + "/plots", ec);
    std::printf("xmc qualify: backend %s %s (%s), capabilities: %s\n", b->api->name, b->api->version,
                b->path.c_str(), caps_to_string(b->api->capabilities).c_str());
    if (o.procs >= 2 && (b->api->capabilities & XMC_CAP_TRANSFER))
        std::printf("xmc qualify: --procs %d: the transfer tests also run in a world of %d processes over gloo%s\n", o.procs,
                    o.procs, o.procs_auto ? " (not given: where the thread world took the direct path)" : "");

    // The environment statement; the devices it names select device waivers.
    const json environment = collect_environment(*b, std::min(o.timeout_s, 60));
    const std::vector<DeviceFacts> devices = devices_of(environment);
    if (rerun && device_identity(environment) != device_identity(parent.environment)) {
        std::fprintf(stderr, "xmc qualify: --rerun-failed: %s was made on other devices (%s) than this run sees (%s): its "
                             "verdicts cannot be taken over\n", o.rerun_failed.c_str(),
                     device_identity(parent.environment).dump().c_str(), device_identity(environment).dump().c_str());
        return 2;
    }
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

    // What runs: every selected requirement, or with --rerun-failed those
    // that failed in the parent (the others are taken over from it).
    std::vector<Verdict> verdicts(selected.size());
    std::vector<size_t> to_run;
    for (size_t i = 0; i < selected.size(); ++i) {
        verdicts[i].req = selected[i];
        if (rerun) {
            for (const auto &pr : parent.results["requirements"])
                if (pr.value("id", "") == selected[i]->id && pr.value("verdict", "") != "failed") verdicts[i].taken_over = pr;
            if (!verdicts[i].taken_over.is_null()) {
                // Its log comes along, so the package stays complete.
                std::filesystem::copy_file(o.rerun_failed + "/logs/" + selected[i]->id + ".log",
                                           logs + "/" + selected[i]->id + ".log",
                                           std::filesystem::copy_options::overwrite_existing, ec);
                continue;
            }
        }
        to_run.push_back(i);
    }
    if (rerun) {
        std::string ids;
        for (size_t i : to_run) ids += (ids.empty() ? "" : ", ") + selected[i]->id;
        std::printf("xmc qualify: rerunning the %zu requirement(s) that failed in %s%s%s; the other %zu are taken over\n",
                    to_run.size(), o.rerun_failed.c_str(), ids.empty() ? "" : ": ", ids.c_str(),
                    selected.size() - to_run.size());
    }
    if (o.shard_count)
        std::printf("xmc qualify: shard %d/%d: %zu requirement(s) of the selection\n", o.shard_index, o.shard_count,
                    selected.size());

    // The requirements run --jobs at a time; one whose catalogue row says
    // "alone" runs with nothing beside it (after the others), and those whose
    // row says "waits" (their tests mostly sleep) run one at a time in a lane
    // beside the N, so that their sleep overlaps with the others' work. The
    // tests of each are listed here, before any thread starts (GoogleTest's registry).
    std::vector<std::vector<std::string>> tests(selected.size());
    for (size_t i : to_run) tests[i] = tests_of(*selected[i]);
    std::mutex print_mu;
    size_t finished = 0;
    const auto ran_from = std::chrono::steady_clock::now();
    auto run_one = [&](size_t i) {
        const Requirement *r = selected[i];
        Verdict v = evaluate(o, *r, tests[i], b->api->capabilities, logs);
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
        std::lock_guard<std::mutex> lock(print_mu);
        std::printf("[%2zu/%zu] %-24s %-11s %s (%.2f s)\n", ++finished, to_run.size(), r->id.c_str(),
                    v.verdict.c_str(), v.reason.c_str(), v.seconds);
        std::fflush(stdout);
        verdicts[i] = std::move(v);
    };
    if (o.jobs <= 1) {
        for (size_t i : to_run) run_one(i);
    } else {
        // Rows alone only on a shared device: ask whether this backend's device is one.
        bool device_is_shared = false;
        for (size_t i : to_run)
            if (selected[i]->alone_if_shared) {
                std::string how;
                device_is_shared = device_shared(*b, std::min(o.timeout_s, 30), &how);
                std::printf("xmc qualify: --jobs %d: %s; the rows 'alone on a shared device' run %s\n", o.jobs,
                            how.c_str(), device_is_shared ? "alone" : "beside the others");
                break;
            }
        std::vector<size_t> shared, waiting, alone;
        for (size_t i : to_run) {
            const Requirement &r = *selected[i];
            const bool by_itself = !r.alone.empty() && (!r.alone_if_shared || device_is_shared);
            (by_itself ? alone : !r.waits.empty() ? waiting : shared).push_back(i);
        }
        std::thread lane([&] {
            for (size_t i : waiting) run_one(i);
        });
        std::atomic<size_t> next{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < o.jobs && static_cast<size_t>(t) < shared.size(); ++t)
            pool.emplace_back([&] {
                for (size_t k; (k = next++) < shared.size();) run_one(shared[k]);
            });
        for (auto &t : pool) t.join();
        lane.join();
        for (size_t i : alone) run_one(i);
    }
    const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ran_from).count();
    for (size_t i = 0; i < selected.size(); ++i) {
        verdicts[i].req = selected[i];
        verdicts[i].mustpass = mustpass.contains(selected[i]->id);
        if (!verdicts[i].taken_over.is_null()) verdicts[i].verdict = verdicts[i].taken_over.value("verdict", "");
    }

    // The summary line, then each failure's reproducer (in catalogue order,
    // however the runs finished).
    std::map<std::string, int> count;
    for (const auto &v : verdicts) count[v.verdict]++;
    std::printf("%s\n", summary_line(static_cast<int>(verdicts.size()), count["passed"], count["failed"],
                                     count["unsupported"], count["waived"]).c_str());
    int failed = 0;
    for (const auto &v : verdicts) {
        if (v.verdict != "failed") continue;
        ++failed;
        if (!v.taken_over.is_null()) continue;
        std::printf("\nFAILED %s: %s\n", v.req->id.c_str(), v.reason.c_str());
        for (const auto &t : v.tests) {
            if (t.status == "passed" || t.status == "skipped") continue;
            std::printf("  %s [%s]\n    %s\n", t.name.c_str(), t.status.c_str(),
                        t.message.substr(0, 2000).c_str());
            // A stateful property's replay on the host reference (SPEC 6): its
            // verdict, or why there is none, whatever the message's length.
            const std::string replay = "on the host reference: ";
            const size_t at = t.message.find("replay of the minimal");
            const size_t from = at == std::string::npos ? at : t.message.find(replay, at);
            if (from != std::string::npos) {
                const size_t begin = from + replay.size();
                std::printf("    replay on the host reference: %s\n",
                            t.message.substr(begin, t.message.find('\n', begin) - begin).c_str());
            }
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
        rerun_noisy(bo, json(), "", &bench);
        if (!bench["rows"].empty()) std::printf("\n%s", bench_table(bench).c_str());
        if (bench.contains("skipped")) std::printf("xmc qualify: benchmarks skipped: %s\n", bench["skipped"].get<std::string>().c_str());
        for (const auto &problem : bench_failures(bench)) {
            std::printf("xmc qualify: benchmarks FAILED: %s\n", problem.c_str());
            bench_failed = true;
        }
    }

    // The package: results.json, junit.xml, summary.txt, mustpass.txt,
    // waivers.tsv, capabilities.json, environment.json, bench.json, report.
    std::string summary;
    if (!write_package(o, *b, verdicts, mustpass, o.waivers, waivers_text, environment, o.bench ? &bench : nullptr,
                       rerun ? &parent : nullptr, &summary, &err)) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }

    if (!write_report(o.out_dir, &err)) {
        std::fprintf(stderr, "xmc qualify: %s\n", err.c_str());
        return 2;
    }
    std::printf("xmc qualify: %zu requirement(s) ran in %.1f s (--jobs %d)\n", to_run.size(), ran_s, o.jobs);
    std::printf("xmc qualify: results in %s (results.json, junit.xml, summary.txt, logs/)\n", o.out_dir.c_str());
    std::printf("xmc qualify: report in %s/report.html; check the package with: xmc verify %s\n", o.out_dir.c_str(),
                o.out_dir.c_str());

    if (!o.expect_fail.empty()) {
        std::vector<std::string> failed_ids;
        for (const auto &v : verdicts)
            if (v.verdict == "failed") failed_ids.push_back(v.req->id);
        return selftest_verdict(o.expect_fail, o.may_fail, failed_ids);
    }
    return failed || bench_failed ? 1 : 0;
}

} // namespace xmc::conformance
