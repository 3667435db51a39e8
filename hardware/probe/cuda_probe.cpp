// xmc_cuda_probe: records how a CUDA driver answers a FIXED list of call
// sequences ("cases"), mostly misuse, so the fake driver (fakes/cuda) can be
// checked against the real one.
//
//   xmc_cuda_probe [--driver PATH] [--out FILE] [--replay FILE] [--case NAME]...
//                  [--strict] [--timeout SECONDS] [--jobs N] [--list] [--timing]
//
//   --driver PATH   the driver library to dlopen (default libcuda.so.1)
//   --out FILE      write the recording (format: probe_format.h) to FILE
//   --replay FILE   compare every case with FILE; exit 1 on any mismatch
//   --case NAME     run only this case (repeatable)
//   --strict        exit 1 when a case crashed, timed out, failed its set-up,
//                   or (on the fake) left live objects in the fake's ledger;
//                   with --out, also re-read the file and check every case
//                   that ran is in it exactly once
//   --timeout S     per-case time limit (default 10 s; no case needs more than
//                   a few seconds, and a hung one should not cost the run)
//   --jobs N        run up to N cases at once (default 4); a case marked
//                   `alone` runs with no other in flight
//   --list          print the case names and what each does, then exit
//   --timing        print each case's wall time (ms) to stderr
//
// Each case runs in its own forked child that dlopens the driver, calls cuInit,
// runs the case and cleans up what it created, so a case that crashes or
// hangs (a driver call from a host callback may deadlock) cannot disturb the
// others. The parent never loads the driver. The result line of every case is
// printed to stdout and, with --out, written to the file, in the list's order.
//
// Most of a case's time on a real driver is the child's cuInit and context
// creation (about 0.35 s on an H200), which the driver partly serialises
// across processes: four children at once give about 1.8 times the rate of
// one (measured, driver 580), which keeps a whole run near one minute. Cases
// whose answer depends on timing, on the device's free memory, that fault the
// GPU or fork a peer are marked `alone` and never overlap another.
//
// The cases and the loading of the driver are in probe_cases.cpp; this file
// runs them and writes or replays the recording (probe_format.h). Entry points
// are resolved by the versioned names that cuda.h maps the plain names to
// (cuMemAlloc -> cuMemAlloc_v2, ...): XMC_PROBE_SYM(cuMemAlloc) stringifies the
// macro-expanded name, so the probe asks for exactly what a program compiled
// against this cuda.h would link to. Only cuda.h's types are used; nothing is
// linked from the CUDA toolkit.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "probe_cases.h"
#include "probe_format.h"

namespace {

using namespace xmc::probe;

// ---- running one case in a child process --------------------------------------

struct ChildResult {
    Outcome o;
    bool leak = false;
    int64_t ms = 0;  // wall time of the child, fork to exit
};

// Child side: load, set up, run, tear down, report through fd. Returns the exit status.
int run_child(const Case& c, const std::string& driver_path, int fd) {
    auto report = [fd](const Outcome& o, bool leak) {
        std::string line = o.result + "\t" + std::to_string(o.code) + "\t" + (leak ? "1" : "0") +
                           "\t" + o.note + "\n";
        for (char& ch : line)
            if (ch == '\n' && &ch != &line.back()) ch = ' ';
        size_t off = 0;
        while (off < line.size()) {
            ssize_t w = write(fd, line.data() + off, line.size() - off);
            if (w <= 0) break;
            off += static_cast<size_t>(w);
        }
    };
    P p;
    std::string err;
    if (!load_driver(driver_path, p.d, err)) {
        report(word("SETUP_FAILED", -1, err), false);
        return 2;
    }
    Outcome o;
    bool retained[2] = {false, false};
    try {
        if (c.setup != Setup::none) {
            TRY(p.d.cuInit(0));
            TRY(p.d.cuDeviceGetCount(&p.device_count));
        }
        if (c.setup == Setup::ctx2 && p.device_count < 2) {
            report(word("skipped", 0, "needs two devices; " + std::to_string(p.device_count) + " found"),
                   false);
            return 0;
        }
        if (c.setup == Setup::ctx || c.setup == Setup::ctx2) {
            int n = c.setup == Setup::ctx2 ? 2 : 1;
            for (int i = 0; i < n; ++i) {
                TRY(p.d.cuDeviceGet(&p.dev[i], i));
                TRY(p.d.cuDevicePrimaryCtxRetain(&p.ctx[i], p.dev[i]));
                retained[i] = true;
            }
            TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
        }
        o = c.fn(p);
    } catch (const SetupFailed& f) {
        o = Outcome{"SETUP_FAILED", static_cast<int64_t>(f.r), f.call + " -> " + result_name(p.d, f.r)};
    } catch (const MissingEntry& m) {
        o = word("missing_entry", 0, std::string(m.name) + " is not exported by this driver");
    }
    if (retained[0] || retained[1]) p.d.cuCtxSetCurrent(nullptr);
    for (int i = 0; i < 2; ++i)
        if (retained[i]) p.d.cuDevicePrimaryCtxRelease(p.dev[i]);
    // On the fake: nothing may be left, and nothing may have been freed only
    // because the primary context was released (the case must clean up itself).
    bool leak = false;
    bool reclaimed = p.d.fake_reclaimed_objects != nullptr && p.d.fake_reclaimed_objects() != 0;
    if (p.d.fake_live_objects != nullptr && (p.d.fake_live_objects() != 0 || reclaimed)) {
        leak = true;
        std::string ledger(4096, '\0');
        if (p.d.fake_ledger != nullptr) {
            p.d.fake_ledger(ledger.data(), ledger.size());
            ledger.resize(std::strlen(ledger.c_str()));
        }
        for (char& ch : ledger)
            if (ch == '\n' || ch == '\t') ch = ' ';
        o.note += " LEAK: " + ledger;
    }
    report(o, leak);
    return 0;
}

// Parent side: a child in flight, its pipe, and when it must be done.
struct Child {
    size_t index = 0;  // in the list being run
    pid_t pid = -1;
    int fd = -1;
    std::string buf;
    std::chrono::steady_clock::time_point start, deadline;
};

// Forks the child of case c; pid -1 (and *failed set) when it cannot.
Child start_child(const Case& c, const std::string& driver_path, int timeout_s, ChildResult* failed) {
    Child ch;
    ch.start = std::chrono::steady_clock::now();
    ch.deadline = ch.start + std::chrono::seconds(timeout_s);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        failed->o = word("NO_RESULT", -1, std::string("pipe: ") + std::strerror(errno));
        return ch;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        failed->o = word("NO_RESULT", -1, std::string("fork: ") + std::strerror(errno));
        return ch;
    }
    if (pid == 0) {
        close(fds[0]);
        int st = run_child(c, driver_path, fds[1]);
        close(fds[1]);
        _exit(st);  // skip the driver's and the runtime's exit handlers' surprises
    }
    close(fds[1]);
    ch.pid = pid;
    ch.fd = fds[0];
    return ch;
}

// Reaps a child whose pipe reached EOF (or that timed out: then it is
// killed first) and parses its report.
ChildResult finish_child(Child& ch, bool timed_out, int timeout_s) {
    ChildResult cr;
    close(ch.fd);
    if (timed_out) kill(ch.pid, SIGKILL);
    int status = 0;
    while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR) {
    }
    cr.ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ch.start).count();
    if (timed_out) {
        cr.o = word("TIMEOUT", -1, "no result within " + std::to_string(timeout_s) + " s");
        return cr;
    }
    // parse "result \t code \t leak \t note \n"
    std::vector<std::string> f;
    std::string cur;
    for (char c : ch.buf) {
        if (c == '\t' && f.size() < 3) {
            f.push_back(cur);
            cur.clear();
        } else if (c != '\n') {
            cur.push_back(c);
        }
    }
    f.push_back(cur);
    if (f.size() == 4 && !f[0].empty()) {
        cr.o.result = f[0];
        cr.o.code = std::strtoll(f[1].c_str(), nullptr, 10);
        cr.leak = f[2] == "1";
        cr.o.note = f[3];
        return cr;
    }
    if (WIFSIGNALED(status)) {
        cr.o = word(("CRASHED_SIGNAL_" + std::to_string(WTERMSIG(status))).c_str(), -1,
                    strsignal(WTERMSIG(status)));
    } else {
        cr.o = word("NO_RESULT", -1, "child exited with status " + std::to_string(WEXITSTATUS(status)));
    }
    return cr;
}

// Runs the cases, up to `jobs` children at once; a case marked `alone` runs
// with no other child in flight (it measures time or device memory, faults
// the GPU, or forks a peer). `done(i, result)` is called in list order.
void run_cases(const std::vector<const Case*>& todo, const std::string& driver_path, int timeout_s, int jobs,
               const std::function<void(size_t, const ChildResult&)>& done) {
    std::vector<ChildResult> results(todo.size());
    std::vector<bool> ready(todo.size(), false);
    std::vector<Child> flight;
    size_t next = 0, emitted = 0;
    bool alone_in_flight = false;
    while (emitted < todo.size()) {
        while (next < todo.size() && !alone_in_flight && static_cast<int>(flight.size()) < jobs) {
            const Case& c = *todo[next];
            if (c.alone && !flight.empty()) break;  // wait until the others are done
            ChildResult failed;
            Child ch = start_child(c, driver_path, timeout_s, &failed);
            ch.index = next++;
            if (ch.pid < 0) {
                results[ch.index] = failed;
                ready[ch.index] = true;
                continue;
            }
            alone_in_flight = c.alone;
            flight.push_back(std::move(ch));
        }
        if (!flight.empty()) {
            std::vector<pollfd> pf;
            auto now = std::chrono::steady_clock::now();
            int wait_ms = 1000;
            for (const Child& ch : flight) {
                pf.push_back(pollfd{ch.fd, POLLIN, 0});
                auto left = std::chrono::duration_cast<std::chrono::milliseconds>(ch.deadline - now).count();
                wait_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(wait_ms, left)));
            }
            int pr = poll(pf.data(), pf.size(), wait_ms);
            if (pr < 0 && errno != EINTR) pr = 0;
            now = std::chrono::steady_clock::now();
            for (size_t k = flight.size(); k-- > 0;) {
                Child& ch = flight[k];
                bool eof = false;
                if (pr > 0 && (pf[k].revents & (POLLIN | POLLHUP | POLLERR))) {
                    char tmp[1024];
                    ssize_t n = read(ch.fd, tmp, sizeof tmp);
                    if (n > 0)
                        ch.buf.append(tmp, static_cast<size_t>(n));
                    else if (n == 0 || errno != EINTR)
                        eof = true;  // the child is done (or dead)
                }
                bool timed_out = !eof && now >= ch.deadline;
                if (!eof && !timed_out) continue;
                results[ch.index] = finish_child(ch, timed_out, timeout_s);
                ready[ch.index] = true;
                if (todo[ch.index]->alone) alone_in_flight = false;
                flight.erase(flight.begin() + static_cast<std::ptrdiff_t>(k));
            }
        }
        while (emitted < todo.size() && ready[emitted]) {
            done(emitted, results[emitted]);
            ++emitted;
        }
    }
}

ChildResult run_case(const Case& c, const std::string& driver_path, int timeout_s) {
    ChildResult out;
    run_cases({&c}, driver_path, timeout_s, 1, [&](size_t, const ChildResult& r) { out = r; });
    return out;
}

// Driver facts for the recording's header, from one more child; also whether
// the driver is the fake.
std::string driver_facts(const std::string& driver_path, int timeout_s, bool& is_fake) {
    static const Case info{"info", Setup::init,
                           [](P& p) -> Outcome {
                               int v = 0;
                               p.d.cuDriverGetVersion(&v);
                               std::string s = "cuDriverGetVersion " + std::to_string(v) +
                                               "; devices " + std::to_string(p.device_count);
                               for (int i = 0; i < p.device_count && i < 8; ++i) {
                                   CUdevice d = 0;
                                   char name[128] = {0};
                                   if (p.d.cuDeviceGet(&d, i) == CUDA_SUCCESS &&
                                       p.d.cuDeviceGetName(name, sizeof name, d) == CUDA_SUCCESS)
                                       s += "; device " + std::to_string(i) + ": " + name;
                               }
                               if (p.d.fake_live_objects != nullptr) s += "; the xmc fake driver";
                               return word("info", p.d.fake_live_objects != nullptr ? 1 : 0, s);
                           },
                           "", nullptr};
    ChildResult r = run_case(info, driver_path, timeout_s);
    is_fake = r.o.result == "info" && r.o.code == 1;
    return r.o.result == "info" ? r.o.note : "driver facts unavailable: " + r.o.result + " " + r.o.note;
}

bool is_verdict(const std::string& result) {
    return result == "SETUP_FAILED" || result == "TIMEOUT" || result == "NO_RESULT" ||
           result.rfind("CRASHED_SIGNAL_", 0) == 0;
}

void usage(std::FILE* f) {
    std::fprintf(f,
                 "usage: xmc_cuda_probe [--driver PATH] [--out FILE] [--replay FILE] [--case NAME]...\n"
                 "                      [--strict] [--timeout SECONDS] [--jobs N] [--list] [--timing]\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::string driver = "libcuda.so.1", out_path, replay_path;
    std::set<std::string> only;
    bool strict = false, list = false, timing_each = false;
    int timeout_s = 10, jobs = 4;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto need = [&](const char* what) -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "xmc_cuda_probe: %s needs %s\n", a.c_str(), what);
                usage(stderr);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--driver") driver = need("a path");
        else if (a == "--out") out_path = need("a file");
        else if (a == "--replay") replay_path = need("a file");
        else if (a == "--case") only.insert(need("a case name"));
        else if (a == "--strict") strict = true;
        else if (a == "--list") list = true;
        else if (a == "--timing") timing_each = true;
        else if (a == "--timeout") {
            std::string v = need("seconds");
            timeout_s = std::atoi(v.c_str());
            if (timeout_s <= 0 || timeout_s > 3600) {
                std::fprintf(stderr, "xmc_cuda_probe: bad --timeout '%s'\n", v.c_str());
                return 2;
            }
        } else if (a == "--jobs") {
            std::string v = need("a number");
            jobs = std::atoi(v.c_str());
            if (jobs <= 0 || jobs > 64) {
                std::fprintf(stderr, "xmc_cuda_probe: bad --jobs '%s'\n", v.c_str());
                return 2;
            }
        } else if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else {
            std::fprintf(stderr, "xmc_cuda_probe: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    for (const std::string& n : only) {
        bool known = false;
        for (const Case& c : cases()) known = known || n == c.name;
        if (!known) {
            std::fprintf(stderr, "xmc_cuda_probe: unknown case '%s' (see --list)\n", n.c_str());
            return 2;
        }
    }
    if (list) {
        for (const Case& c : cases()) std::printf("%-48s %s\n", c.name, c.what);
        return 0;
    }

    Recording recorded;
    if (!replay_path.empty()) {
        std::string err;
        if (!xmc::probe::read_recording(replay_path, recorded, err)) {
            std::fprintf(stderr, "xmc_cuda_probe: --replay: %s\n", err.c_str());
            return 2;
        }
    }

    // Is the driver the fake (it exports a ledger)? Only the fake may give the
    // "fake_may_answer" results. The parent never loads the driver: a child says.
    bool is_fake = false;
    std::string facts = driver_facts(driver, timeout_s, is_fake);
    std::printf("# driver %s: %s\n", driver.c_str(), facts.c_str());

    std::vector<const Case*> todo;
    for (const Case& c : cases())
        if (only.empty() || only.count(c.name) != 0) todo.push_back(&c);
    std::vector<Record> results;
    int crashes = 0, leaks = 0, missing = 0;
    auto run_start = std::chrono::steady_clock::now();
    std::vector<std::pair<int64_t, std::string>> times;  // (ms, case): the slowest go in the summary
    run_cases(todo, driver, timeout_s, jobs, [&](size_t i, const ChildResult& cr) {
        const Case& c = *todo[i];
        times.emplace_back(cr.ms, c.name);
        if (timing_each) std::fprintf(stderr, "%s\t%lld ms\n", c.name, static_cast<long long>(cr.ms));
        Record r;
        r.name = c.name;
        r.result = cr.o.result;
        r.code = cr.o.code;
        r.note = cr.o.note;
        if (cr.leak) ++leaks;
        if (is_verdict(r.result)) ++crashes;
        if (r.result == "missing_entry") ++missing;
        std::printf("%s\n", xmc::probe::format_record(r).c_str());
        std::fflush(stdout);
        results.push_back(std::move(r));
    });

    // How long the run took, and its slowest cases: a whole run must stay well
    // under two minutes on a real driver (most of a case is the child's cuInit).
    double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    std::sort(times.rbegin(), times.rend());
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", run_s);
    std::string timing = std::to_string(results.size()) + " cases in " + secs + " s (" + std::to_string(missing) +
                         " missing_entry); slowest:";
    for (size_t i = 0; i < times.size() && i < 5; ++i)
        timing += " " + times[i].second + " " + std::to_string(times[i].first) + " ms";
    std::printf("# %s\n", timing.c_str());

    int status = 0;
    if (!out_path.empty()) {
        std::ofstream f(out_path);
        if (!f) {
            std::fprintf(stderr, "xmc_cuda_probe: cannot write '%s'\n", out_path.c_str());
            return 2;
        }
        std::time_t now = std::time(nullptr);
        char date[64];
        std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
        f << "# xmc_cuda_probe recording, format " << xmc::probe::kFormatVersion << "\n"
          << "# columns: case <TAB> result <TAB> code [<TAB> note]; see hardware/probe/probe_format.h\n"
          << "# driver " << driver << ": " << facts << "\n"
          << "# recorded " << date << "\n"
          << "# " << timing << "\n";
        for (const Record& r : results) f << xmc::probe::format_record(r) << "\n";
        f.close();
        if (!f) {
            std::fprintf(stderr, "xmc_cuda_probe: error writing '%s'\n", out_path.c_str());
            return 2;
        }
        if (strict) {
            Recording back;
            std::string err;
            if (!xmc::probe::read_recording(out_path, back, err)) {
                std::fprintf(stderr, "xmc_cuda_probe: written file does not parse: %s\n", err.c_str());
                status = 1;
            } else {
                for (const Record& r : results)
                    if (xmc::probe::find_record(back, r.name) == nullptr) {
                        std::fprintf(stderr, "xmc_cuda_probe: case %s missing from %s\n", r.name.c_str(),
                                     out_path.c_str());
                        status = 1;
                    }
                if (back.records.size() != results.size()) {
                    std::fprintf(stderr, "xmc_cuda_probe: %s holds %zu cases, %zu ran\n", out_path.c_str(),
                                 back.records.size(), results.size());
                    status = 1;
                }
            }
        }
    }

    if (strict && (crashes > 0 || leaks > 0)) {
        std::fprintf(stderr, "xmc_cuda_probe: %d case(s) crashed, timed out or failed set-up; %d leaked\n",
                     crashes, leaks);
        status = 1;
    }

    if (!replay_path.empty()) {
        int mismatches = 0, accepted = 0, skipped = 0, unrecorded = 0;
        for (const Record& r : results) {
            const Record* want = xmc::probe::find_record(recorded, r.name);
            const Case* c = nullptr;
            for (const Case& k : cases())
                if (r.name == k.name) c = &k;
            if (want == nullptr) {
                ++unrecorded;
                std::printf("NOT RECORDED %s: got %s %lld (not compared)\n", r.name.c_str(), r.result.c_str(),
                            static_cast<long long>(r.code));
                continue;
            }
            if (want->result == "skipped" || r.result == "skipped") {
                ++skipped;
                continue;
            }
            if (want->result == r.result && want->code == r.code) continue;
            if (is_fake && c != nullptr && c->fake_may_answer != nullptr && r.result == c->fake_may_answer) {
                ++accepted;
                std::printf("ACCEPTED %s: recorded %s %lld, the fake answered %s (allowed for this case)\n",
                            r.name.c_str(),
                            want->result.c_str(), static_cast<long long>(want->code), r.result.c_str());
                continue;
            }
            ++mismatches;
            std::printf("MISMATCH %s: recorded %s %lld (%s line %d), got %s %lld%s%s\n", r.name.c_str(),
                        want->result.c_str(), static_cast<long long>(want->code), replay_path.c_str(),
                        want->line, r.result.c_str(), static_cast<long long>(r.code),
                        r.note.empty() ? "" : " -- ", r.note.c_str());
        }
        if (only.empty()) {
            for (const Record& w : recorded.records) {
                bool known = false;
                for (const Case& k : cases()) known = known || w.name == k.name;
                if (!known) {
                    ++mismatches;
                    std::printf("MISMATCH %s: recorded (line %d) but unknown to this probe\n", w.name.c_str(),
                                w.line);
                }
            }
        }
        std::printf("replay: %zu cases, %d mismatches, %d accepted (fake differs by design), %d skipped, "
                    "%d not recorded, %d leaked\n",
                    results.size(), mismatches, accepted, skipped, unrecorded, leaks);
        if (mismatches > 0 || leaks > 0) status = 1;
    }
    return status;
}
