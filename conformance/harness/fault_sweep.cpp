// The fault-sweep engine (fault_sweep.hpp): the sites of a scenario, the child
// processes that run it once per site, and what each run must leave behind.
#include "fault_sweep.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

extern char **environ;

namespace xmc::conformance {
namespace {

// ---- the fakes' call counters and fault grammar -----------------------------

// Every entry point each fake counts calls of (the tables of
// fakes/cuda/fake_cuda_faults.cpp and fakes/level_zero/fake_ze_state.cpp).
// The clean run checks that they account for every call the fake counted, so
// an entry point missing here cannot hide a site from the sweep.
const char *const kCudaEntries[] = {
    "cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString", "cuGetProcAddress",
    "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid", "cuDeviceTotalMem",
    "cuDeviceGetAttribute", "cuDeviceGetPCIBusId", "cuDeviceCanAccessPeer", "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxGetState", "cuCtxCreate", "cuCtxDestroy", "cuCtxSetCurrent",
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxSynchronize",
    "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess", "cuMemAlloc", "cuMemFree", "cuMemGetInfo",
    "cuMemHostRegister", "cuMemHostUnregister", "cuMemHostGetDevicePointer", "cuMemHostGetFlags",
    "cuPointerGetAttribute", "cuStreamCreate", "cuStreamDestroy", "cuStreamSynchronize", "cuStreamQuery",
    "cuStreamWaitEvent", "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
    "cuEventDestroy", "cuEventElapsedTime", "cuLaunchHostFunc", "cuMemcpyAsync", "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpy2DAsync", "cuMemcpy3DAsync", "cuMemcpyPeerAsync", "cuMemcpy3DPeerAsync",
    "cuMemsetD8Async", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemsetD8",
    "cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
    "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAccess", "cuStreamWaitValue32", "cuStreamWriteValue32",
    // Host allocations, stream capture and graphs, and the IPC path's sharing (only processes of
    // their own make these: the sweep between processes missed them all until it checked the total).
    "cuMemAllocHost", "cuMemHostAlloc", "cuMemFreeHost", "cuStreamBeginCapture", "cuStreamEndCapture",
    "cuStreamIsCapturing", "cuStreamGetCaptureInfo", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
    "cuGraphExecDestroy", "cuGraphDestroy", "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle",
    "cuMemRetainAllocationHandle", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle"};

const char *const kZeEntries[] = {
    "zeInit", "zeDriverGet", "zeDriverGetApiVersion", "zeDriverGetProperties", "zeDriverGetExtensionProperties",
    "zeDeviceGet", "zeDeviceGetProperties", "zeDeviceGetMemoryProperties", "zeDeviceGetCommandQueueGroupProperties",
    "zeContextCreate", "zeContextCreateEx", "zeContextDestroy", "zeMemAllocHost", "zeMemAllocDevice", "zeMemFree",
    "zeMemGetAllocProperties", "zeMemGetAddressRange", "zeVirtualMemReserve", "zeVirtualMemFree",
    "zeVirtualMemQueryPageSize", "zeVirtualMemMap", "zeVirtualMemUnmap", "zeVirtualMemSetAccessAttribute",
    "zeVirtualMemGetAccessAttribute", "zePhysicalMemCreate", "zePhysicalMemDestroy", "zeCommandQueueCreate",
    "zeCommandQueueDestroy", "zeCommandQueueExecuteCommandLists", "zeCommandQueueSynchronize",
    "zeCommandListCreate", "zeCommandListCreateImmediate", "zeCommandListDestroy", "zeCommandListClose",
    "zeCommandListReset", "zeCommandListAppendMemoryCopy", "zeCommandListAppendMemoryCopyRegion",
    "zeCommandListAppendBarrier", "zeCommandListAppendSignalEvent", "zeCommandListAppendWaitOnEvents",
    "zeEventPoolCreate", "zeEventPoolDestroy", "zeEventCreate", "zeEventDestroy", "zeEventHostSignal",
    "zeEventHostSynchronize", "zeEventQueryStatus", "zeEventHostReset", "zesDeviceEnumMemoryModules",
    "zesMemoryGetProperties", "zesMemoryGetState"};

} // namespace

bool resolve_hooks(const DriverControl &c, FakeHooks *h, std::string *why) {
    void *lib = dlopen(c.library.c_str(), RTLD_NOW | RTLD_NOLOAD);  // only the driver already loaded
    if (lib) h->call_count = reinterpret_cast<uint64_t (*)(const char *)>(dlsym(lib, "xmc_fake_cuda_call_count"));
    if (h->call_count) {
        h->cuda = true;
        h->entries.assign(std::begin(kCudaEntries), std::end(kCudaEntries));
        h->code = 999;  // CUDA_ERROR_UNKNOWN
        h->code_name = "CUDA_ERROR_UNKNOWN";
        return true;
    }
    if (lib) h->call_count = reinterpret_cast<uint64_t (*)(const char *)>(dlsym(lib, "xmc_fake_ze_call_count"));
    if (h->call_count) {
        h->entries.assign(std::begin(kZeEntries), std::end(kZeEntries));
        h->code = 0x7ffffffe;  // ZE_RESULT_ERROR_UNKNOWN
        h->code_name = "ZE_RESULT_ERROR_UNKNOWN";
        return true;
    }
    *why = "the driver '" + c.library + "' has fault injection but no call counters to sweep with";
    return false;
}

namespace {

// ---- the child: sweeping, and reporting line by line ------------------------

constexpr const char *kReportEnv = "XMC_FAULT_SWEEP_REPORT";  // set in the child: where to report
constexpr const char *kFirstEnv = "XMC_FAULT_SWEEP_FIRST";    // the first site the child sweeps

// The report is a file of lines "<kind> <site index> <text>", appended and
// flushed one by one so the parent knows how far a child that died got.
class Report {
public:
    explicit Report(const char *path) : fd_(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
    ~Report() {
        if (fd_ >= 0) ::close(fd_);
    }
    void line(const char *kind, long site, const std::string &text = "") {
        std::string l = std::string(kind) + " " + std::to_string(site) + " ";
        for (char c : text) l += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
        l += "\n";
        if (fd_ >= 0 && ::write(fd_, l.data(), l.size()) < 0) std::perror("fault sweep report");
    }

private:
    int fd_;
};

// What one run left: the problems of its checks, then a clean ledger and a
// backend that tracks nothing. Returns false when the driver or the backend
// keeps something (the next runs could not start clean).
bool finish_run(Run &r, const SweepEnv &env, size_t reclaimed_before, std::vector<std::string> *problems) {
    env.control->set_faults("");
    *problems = r.problems;
    bool clean = true;
    if (size_t live = env.control->live_objects(); live != 0) {
        problems->push_back("after close the driver still holds " + std::to_string(live) + " object(s):\n" +
                            env.control->ledger_text());
        clean = false;
    }
    if (env.control->reclaimed_objects) {
        if (size_t n = env.control->reclaimed_objects() - reclaimed_before; n != 0)
            problems->push_back(std::to_string(n) + " object(s) the backend did not release were freed only " +
                                "with their context (a leak while any other instance keeps the context)");
    }
    // The backend's own records, through a fresh instance (no driver call).
    xmc_instance *probe = nullptr;
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    if (env.api->open(&params, &probe) != XMC_OK) {
        problems->push_back("open after the run failed");
        return false;
    }
    for (size_t i = 0; i < env.arena_pages; ++i) {
        xmc_reg_info q{};
        if (env.api->reg_query(probe, env.page(i), &q) == XMC_OK && q.registered) {
            problems->push_back("the backend still tracks a registration at arena page " + std::to_string(i));
            clean = false;
            break;
        }
    }
    xmc_pin_stats ps{};
    if (env.has(XMC_CAP_PIN) && env.api->pin_stats(probe, &ps) == XMC_OK && ps.blocks_now != 0) {
        problems->push_back("the backend still holds " + std::to_string(ps.blocks_now) + " pinned block(s)");
        clean = false;
    }
    env.api->close(probe);
    return clean;
}

// A clean run's sites in the swept steps; false (reported) when the run was not clean.
bool clean_sites(const SweepEnv &env, const Scenario &sc, const std::set<std::string> &swept, Report &out,
                 std::vector<Site> *sites) {
    const size_t reclaimed = env.control->reclaimed_objects ? env.control->reclaimed_objects() : 0;
    Run r(env, nullptr, sc.options);
    r.recording = true;
    sc.body(r);
    r.finish_recording();
    std::vector<std::string> problems;
    const bool clean = finish_run(r, env, reclaimed, &problems);
    for (const auto &p : problems) out.line("fail", -1, "the run without a fault: " + p);
    if (!problems.empty() || !clean) return false;
    for (size_t k = 0; k + 1 < r.marks.size(); ++k) {
        const std::string &step = r.marks[k].first;
        if (!swept.count(step.substr(0, step.find(' ')))) continue;  // the step's first word
        for (const auto &[entry, after] : r.marks[k + 1].second) {
            const auto &at = r.marks[k].second;
            const uint64_t from = at.count(entry) ? at.at(entry) : 0;
            const uint64_t base = r.start().count(entry) ? r.start().at(entry) : 0;
            for (uint64_t n = from + 1; n <= after; ++n) sites->push_back(Site{entry, n - base, step, k});
        }
    }
    return true;
}

// Calls per entry point among sites.
Counts per_entry(const std::vector<Site> &sites) {
    Counts c;
    for (const Site &s : sites) ++c[s.entry];
    return c;
}

// The sites but for the calls of a timing-dependent entry point past its kTimingSitesPerStep-th
// in one step.
constexpr uint64_t kTimingSitesPerStep = 3;
std::vector<Site> first_timing_calls(const std::vector<Site> &sites, const SweepOptions &o) {
    std::vector<Site> kept;
    std::map<std::pair<size_t, std::string>, uint64_t> seen;  // (step, entry) -> calls kept
    for (const Site &s : sites)
        if (!o.timing_dependent.count(s.entry) || ++seen[{s.mark, s.entry}] <= kTimingSitesPerStep)
            kept.push_back(s);
    return kept;
}

// Why the test skips this site ("" : it does not).
std::string skip_reason(const SweepOptions &o, const Site &site) {
    for (const auto &k : o.skipped)
        if (k.entry == site.entry && site.step.rfind(k.step_prefix, 0) == 0) return k.why;
    return "";
}

// Runs in the child: the clean runs, then one run per site from `first` on.
void child_sweep(const SweepEnv &env, const Scenario &sc, const std::set<std::string> &swept,
                 const SweepOptions &options, Report &out, long first) {
    if (size_t live = env.control->live_objects(); live != 0) {
        out.line("fail", -1, "the driver holds " + std::to_string(live) + " object(s) before the sweep:\n" +
                                 env.control->ledger_text());
        return;
    }
    // 1. The clean run: its calls, step by step; and a second one, whose
    //    calls per entry point must be the same but for the entry points the
    //    test declares timing-dependent.
    std::vector<Site> sites, again;
    if (!clean_sites(env, sc, swept, out, &sites)) return;
    if (first == 0) {  // a child that goes on after another's site has compared them already
        if (!clean_sites(env, sc, swept, out, &again)) return;
        const Counts a = per_entry(sites), b = per_entry(again);
        std::set<std::string> entries;
        for (const auto &[e, n] : a) entries.insert(e);
        for (const auto &[e, n] : b) entries.insert(e);
        for (const std::string &e : entries) {
            const uint64_t na = a.count(e) ? a.at(e) : 0, nb = b.count(e) ? b.at(e) : 0;
            if (na != nb && !options.timing_dependent.count(e))
                out.line("fail", -1, "two runs without a fault made " + std::to_string(na) + " and " +
                                         std::to_string(nb) + " calls of " + e + " in the swept steps: its sites " +
                                         "depend on timing (the test must make the scenario deterministic, or " +
                                         "declare the entry point timing-dependent and say why)");
        }
    }
    // A timing-dependent entry point is swept at its first calls in each step only: a later poll
    // of the same event fails the same code path, and the number of polls grows with the
    // machine's load (on a busy 2-core CI machine the sweep of a slot scenario doubled its sites
    // and ran past its test's timeout).
    sites = first_timing_calls(sites, options);
    out.line("sites", static_cast<long>(sites.size()));
    // 2. One run per site.
    for (long i = first; i < static_cast<long>(sites.size()); ++i) {
        const Site &site = sites[static_cast<size_t>(i)];
        const bool timing = options.timing_dependent.count(site.entry) > 0;
        out.line("site", i, site.name());
        if (const std::string why = skip_reason(options, site); !why.empty()) {
            out.line("skipped", i, site.name() + ": " + why);
            out.line("end", i);
            continue;
        }
        // A run held up by the machine before the fault was reached tested nothing: it runs again,
        // at most kTimingReruns times (the scenario may lengthen its timeouts by r.attempt); a bug
        // that times out before the fault does so every time and is reported.
        constexpr int kTimingReruns = 2;
        std::vector<std::string> problems;
        bool clean = true, recovered = false, unreached = false;
        for (int attempt = 0;; ++attempt) {
            const size_t reclaimed = env.control->reclaimed_objects ? env.control->reclaimed_objects() : 0;
            Run r(env, &site, sc.options);
            r.attempt = attempt;
            sc.body(r);
            unreached = !r.fired() && timing;
            if (!r.fired() && !timing) r.problem("the injected call was never made: the run took another path than the clean run");
            recovered = r.fired() && !r.reported();
            clean = finish_run(r, env, reclaimed, &problems);
            if (!clean || !r.timed_out_before_fault() || attempt == kTimingReruns) break;
        }
        if (unreached) out.line("unreached", i, site.name());
        for (const auto &p : problems)
            out.line("fail", i, site.name() + (recovered ? " (no call reported it)" : "") + ": " + p);
        if (recovered && problems.empty()) out.line("recovered", i, site.name());
        out.line("end", i);
        if (!clean) {
            out.line("dirty", i);  // the parent goes on from the next site in a fresh process
            std::_Exit(3);
        }
    }
    out.line("done", 0);
}

// ---- the parent: the child processes, crashes and hangs ---------------------

struct SweepOutcome {
    long sites = -1;
    std::vector<std::string> failures;
    std::vector<std::string> recovered;
    std::vector<std::string> skipped;    // with the test's reason
    std::vector<std::string> unreached;  // timing-dependent sites with no j-th call in their run
};

std::string unescape(const std::string &s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            o += s[i + 1] == 'n' ? '\n' : s[i + 1];
            ++i;
        } else {
            o += s[i];
        }
    }
    return o;
}

// The end of the child's output, without gtest's own banner lines; "" if
// nothing else is there.
std::string tail_of(const std::string &path, size_t n) {
    std::ifstream in(path);
    std::string s;
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line.rfind("Note: Google Test filter", 0) != 0 && line.rfind("[==", 0) != 0 &&
            line.rfind("[--", 0) != 0 && line.rfind("[ RUN", 0) != 0)
            s += line + "\n";
    return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// Runs the sweep in children of this binary until every site is swept.
SweepOutcome parent_sweep(const std::string &backend, const std::string &test) {
    constexpr auto kNoProgress = std::chrono::seconds(5);  // a site is milliseconds; this is a hang
    constexpr int kMaxChildren = 64;
    SweepOutcome o;
    char dir[] = "/tmp/xmc-fault-sweep-XXXXXX";
    if (!mkdtemp(dir)) {
        o.failures.push_back("cannot create a temporary directory for the sweep's report");
        return o;
    }
    const std::string report = std::string(dir) + "/report", log = std::string(dir) + "/child.log";
    long first = 0;
    for (int child = 0; child < kMaxChildren; ++child) {
        // The environment and arguments are built before fork: the child only
        // execs. gtest's own variables stay out (a shard setting would skip
        // the one test the child runs).
        std::vector<std::string> env_strings;
        for (char **e = environ; *e; ++e)
            if (std::strncmp(*e, "XMC_FAULT_SWEEP_", 16) != 0 && std::strncmp(*e, "GTEST_", 6) != 0)
                env_strings.push_back(*e);
        env_strings.push_back(std::string(kReportEnv) + "=" + report);
        env_strings.push_back(std::string(kFirstEnv) + "=" + std::to_string(first));
        std::vector<std::string> args = {"xmc", "run", "--backend", backend, "--gtest_filter=" + test};
        std::vector<char *> envp, argv;
        for (auto &s : env_strings) envp.push_back(s.data());
        for (auto &s : args) argv.push_back(s.data());
        envp.push_back(nullptr);
        argv.push_back(nullptr);
        ::unlink(report.c_str());
        const int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const pid_t pid = fork();
        if (pid == 0) {
            if (logfd >= 0) {
                dup2(logfd, 1);
                dup2(logfd, 2);
            }
            execve("/proc/self/exe", argv.data(), envp.data());
            _exit(127);
        }
        if (logfd >= 0) ::close(logfd);
        if (pid < 0) {
            o.failures.push_back("fork failed");
            break;
        }
        // Follow the report while the child runs; a child without progress is killed.
        long running = -1;
        std::string running_name, pending;
        bool done = false, hung = false;
        long dirty_at = -1;  // a run that left something behind: the child stopped after it
        size_t offset = 0;
        auto last = std::chrono::steady_clock::now();
        int status = 0;
        auto read_report = [&] {
            std::ifstream in(report);
            if (!in) return;
            in.seekg(static_cast<std::streamoff>(offset));
            std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            offset += chunk.size();
            pending += chunk;
            for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
                const std::string line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                last = std::chrono::steady_clock::now();
                std::istringstream ls(line);
                std::string kind;
                long site = 0;
                ls >> kind >> site;
                std::string text;
                std::getline(ls, text);
                if (!text.empty() && text[0] == ' ') text.erase(0, 1);
                text = unescape(text);
                if (kind == "sites") o.sites = site;
                else if (kind == "site") { running = site; running_name = text; }
                else if (kind == "end") running = -1;
                else if (kind == "fail") o.failures.push_back(site < 0 ? text : "site " + std::to_string(site) + ": " + text);
                else if (kind == "recovered") o.recovered.push_back(text);
                else if (kind == "skipped") o.skipped.push_back(text);
                else if (kind == "unreached") o.unreached.push_back(text);
                else if (kind == "dirty") dirty_at = site;
                else if (kind == "done") done = true;
            }
        };
        for (;;) {
            const pid_t w = waitpid(pid, &status, WNOHANG);
            read_report();
            if (w == pid) break;
            if (std::chrono::steady_clock::now() - last > kNoProgress) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                read_report();
                hung = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (done) break;
        std::string how = hung ? "hung (no progress for 5 s)"
                          : WIFSIGNALED(status) ? std::string("crashed: ") + strsignal(WTERMSIG(status))
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
        if (running >= 0) {
            const std::string tail = tail_of(log, 1500);
            o.failures.push_back("site " + std::to_string(running) + ": " + running_name + ": the run " + how +
                                 (tail.empty() ? "" : "; the child's output ends:\n" + tail));
            first = running + 1;
        } else if (dirty_at >= 0) {
            first = dirty_at + 1;  // its failure is reported; go on after it
        } else {
            if (o.failures.empty())
                o.failures.push_back("the sweep's child process " + how + " before sweeping; its output ends:\n" +
                                     tail_of(log, 1500));
            break;
        }
        if (o.sites >= 0 && first >= o.sites) break;
        if (child + 1 == kMaxChildren) o.failures.push_back("gave up after " + std::to_string(kMaxChildren) + " child processes");
    }
    ::unlink(report.c_str());
    ::unlink(log.c_str());
    ::rmdir(dir);
    return o;
}

} // namespace

// ---- the fixture ------------------------------------------------------------

void FaultSweep::SetUp() {
    BackendTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    std::string why;
    control_ = driver_control(api, &why);
    if (!control_) XMC_SKIP(SkipKind::Unsupported, why);
    if (!resolve_hooks(*control_, &hooks_, &why)) XMC_SKIP(SkipKind::Unsupported, why);
    ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
    if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
}

void FaultSweep::sweep(const Scenario &sc, const std::set<std::string> &swept, const SweepOptions &options) {
    if (const char *report = std::getenv(kReportEnv)) {
        // The child: no instance may stay open, so that contexts are
        // created and released inside every run.
        EXPECT_EQ(api->close(inst), XMC_OK);
        inst = nullptr;
        SweepEnv env;
        env.api = api;
        env.control = control_;
        env.hooks = &hooks_;
        env.devices = devices_;
        env.arena_pages = 8 * static_cast<size_t>(std::max<int32_t>(devices_, 4));
        void *arena = mmap(nullptr, env.arena_pages * page_size(), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(arena, MAP_FAILED);
        env.arena = static_cast<char *>(arena);
        Report out(report);
        const char *first = std::getenv(kFirstEnv);
        child_sweep(env, sc, swept, options, out, first ? std::atol(first) : 0);
        munmap(arena, env.arena_pages * page_size());
        return;
    }
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string test = std::string(info->test_suite_name()) + "." + info->name();
    const SweepOutcome o = parent_sweep(GetParam(), test);
    std::string steps;
    for (const auto &s : swept) steps += (steps.empty() ? "" : ",") + s;
    RecordProperty("fault_sweep_sites", static_cast<int>(o.sites));
    RecordProperty("fault_sweep_skipped", static_cast<int>(o.skipped.size()));
    RecordProperty("fault_sweep_unreached", static_cast<int>(o.unreached.size()));
    std::printf("fault sweep: %s %s (%s): %ld sites", api->name, sc.name, steps.c_str(), o.sites);
    if (!options.timing_dependent.empty() || !o.skipped.empty())
        std::printf(" (%zu skipped, %zu timing-dependent not reached)", o.skipped.size(), o.unreached.size());
    std::printf("\n");
    for (const auto &[e, why] : options.timing_dependent)
        std::printf("fault sweep: %s %s: %s is timing-dependent: %s\n", api->name, sc.name, e.c_str(), why.c_str());
    for (const auto &k : o.skipped) std::printf("fault sweep: %s %s: skipped %s\n", api->name, sc.name, k.c_str());
    if (!o.unreached.empty()) {
        std::printf("fault sweep: %s %s: not reached (no such call in that run):", api->name, sc.name);
        for (const auto &u : o.unreached) std::printf(" [%s]", u.c_str());
        std::printf("\n");
    }
    if (!o.recovered.empty()) {
        std::printf("fault sweep: %s %s: %zu site(s) recovered without reporting an error:\n", api->name, sc.name,
                    o.recovered.size());
        for (const auto &r : o.recovered) std::printf("  %s\n", r.c_str());
    }
    std::fflush(stdout);
    EXPECT_GT(o.sites, 0) << "the scenario made no driver call in the swept steps (" << steps << ")";
    constexpr size_t kShown = 25;
    for (size_t i = 0; i < o.failures.size() && i < kShown; ++i) ADD_FAILURE() << "fault sweep: " << o.failures[i];
    if (o.failures.size() > kShown) ADD_FAILURE() << "fault sweep: and " << o.failures.size() - kShown << " more";
}

} // namespace xmc::conformance
