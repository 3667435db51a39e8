// xmc_cuda_probe: records how a CUDA driver answers a FIXED list of call
// sequences ("cases"), mostly misuse, so the fake driver (fakes/cuda) can be
// checked against the real one.
//
//   xmc_cuda_probe [--driver PATH] [--out FILE] [--replay FILE] [--case NAME]...
//                  [--strict] [--timeout SECONDS] [--list]
//
//   --driver PATH   the driver library to dlopen (default libcuda.so.1)
//   --out FILE      write the recording (format: probe_format.h) to FILE
//   --replay FILE   compare every case with FILE; exit 1 on any mismatch
//   --case NAME     run only this case (repeatable)
//   --strict        exit 1 when a case crashed, timed out, failed its set-up,
//                   or (on the fake) left live objects in the fake's ledger;
//                   with --out, also re-read the file and check every case
//                   that ran is in it exactly once
//   --timeout S     per-case time limit (default 30 s)
//   --list          print the case names and what each does, then exit
//
// Each case runs in its own forked child that dlopens the driver, calls cuInit,
// runs the case and cleans up what it created, so a case that crashes or
// hangs (a driver call from a host callback may deadlock) cannot disturb the
// others. The parent never loads the driver. The result line of every case is
// printed to stdout and, with --out, written to the file.
//
// The cases and the loading of the driver are in probe_cases.cpp; this file
// runs them and writes or replays the recording (probe_format.h). Entry points
// are resolved by the versioned names that cuda.h maps the plain names to
// (cuMemAlloc -> cuMemAlloc_v2, ...): XMC_PROBE_SYM(cuMemAlloc) stringifies the
// macro-expanded name, so the probe asks for exactly what a program compiled
// against this cuda.h would link to. Only cuda.h's types are used; nothing is
// linked from the CUDA toolkit.
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
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

ChildResult run_case(const Case& c, const std::string& driver_path, int timeout_s) {
    ChildResult cr;
    int fds[2];
    if (pipe(fds) != 0) {
        cr.o = word("NO_RESULT", -1, std::string("pipe: ") + std::strerror(errno));
        return cr;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        cr.o = word("NO_RESULT", -1, std::string("fork: ") + std::strerror(errno));
        return cr;
    }
    if (pid == 0) {
        close(fds[0]);
        int st = run_child(c, driver_path, fds[1]);
        close(fds[1]);
        _exit(st);  // skip the driver's and the runtime's exit handlers' surprises
    }
    close(fds[1]);
    std::string buf;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool timed_out = false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd pf{fds[0], POLLIN, 0};
        int pr = poll(&pf, 1, static_cast<int>(left > 1000 ? 1000 : left));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        char tmp[1024];
        ssize_t n = read(fds[0], tmp, sizeof tmp);
        if (n <= 0) break;  // EOF: the child is done (or dead)
        buf.append(tmp, static_cast<size_t>(n));
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        cr.o = word("TIMEOUT", -1, "no result within " + std::to_string(timeout_s) + " s");
        return cr;
    }
    // parse "result \t code \t leak \t note \n"
    std::vector<std::string> f;
    std::string cur;
    for (char ch : buf) {
        if (ch == '\t' && f.size() < 3) {
            f.push_back(cur);
            cur.clear();
        } else if (ch != '\n') {
            cur.push_back(ch);
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
                 "                      [--strict] [--timeout SECONDS] [--list]\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::string driver = "libcuda.so.1", out_path, replay_path;
    std::set<std::string> only;
    bool strict = false, list = false;
    int timeout_s = 30;
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
        else if (a == "--timeout") {
            std::string v = need("seconds");
            timeout_s = std::atoi(v.c_str());
            if (timeout_s <= 0 || timeout_s > 3600) {
                std::fprintf(stderr, "xmc_cuda_probe: bad --timeout '%s'\n", v.c_str());
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

    std::vector<Record> results;
    int crashes = 0, leaks = 0;
    for (const Case& c : cases()) {
        if (!only.empty() && only.count(c.name) == 0) continue;
        ChildResult cr = run_case(c, driver, timeout_s);
        Record r;
        r.name = c.name;
        r.result = cr.o.result;
        r.code = cr.o.code;
        r.note = cr.o.note;
        if (cr.leak) ++leaks;
        if (is_verdict(r.result)) ++crashes;
        std::printf("%s\n", xmc::probe::format_record(r).c_str());
        std::fflush(stdout);
        results.push_back(std::move(r));
    }

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
          << "# recorded " << date << "\n";
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
