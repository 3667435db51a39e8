// The fault sweep (SPEC 7, the fakes): for every driver call that the
// registration, pinning, copy, open-to-close, slot and transfer scenarios
// make, one run of the scenario in which exactly that call fails. The
// scenarios and their tests are in the files of their requirements
// (test_register.cpp, test_pin_methods.cpp, test_copy.cpp,
// test_vmm_fault_sweep.cpp, test_transfer_paths.cpp); this is the engine they share. Every run must
//   - not crash (and not hang);
//   - report the failure cleanly: the xmc call that met it answers a non-OK
//     status (XMC_ERR_DRIVER) whose detail carries the injected native code
//     and names the call, or the backend recovers so that nothing is wrong
//     afterwards (such sites are listed on stdout, not failed);
//   - leave the fake's ledger empty once the scenario's own cleanup and close
//     ran: no live object, and none that the driver had to reclaim with a
//     context (a clean program does not rely on that);
//   - leave the backend in a state the model allows: what failed to register
//     is not tracked (REG-FAIL), what failed to unregister still is, and a
//     retry removes it (REG-UNREG-FAIL), a block whose registration failed is
//     lock-only and says why with the driver's code (PIN-DEVICE), copies that
//     reported success wrote exactly the described bytes (COPY-STRIDED), and
//     afterwards nothing is registered or pinned.
//
// How the sites are found and hit:
//   1. A clean run of the scenario counts, with the fake's call counters, the
//      calls of every entry point made during each step (one step per xmc
//      call, named after it).
//   2. A site is "the j-th call of entry point E", for the calls made in the
//      steps the test sweeps (a test sweeps the steps of its own
//      requirement). The run for a site installs the one-shot fault "fail the
//      j-th call of E with a generic driver error" (CUDA_ERROR_UNKNOWN,
//      ZE_RESULT_ERROR_UNKNOWN). Counting per entry point gives exactly the
//      sites of "fail the k-th call, whatever it is" (fail:*:CODE@K), each
//      with a name.
//   3. The runs happen in a child process: this binary again (`xmc run` on
//      this one test, told by XMC_FAULT_SWEEP_REPORT to sweep and report).
//      A crash or a hang is reported with its site, and a fresh child goes on
//      from the next site; so does a run that leaves driver objects behind,
//      so every site starts from an empty ledger. A fresh process, not a
//      fork: the fake CUDA driver refuses every call in a forked child.
//   4. Calls made on other threads count like the caller's: a slot worker's
//      or a rank's. Their order across threads may change from run to run,
//      and so may the number of calls of an entry point that a thread makes
//      while it polls (the slot workers' watcher polls events until copies
//      finish). So the clean run is made twice: an entry point whose calls
//      in the swept steps differ between the two is an error unless the test
//      declares it timing-dependent, with the reason (SweepOptions). A site
//      of such an entry point fails whichever call is the j-th this time; a
//      run in which there is no j-th is listed as not reached, not failed.
//      A site a test cannot check is skipped by name with its reason, and
//      listed. A step of calls made on worker threads is the step in which
//      the clean run counted them.
#pragma once
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace xmc::conformance {

using Counts = std::map<std::string, uint64_t>;  // entry point -> calls (entries never called are absent)

// What the sweep needs of a fake beyond DriverControl: its call counters and
// how to say "fail the j-th call of E" in its fault grammar.
struct FakeHooks {
    bool cuda = false;
    uint64_t (*call_count)(const char *entry) = nullptr;  // NULL entry: every call
    std::vector<std::string> entries;
    int64_t code = 0;       // the native code every injected fault returns
    const char *code_name = "";

    Counts counts() const {
        Counts c;
        for (const auto &e : entries)
            if (uint64_t n = call_count(e.c_str())) c[e] = n;
        return c;
    }
    std::string fail_call(const std::string &entry, uint64_t j) const {
        // Both fakes take fail:ENTRY:CODE@K (fakes/README.md).
        return "fail:" + entry + ":" + code_name + "@" + std::to_string(j);
    }
};

// The counters and fault grammar of the fake under `c` (false, with why, when it has none).
bool resolve_hooks(const DriverControl &c, FakeHooks *h, std::string *why);

// What a test says of its sweep's sites (see 4. above): entry points whose
// number of calls depends on timing, and sites it cannot check, each with why.
struct SweepOptions {
    std::map<std::string, std::string> timing_dependent;  // entry point -> why its count varies
    struct Skip {
        std::string entry;        // the entry point
        std::string step_prefix;  // the site's step starts with this ("" : every step)
        std::string why;
    };
    std::vector<Skip> skipped;
};

// One driver call to fail: the j-th call of `entry` since the fault script
// was installed, made by the scenario step `step`.
struct Site {
    std::string entry;
    uint64_t j = 0;
    std::string step;
    size_t mark = 0;  // which of the run's steps (step names repeat)
    std::string name() const { return entry + " #" + std::to_string(j) + " in " + step; }
};

// What every run of a scenario shares, in the child process: memory nothing
// else uses, whose pages a scenario registers.
struct SweepEnv {
    const xmc_backend *api = nullptr;
    const DriverControl *control = nullptr;
    const FakeHooks *hooks = nullptr;
    int32_t devices = 0;
    char *arena = nullptr;  // arena_pages pages from mmap: 8 per device, at least 32
    size_t arena_pages = 0;
    char *page(size_t i) const { return arena + i * page_size(); }
    bool has(xmc_caps cap) const { return (api->capabilities & cap) == cap; }
};

// ---- one run of a scenario --------------------------------------------------

// One run, on an instance of its own, with at most one injected fault. The
// scenario calls step() before each xmc call and passes every status through
// ok(); failures of the checks are collected in `problems`.
class Run {
public:
    Run(const SweepEnv &env, const Site *site, const char *options = nullptr)
        : api(env.api), env_(env), site_(site) {
        // A script the fake refuses would inject nothing, and the run would pass as if the fault were handled.
        const std::string script = site ? env_.hooks->fail_call(site->entry, site->j) : "";
        if (env_.control->set_faults(script.c_str()) != 0)
            problems.push_back("the fake refused the fault script '" + script + "'");
        start_ = env_.hooks->counts();
        start_total_ = env_.hooks->call_count(nullptr);
        besides_contexts_ = env_.control->objects_besides_contexts();
        step("open");
        xmc_open_params params{sizeof(xmc_open_params), options};
        const xmc_status st = api->open(&params, &inst);
        if (st != XMC_OK) {
            // No instance carries the detail of a failed open: the status alone.
            if (!fired() || reported_++ > 0)
                problem("open answered " + std::string(xmc_status_string(st)) + " with no fault to report");
            inst = nullptr;
        }
    }

    const xmc_backend *api;
    xmc_instance *inst = nullptr;
    std::vector<std::string> problems;
    // Clean run: the counts when each step began, to attribute calls to steps.
    std::vector<std::pair<std::string, Counts>> marks;
    bool recording = false;

    int64_t code() const { return env_.hooks->code; }
    const SweepEnv &env() const { return env_; }

    void step(const std::string &name) {
        step_ = name;
        if (recording) marks.emplace_back(name, env_.hooks->counts());
    }
    void problem(const std::string &what) { problems.push_back("step '" + step_ + "': " + what); }
    void check(bool cond, const std::string &what) {
        if (!cond) problem(what);
    }

    // The injected call has been made by now.
    bool fired() const {
        if (!site_) return false;
        auto it = start_.find(site_->entry);
        const uint64_t before = it == start_.end() ? 0 : it->second;
        return env_.hooks->call_count(site_->entry.c_str()) - before >= site_->j;
    }
    // Whether any xmc call reported the injected fault.
    bool reported() const { return reported_ > 0; }
    // A call timed out before the injected call was made: the run was held up by the machine (a
    // loaded CI host misses a short transport timeout), not by the fault, so the site was not
    // tested and the sweep runs it again (child_sweep), with `attempt` counting the reruns so
    // that a scenario may lengthen its timeouts.
    bool timed_out_before_fault() const { return timed_out_early_; }
    int attempt = 0;

    // A call's status: true when OK. A failure must be the one injected fault,
    // reported once, as a driver error carrying its code and naming the call.
    bool ok(xmc_status st, const char *call) {
        if (st == XMC_OK) return true;
        xmc_error_info e{};
        api->last_error(inst, &e);
        return ok_with(st, e, call);
    }
    // ok() of a call made on another thread (a rank's), whose last error that
    // thread read.
    bool ok_with(xmc_status st, const xmc_error_info &e, const char *call) {
        if (st == XMC_OK) return true;
        std::ostringstream got;
        got << call << " answered " << xmc_status_string(st) << " [native " << e.native_code << ", call '" << e.call
            << "'] " << e.message;
        if (!site_) {
            problem(got.str() + " with no fault injected");
        } else if (!fired()) {
            if (st == XMC_ERR_TIMEOUT) timed_out_early_ = true;
            problem(got.str() + " before the injected call was made");
        } else if (reported_++ > 0) {
            problem(got.str() + " after the injected fault was already reported by an earlier call");
        } else if (st != XMC_ERR_DRIVER || e.native_code != code()) {
            problem(got.str() + ": not the injected fault, which is reported as driver_error with native code " +
                    std::to_string(code()));
        } else if (std::strcmp(e.call, call) != 0 || e.message[0] == 0) {
            problem(got.str() + ": the detail must name the call '" + call + "' and say what failed");
        }
        return false;
    }
    // A failure reported in a result instead of a status (pin_alloc's
    // lock-only degradation): counted like ok()'s.
    void reported_in_result(xmc_status st, int64_t native, const char *what) {
        std::ostringstream got;
        got << what << " says " << xmc_status_string(st) << " with native code " << native;
        if (!site_ || !fired()) problem(got.str() + " with no fault injected");
        else if (reported_++ > 0) problem(got.str() + " after the injected fault was already reported");
        else if (st != XMC_ERR_DRIVER || native != code())
            problem(got.str() + ": not the injected fault, which is reported as driver_error with native code " +
                    std::to_string(code()));
    }
    // A call that must succeed: the retry after a reported fault, or a call
    // made after the fault was spent.
    void must_succeed(xmc_status st, const char *call, const char *why) {
        if (st == XMC_OK) return;
        xmc_error_info e{};
        api->last_error(inst, &e);
        problem(std::string(call) + " answered " + xmc_status_string(st) + " [native " + std::to_string(e.native_code) +
                "] " + e.message + " (" + why + ")");
    }

    // A call the state the model gives must refuse with `want` (a probe of
    // that state); not a report of the fault.
    void refused_as(xmc_status want, xmc_status st, const char *call, const char *why) {
        if (st == want) return;
        xmc_error_info e{};
        api->last_error(inst, &e);
        problem(std::string(call) + " answered " + xmc_status_string(st) + " [native " + std::to_string(e.native_code) +
                "] " + e.message + ", not " + xmc_status_string(want) + " (" + why + ")");
    }

    xmc_reg_info reg_query(const void *p) {
        xmc_reg_info q{};
        if (api->reg_query(inst, p, &q) != XMC_OK) problem("reg_query failed");
        return q;
    }
    bool pinned(const void *p, size_t n) {
        xmc_pin_info q{};
        if (api->pin_query(inst, p, n, &q) != XMC_OK) problem("pin_query failed");
        return q.pinned == 1;
    }

    // Closes the instance. A failed close changes nothing (backend.h), so the
    // instance is still open and a retry must close it.
    void close() {
        if (!inst) return;
        step("close");
        if (!ok(api->close(inst), "close")) must_succeed(api->close(inst), "close", "the retry of a failed close");
        inst = nullptr;
    }

    // Clean run: the steps' call counts are complete (every call the fake
    // counted is a call of a listed entry point).
    void finish_recording() {
        marks.emplace_back("end", env_.hooks->counts());
        uint64_t listed = 0;
        for (const auto &[e, n] : marks.back().second) listed += n - (start_.count(e) ? start_.at(e) : 0);
        const uint64_t total = env_.hooks->call_count(nullptr) - start_total_;
        if (listed != total)
            problems.push_back("the fake counted " + std::to_string(total) + " calls but the sweep's entry points " +
                               "account for " + std::to_string(listed) + ": an entry point is missing from its list");
    }
    const Counts &start() const { return start_; }
    // Driver objects other than contexts are as many as before the run (a
    // failed call may leave the context it created, nothing else).
    void check_nothing_but_contexts(const char *what) {
        const size_t now = env_.control->objects_besides_contexts();
        check(now == besides_contexts_, std::string(what) + " left driver objects behind:\n" +
                                            env_.control->ledger_text());
    }

private:
    const SweepEnv &env_;
    const Site *site_;
    std::string step_;
    Counts start_;
    uint64_t start_total_ = 0;
    size_t besides_contexts_ = 0;
    int reported_ = 0;
    bool timed_out_early_ = false;
};

// A scenario: the xmc calls the sweep runs again for each site, each step named
// after its call. Each runs on the Run's instance and ends with r.close(). A
// step that fails is followed by the cleanup a careful caller does (and by the
// checks of the state the model allows); the steps after it are skipped. The
// scenarios are in the test files of their requirements.
struct Scenario {
    const char *name;
    void (*body)(Run &r);
    const char *options = nullptr;  // the open options of the run's instance
};

// Skips where the backend runs over no fake driver with call counters, or
// has no device.
class FaultSweep : public BackendTest {
protected:
    void SetUp() override;

    // Sweeps the sites of the steps named by `swept` (the first word of a
    // step's name: its ABI call, or the phase of the scenario it belongs to).
    void sweep(const Scenario &sc, const std::set<std::string> &swept, const SweepOptions &options = {});

    const DriverControl *control_ = nullptr;
    FakeHooks hooks_;
    int32_t devices_ = 0;
};

} // namespace xmc::conformance
