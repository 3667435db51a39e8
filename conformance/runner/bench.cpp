#include "bench.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <thread>

namespace xmc::conformance {
namespace {

std::string exe_dir() {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    const std::string p(buf);
    return p.substr(0, p.find_last_of('/'));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs one benchmark executable: stdout to `out_path`, stderr to `log_path`,
// with a time limit and a progress display (a live counter on a terminal, a
// line every 30 s otherwise). Returns the exit status; 124 on timeout, 128+N
// when killed by signal N.
int run_child(const std::vector<std::string> &args, const std::string &out_path, const std::string &log_path,
              int timeout_s, const std::string &label) {
    std::printf("%s\n", label.c_str());
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out >= 0) { dup2(out, 1); close(out); }
        if (log >= 0) { dup2(log, 2); close(log); }
        setpgid(0, 0);
        std::vector<char *> argv;
        for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(args[0].c_str(), argv.data());
        std::fprintf(stderr, "cannot run %s: %s\n", args[0].c_str(), std::strerror(errno));
        _exit(127);
    }
    const bool tty = isatty(2);
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0, shown = -1;
    bool timed_out = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        const int s = static_cast<int>(seconds_since(t0));
        if (s >= timeout_s) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = true;
            break;
        }
        if (s != shown && (tty || (s > 0 && s % 30 == 0))) {
            if (tty) std::fprintf(stderr, "\r  running ... %d s ", s);
            else std::printf("  still running after %d s\n", s);
            std::fflush(nullptr);
            shown = s;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (tty) std::fprintf(stderr, "\r%30s\r", "");
    const int rc = timed_out ? 124 : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    std::printf("  done in %.1f s (exit %d%s)\n", seconds_since(t0), rc, timed_out ? ", timed out" : "");
    std::fflush(stdout);
    return rc;
}

// The last non-empty line of a file (a failed benchmark's reason).
std::string last_line(const std::string &path) {
    std::string text, last;
    read_text(path, &text);
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (end > start) last = text.substr(start, end - start);
        start = end + 1;
    }
    return last;
}

// r[k], or null where r has no k (a const json's operator[] on a missing key is undefined).
const json &field(const json &r, const char *k) {
    static const json null;
    const auto it = r.find(k);
    return it == r.end() ? null : *it;
}

json make_row(const std::string &path, const std::string &series, unsigned long long bytes, const std::string &unit,
              double figure, double peak, bool higher, const std::string &requirement, double target) {
    json r = {{"path", path}, {"series", series}, {"bytes", bytes}, {"unit", unit}, {"figure", figure},
              {"higher_is_better", higher}, {"requirement", requirement}, {"target", target}};
    // The ratio is oriented so that 1.0 is the peak and higher is better.
    if (peak > 0 && figure > 0) {
        r["peak"] = peak;
        r["ratio"] = higher ? figure / peak : peak / figure;
    } else {
        r["peak"] = nullptr;
        r["ratio"] = nullptr;
    }
    return r;
}

// A row of paired samples (xmc_gpu_bench: raw and backend taken back to back,
// `samples` pairs): its ratio is the median of the per-pair ratios, not the
// ratio of two medians, and its spread (the quartiles and extremes of the
// per-pair ratios) comes with it. A row without pairs (a peak, the host
// table, a run recorded before pairs) keeps figure/peak and no spread.
void add_spread(const json &src, json *row) {
    if (field(src, "pairs").is_array() && !src["pairs"].empty() && (*row)["ratio"].is_number()) {
        set_pairs(src["pairs"].get<std::vector<double>>(), row);
        return;
    }
    const int n = src.value("samples", 0);
    if (n <= 0 || !field(src, "ratio").is_number() || !(*row)["ratio"].is_number()) return;
    (*row)["ratio"] = field(src, "ratio");
    (*row)["samples"] = n;
    for (const char *k : {"ratio_lo", "ratio_hi", "ratio_min", "ratio_max"})
        if (field(src, k).is_number()) (*row)[k] = field(src, k);
}

// The driver a cuda baseline is for: the NVIDIA kernel module's version
// ("580.95.05") where /proc/driver/nvidia/version gives it, else the CUDA
// driver API version the benchmark read ("cuda 13.0").
std::string cuda_driver_text(int api_version) {
    std::ifstream in("/proc/driver/nvidia/version");
    std::string line;
    if (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_search(line, m, std::regex(R"(Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+))")))
            return m[1];
    }
    return "cuda " + std::to_string(api_version / 1000) + "." + std::to_string(api_version % 1000 / 10);
}

// ---- cuda: xmc_gpu_bench once per transfer size ----------------------------

// The rows of xmc_gpu_bench's JSON, one run per transfer size, merged into
// one table: a row per series (its path without the size) and size.
struct CudaRows {
    std::map<std::pair<std::string, unsigned long long>, json> rows;  // (series, bytes) -> row; later runs win
    std::vector<std::pair<std::string, unsigned long long>> order;

    void add(const json &j, unsigned long long size) {
        const std::regex sized(R"(^(.*) ([0-9]+) (B|KiB|MiB|GiB)$)");
        for (const auto &r : j["rows"]) {
            const std::string path = r.value("path", "");
            const std::string unit = r.value("unit", "");
            std::string series = path;
            unsigned long long n = size;
            std::smatch m;
            const std::string run_size = " " + human_bytes(size);
            if (std::regex_match(path, m, sized)) {
                series = m[1];
                const std::string u = m[3];
                n = std::stoull(m[2]) << (u == "KiB" ? 10 : u == "MiB" ? 20 : u == "GiB" ? 30 : 0);
            } else if (const size_t at = path.find(run_size + " "); at != std::string::npos) {
                // "VMM reload of a remapped slot 16 MiB vs ...": the run's size
                // inside the path; without it the rows of every size are one
                // series, one curve across sizes.
                series = path.substr(0, at) + path.substr(at + run_size.size());
            }
            const auto key = std::make_pair(series, n);
            if (!rows.count(key)) order.push_back(key);
            // Times (ms, us, ns) are better lower; bandwidths (GB/s, and the
            // unit-less rows of an xmc_gpu_transfer_bench before it named its unit) higher.
            const bool time = unit == "ms" || unit == "us" || unit == "ns";
            json row = make_row(path, series, n, unit.empty() ? "GB/s" : unit, r.value("figure", 0.0),
                                r.value("peak", 0.0), !time, r.value("requirement", ""), r.value("target", 0.0));
            add_spread(r, &row);
            row["run_bytes"] = size;  // the xmc_gpu_bench run (--bytes) it came from: where a rerun measures it
            rows[key] = row;
        }
    }
    void flush(json *doc) {
        for (const auto &key : order) (*doc)["rows"].push_back(rows[key]);
    }
};

// One xmc_gpu_bench run at `size`: its JSON in *out, the run recorded in the document. False where
// the benchmark stops the whole bench (no GPU: "skipped"; no readable JSON: "error").
// The benchmark: xmc_gpu_bench beside xmc, or $XMC_GPU_BENCH (bench.judging's stand-in, which needs no GPU).
std::string gpu_bench_exe() {
    const char *e = std::getenv("XMC_GPU_BENCH");
    return e && *e ? e : exe_dir() + "/xmc_gpu_bench";
}

bool run_gpu_bench(const BenchOptions &o, const std::string &logs, unsigned long long size, const std::string &what,
                   const std::string &suffix, json *doc, json *out) {
    const std::string exe = gpu_bench_exe();
    const std::string bytes = std::to_string(size);
    const std::string tag = "gpu-" + bytes + suffix;
    const std::string json_path = logs + "/bench-" + tag + ".json";
    std::remove(json_path.c_str());
    // Registration is timed from 4 KiB up to the transfer size.
    const std::vector<std::string> args = {exe, "--backend", o.backend, "--bytes", bytes, "--reg-max", bytes,
                                           "--json", json_path};
    const std::string log = logs + "/bench-" + tag + ".log";
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_child(args, log, log + ".err", o.timeout_s, what);
    std::string cmd;
    for (const auto &a : args) cmd += (cmd.empty() ? "" : " ") + a;
    json run = {{"command", cmd}, {"exit", rc}, {"seconds", seconds_since(t0)}, {"bytes", size},
                {"log", "logs/bench-" + tag + ".log"}};
    if (rc == 77) {  // no GPU: the reason is its last line
        (*doc)["skipped"] = last_line(log);
        (*doc)["runs"].push_back(run);
        return false;
    }
    std::string text;
    json j = read_text(json_path, &text) ? json::parse(text, nullptr, false) : json();
    if (j.is_discarded() || !j.is_object() || !j.contains("rows")) {
        (*doc)["runs"].push_back(run);
        (*doc)["error"] = "xmc_gpu_bench exited " + std::to_string(rc) + " without readable JSON (" +
                          last_line(log + ".err") + "); see " + log;
        return false;
    }
    if (rc != 0) run["note"] = last_line(log);  // e.g. the data check failed
    run["device"] = j.value("device", "");
    run["driver"] = j.value("driver", 0);
    (*doc)["device"] = j.value("device", "");
    (*doc)["driver"] = cuda_driver_text(j.value("driver", 0));
    run["devices"] = j.value("devices", 0);
    (*doc)["runs"].push_back(run);
    if (rc != 0) (*doc)["error"] = "xmc_gpu_bench exited " + std::to_string(rc) + ": " + last_line(log);
    *out = std::move(j);
    return true;
}

void run_cuda(const BenchOptions &o, const std::string &logs, json *doc) {
    const std::string exe = gpu_bench_exe();
    if (access(exe.c_str(), X_OK) != 0) {
        (*doc)["error"] = "xmc_gpu_bench is not next to xmc (" + exe + "): build the target xmc_gpu_bench "
                          "(it needs the CUDA headers, XMC_CUDA_HEADERS)";
        return;
    }
    std::vector<unsigned long long> sizes = o.sizes;
    if (sizes.empty()) sizes = {16ull << 20, 64ull << 20, 256ull << 20, 1ull << 30};
    CudaRows rows;
    for (size_t k = 0; k < sizes.size(); ++k) {
        char label[160];
        std::snprintf(label, sizeof label, "[%zu/%zu] xmc_gpu_bench, transfers of %s", k + 1, sizes.size(),
                      human_bytes(sizes[k]).c_str());
        json j;
        if (!run_gpu_bench(o, logs, sizes[k], label, "", doc, &j)) return;
        rows.add(j, sizes[k]);
    }
    rows.flush(doc);
}

// ---- host: xmc_bench_pin, and the raw calls as the peak ---------------------

// Pairs per host row: the median's 95% interval is then order statistics 4..12 of 15.
constexpr int kHostPairs = 15;

void run_host(const BenchOptions &o, const std::string &logs, json *doc) {
    // A host baseline is for a CPU model and a kernel.
    {
        std::ifstream in("/proc/cpuinfo");
        std::string model;
        for (std::string line; std::getline(in, line);)
            if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
                model = line.substr(line.find(':') + 1);
                model.erase(0, model.find_first_not_of(' '));
                break;
            }
        struct utsname u{};
        uname(&u);
        (*doc)["device"] = model.empty() ? "unknown CPU" : model;
        (*doc)["driver"] = std::string("Linux ") + u.release;
    }
    const std::string exe = exe_dir() + "/xmc_bench_pin";
    if (access(exe.c_str(), X_OK) != 0) {
        (*doc)["error"] = "xmc_bench_pin is not next to xmc (" + exe + "): build the target xmc_bench_pin";
        return;
    }
    const std::string json_path = logs + "/bench-pin.json";
    std::remove(json_path.c_str());
    // Repetitions of the backend's and the raw calls' benchmarks interleaved at random (Google
    // Benchmark's own remedy for drift between one benchmark and the next): repetition i of
    // each is a pair, as xmc_gpu_bench takes raw and backend in turns.
    const std::vector<std::string> args = {exe, "--benchmark_out=" + json_path, "--benchmark_out_format=json",
                                           "--benchmark_min_time=0.02", "--benchmark_repetitions=" + std::to_string(kHostPairs),
                                           "--benchmark_enable_random_interleaving=true"};
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_child(args, logs + "/bench-pin.log", logs + "/bench-pin.log.err", o.timeout_s,
                             "xmc_bench_pin (Google Benchmark): pin alloc+free beside the raw calls, pin query");
    std::string cmd;
    for (const auto &a : args) cmd += (cmd.empty() ? "" : " ") + a;
    (*doc)["runs"].push_back({{"command", cmd}, {"exit", rc}, {"seconds", seconds_since(t0)}, {"log", "logs/bench-pin.log"}});
    std::string text;
    json j = read_text(json_path, &text) ? json::parse(text, nullptr, false) : json();
    if (rc != 0 || j.is_discarded() || !j.contains("benchmarks")) {
        (*doc)["error"] = "xmc_bench_pin exited " + std::to_string(rc) + " (" + last_line(logs + "/bench-pin.log.err") +
                          "); see logs/bench-pin.log";
        return;
    }
    // name -> the repetitions' figures, by repetition index
    std::map<std::string, std::map<int, json>> reps;
    for (const auto &b : j["benchmarks"]) {
        std::string name = b.value("run_name", b.value("name", ""));
        name = name.substr(0, name.find("/repeats:"));  // BM_PinQuery's Repetitions(1) adds it
        if (b.value("run_type", "iteration") != "iteration") continue;  // Google Benchmark's own aggregates
        if (b.value("error_occurred", false)) {
            (*doc)["rows"].push_back(make_row(name + " (" + b.value("error_message", "error") + ")", name, 0, "", 0, 0,
                                              true, "", 0));
            continue;
        }
        reps[name][b.value("repetition_index", 0)] = b;
    }
    auto median_field = [](const std::map<int, json> &m, const char *k) {
        std::vector<double> v;
        for (const auto &[i, b] : m) v.push_back(b.value(k, 0.0));
        return median_of(v);
    };
    for (const auto &[name, by_rep] : reps) {
        if (name.rfind("BM_PinAllocFree/", 0) != 0) continue;
        const unsigned long long arg = std::stoull(name.substr(name.find('/') + 1));
        const auto raw = reps.find("BM_RawPinAllocFree/" + std::to_string(arg));
        std::vector<double> pairs;  // raw time over the backend's, as bandwidths: backend over raw
        if (raw != reps.end())
            for (const auto &[i, b] : by_rep)
                if (raw->second.count(i) && raw->second.at(i).value("bytes_per_second", 0.0) > 0)
                    pairs.push_back(b.value("bytes_per_second", 0.0) / raw->second.at(i).value("bytes_per_second", 0.0));
        json row = make_row("pin alloc+free " + human_bytes(arg) + " vs raw mlock", "pin alloc+free", arg, "GB/s",
                            median_field(by_rep, "bytes_per_second") / 1e9,
                            raw == reps.end() ? 0 : median_field(raw->second, "bytes_per_second") / 1e9, true, "", 0);
        if (row["ratio"].is_number()) set_pairs(pairs, &row);
        (*doc)["rows"].push_back(row);
    }
    const double query_1k = reps.count("BM_PinQuery/1000") ? median_field(reps["BM_PinQuery/1000"], "real_time") : 0;
    const double query_100k = reps.count("BM_PinQuery/100000") ? median_field(reps["BM_PinQuery/100000"], "real_time") : 0;
    // Query time with 100,000 live blocks against 1,000: at most 5x, the bound
    // of bench.pin_query_scaling (bench/CMakeLists.txt says why 5: a scan is
    // 100x, the cache misses of a 100K-entry index alone measured 3.4-3.8x).
    if (query_1k > 0 || query_100k > 0)
        (*doc)["rows"].push_back(make_row("pin query, 100,000 live blocks vs 1,000", "pin query", 0, "ns",
                                          query_100k, query_1k, false, "", 1.0 / 5));
}

std::string row_verdict(const json &r) { return bench_row_verdict(r); }

// "H2D from pinned (16 MiB)": a row in words.
std::string row_name(const json &r) {
    return r.value("path", "") + (r.value("bytes", 0ull) ? " (" + human_bytes(r["bytes"].get<unsigned long long>()) + ")" : "");
}

std::string fmt(const json &v, const char *f) {
    if (!v.is_number()) return "n/a";
    char s[64];
    std::snprintf(s, sizeof s, f, v.get<double>());
    return s;
}

// "median of 9 paired ratios " or "ratio ", and " (pairs' quartiles 0.95-0.99)".
std::string median_words(const json &r) {
    const int n = r.value("samples", 0);
    return n > 0 ? "median of " + std::to_string(n) + " paired ratios " : "ratio ";
}
std::string spread_words(const json &r) {
    if (r.value("samples", 0) <= 0) return "";
    if (field(r, "median_lo").is_number())
        return " (median's 95% interval " + fmt(field(r, "median_lo"), "%.3f") + "-" + fmt(field(r, "median_hi"), "%.3f") +
               ", pairs' quartiles " + fmt(field(r, "ratio_lo"), "%.3f") + "-" + fmt(field(r, "ratio_hi"), "%.3f") + ")";
    return " (pairs' quartiles " + fmt(field(r, "ratio_lo"), "%.3f") + "-" + fmt(field(r, "ratio_hi"), "%.3f") + ")";
}

} // namespace

RatioSpread ratio_spread(const json &r) {
    RatioSpread s;
    if (!field(r, "ratio").is_number()) return s;
    s.ratio = s.lo = s.hi = field(r, "ratio").get<double>();
    s.samples = r.value("samples", 0);
    if (s.samples > 0 && field(r, "median_lo").is_number() && field(r, "median_hi").is_number()) {
        s.lo = std::min(s.ratio, field(r, "median_lo").get<double>());
        s.hi = std::max(s.ratio, field(r, "median_hi").get<double>());
    } else if (s.samples > 0 && field(r, "ratio_lo").is_number() && field(r, "ratio_hi").is_number()) {
        s.lo = std::min(s.ratio, field(r, "ratio_lo").get<double>());
        s.hi = std::max(s.ratio, field(r, "ratio_hi").get<double>());
    }
    return s;
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void set_pairs(std::vector<double> v, json *row) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    auto quantile = [&](double q) {  // linear between order statistics, as xmc_gpu_bench reports them
        const double at = q * static_cast<double>(n - 1);
        const size_t lo = static_cast<size_t>(at);
        return lo + 1 < n ? v[lo] + (at - static_cast<double>(lo)) * (v[lo + 1] - v[lo]) : v[lo];
    };
    // The distribution-free interval of a median: order statistics j..k (1-based) with
    // j = n/2 - 1.96 sqrt(n)/2 and k = 1 + n/2 + 1.96 sqrt(n)/2, rounded and clamped (about 95%
    // for n >= 6; for fewer pairs, the extremes).
    const double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2;
    const long j = std::max(1L, std::lround(static_cast<double>(n) / 2 - half));
    const long k = std::min(static_cast<long>(n), std::lround(1 + static_cast<double>(n) / 2 + half));
    json &r = *row;
    r["ratio"] = median_of(v);
    r["samples"] = n;
    r["pairs"] = v;
    r["ratio_lo"] = quantile(0.25);
    r["ratio_hi"] = quantile(0.75);
    r["ratio_min"] = v.front();
    r["ratio_max"] = v.back();
    r["median_lo"] = v[static_cast<size_t>(j - 1)];
    r["median_hi"] = v[static_cast<size_t>(k - 1)];
}

Judgement judge(const RatioSpread &s, double threshold) {
    // The median decides which side the row is on; the spread, whether that
    // side is measured or only drawn: an interval across the threshold means
    // another run would likely land on the other side (the H200's granule
    // cycle: 0.765-0.79 in some runs, 0.81-0.88 in others, against 0.80).
    if (s.ratio >= threshold) return s.lo >= threshold ? Judgement::above : Judgement::noisy;
    return s.hi < threshold ? Judgement::below : Judgement::noisy;
}

std::string bench_row_verdict(const json &r) {
    const double target = r.value("target", 0.0);
    // The median of the pairs above 1.05: one lucky pair is not a broken
    // measurement (a 1 MiB registration at 1.08 of its raw calls in one sample);
    // and, as a target, only beyond the pairs' spread: quartiles across 1.05 are
    // noisy (an H100's 16 MiB device copy at 1.060 with quartiles 0.897-1.096, its
    // L2-sized copies swinging either way, failed a correct backend as broken).
    if (field(r, "ratio").is_number() && field(r, "ratio").get<double>() > kBrokenAbove)
        return judge(ratio_spread(r), kBrokenAbove) == Judgement::above ? "broken" : "noisy";
    if (target <= 0) return "ok";
    if (!field(r, "ratio").is_number()) return "missed";
    switch (judge(ratio_spread(r), target)) {
    case Judgement::above: return "ok";
    case Judgement::below: return "missed";
    case Judgement::noisy: return "noisy";
    }
    return "ok";
}

bool parse_sizes(const std::string &text, std::vector<unsigned long long> *out, std::string *error) {
    out->clear();
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(',', start);
        if (end == std::string::npos) end = text.size();
        const std::string item = text.substr(start, end - start);
        char *rest = nullptr;
        errno = 0;
        unsigned long long v = std::strtoull(item.c_str(), &rest, 10);
        const std::string suffix = rest ? rest : "";
        const int shift = suffix == "" ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : -1;
        if (item.empty() || rest == item.c_str() || shift < 0 || errno || v == 0 || v > (1ull << 40) >> shift) {
            *error = "bad size '" + item + "' in '" + text + "': sizes are positive integers with an optional K, M or G "
                     "suffix, comma-separated (e.g. 1M,16M,1G)";
            return false;
        }
        out->push_back(v << shift);
        start = end + 1;
    }
    return !out->empty();
}

namespace {
// --from: the rows of earlier runs, judged again (an xmc bench document, or
// xmc_gpu_bench's own JSON of one transfer size each, as hardware/results/ holds).
json from_files(const BenchOptions &o) {
    json doc = {{"backend", o.backend}, {"kind", o.kind.empty() ? "cuda" : o.kind}, {"runs", json::array()},
                {"rows", json::array()}, {"min_ratio", o.min_ratio}};
    CudaRows rows;
    for (const auto &f : o.from) {
        std::string text;
        json j = read_text(f, &text) ? json::parse(text, nullptr, false) : json();
        if (j.is_discarded() || !j.is_object() || !j["rows"].is_array()) {
            doc["error"] = "--from " + f + ": not the JSON of xmc bench or xmc_gpu_bench (an object with 'rows')";
            return doc;
        }
        doc["runs"].push_back({{"command", "--from " + f}});
        if (j.contains("runs")) {  // xmc bench's own document
            for (const char *k : {"backend", "kind", "device", "driver"})
                if (j.contains(k)) doc[k] = j[k];
            for (auto r : j["rows"]) {
                r.erase("baseline");  // judged again: against --baseline, if given, not the recorded one
                doc["rows"].push_back(r);
            }
        } else {
            doc["device"] = j.value("device", "");
            doc["driver"] = cuda_driver_text(j.value("driver", 0));
            rows.add(j, j.value("bytes", 0ull));
        }
    }
    rows.flush(&doc);
    return doc;
}
} // namespace

json run_benchmarks(const BenchOptions &o) {
    if (!o.from.empty()) {
        json doc = from_files(o);
        for (auto &r : doc["rows"]) r["verdict"] = row_verdict(r);
        return doc;
    }
    json doc = {{"backend", o.backend}, {"runs", json::array()}, {"rows", json::array()}, {"min_ratio", o.min_ratio}};
    std::string err;
    const LoadedBackend *b = load_backend(o.backend, &err);
    if (!b) {
        doc["error"] = err;
        return doc;
    }
    doc["backend"] = b->api->name;
    std::string kind = o.kind;
    if (kind.empty()) kind = b->api->name;
    doc["kind"] = kind;
    if (kind != "cuda" && kind != "host") {
        doc["skipped"] = std::string("no benchmark for backend '") + b->api->name + "': xmc bench runs xmc_gpu_bench "
                         "for CUDA-driver backends (--kind cuda) and xmc_bench_pin for the host backend (--kind host)";
        return doc;
    }
    std::string logs = o.log_dir;
    std::string tmp;
    if (logs.empty()) {
        char templ[] = "/tmp/xmc-bench-XXXXXX";
        if (!mkdtemp(templ)) {
            doc["error"] = "cannot create a temporary folder";
            return doc;
        }
        logs = tmp = templ;
    }
    if (kind == "cuda") run_cuda(o, logs, &doc);
    else run_host(o, logs, &doc);
    for (auto &r : doc["rows"]) r["verdict"] = row_verdict(r);
    if (!tmp.empty()) {
        if (doc.contains("error")) std::printf("xmc bench: the benchmark's output is kept in %s\n", tmp.c_str());
        else std::filesystem::remove_all(tmp);
    }
    return doc;
}

void rerun_noisy(const BenchOptions &o, const json &baseline, const std::string &baseline_file, json *doc) {
    if (!o.from.empty() || doc->value("kind", "") != "cuda" || doc->contains("error") || doc->contains("skipped")) return;
    std::string logs = o.log_dir, tmp;
    for (int pass = 1; pass <= o.reruns; ++pass) {
        std::set<unsigned long long> sizes;  // the runs (--bytes) holding a noisy row with pairs
        for (const auto &r : (*doc)["rows"])
            if (r.value("verdict", "") == "noisy" && field(r, "pairs").is_array() && r.value("run_bytes", 0ull) > 0)
                sizes.insert(r["run_bytes"].get<unsigned long long>());
        if (sizes.empty()) break;
        if (logs.empty()) {
            char templ[] = "/tmp/xmc-bench-XXXXXX";
            if (!mkdtemp(templ)) return;
            logs = tmp = templ;
        }
        std::printf("xmc bench: noisy rows: measuring %zu size(s) again, their pairs pooled (rerun %d of at most %d)\n",
                    sizes.size(), pass, o.reruns);
        std::fflush(stdout);
        size_t k = 0;
        for (const unsigned long long size : sizes) {
            char label[160];
            std::snprintf(label, sizeof label, "[rerun %d, %zu/%zu] xmc_gpu_bench, transfers of %s", pass, ++k, sizes.size(),
                          human_bytes(size).c_str());
            json j;
            if (!run_gpu_bench(o, logs, size, label, "-rerun" + std::to_string(pass), doc, &j)) break;
            (*doc)["runs"].back()["rerun"] = pass;  // run_gpu_bench recorded it
            CudaRows again;
            again.add(j, size);
            for (auto &r : (*doc)["rows"]) {
                if (r.value("verdict", "") != "noisy" || !field(r, "pairs").is_array()) continue;
                if (r.value("run_bytes", 0ull) != size) continue;
                const auto it = again.rows.find({r.value("series", ""), r.value("bytes", 0ull)});
                if (it == again.rows.end() || !field(it->second, "pairs").is_array()) continue;
                std::vector<double> pooled = r["pairs"].get<std::vector<double>>();
                for (const auto &v : it->second["pairs"]) pooled.push_back(v.get<double>());
                set_pairs(pooled, &r);
                r["runs"] = r.value("runs", 1) + 1;
            }
        }
        for (auto &r : (*doc)["rows"]) {
            r.erase("baseline");
            r["verdict"] = row_verdict(r);
        }
        std::string err;
        if (baseline.is_object()) compare_baseline(*doc, baseline, baseline_file, &err);  // it passed once already
        if (doc->contains("error")) break;
    }
    if (!tmp.empty() && !doc->contains("error")) std::filesystem::remove_all(tmp);
}

std::string bench_table(const json &doc) {
    std::string out;
    char line[640];
    std::snprintf(line, sizeof line, "%-52s %9s %15s %15s %7s %13s  %-24s %s\n", "path", "size", "figure", "peak (same run)",
                  "ratio", "judged spread", "target", "verdict");
    out += line;
    for (const auto &r : doc["rows"]) {
        std::string target;
        if (r.value("target", 0.0) > 0) {
            char t[128];
            std::snprintf(t, sizeof t, "%s>= %.2f", r.value("requirement", "").empty() ? "" : (r.value("requirement", "") + " ").c_str(),
                          r["target"].get<double>());
            target = t;
        }
        std::string verdict = r.value("verdict", "");
        if (verdict == "missed") verdict = "MISSED";
        else if (verdict == "broken") verdict = "BROKEN (above " + fmt(json(kBrokenAbove), "%.2f") + " of the peak)";
        else if (verdict == "below baseline") verdict = "BELOW BASELINE " + fmt(field(r["baseline"], "floor"), "%.3f");
        else if (verdict == "noisy") verdict = "NOISY (rerun)";
        const std::string unit = r.value("unit", "");
        // The spread a verdict is judged on: the median's 95% interval, or the pairs' quartiles
        // for a row recorded without its pairs.
        const RatioSpread sp = ratio_spread(r);
        const std::string spread = sp.samples > 0 ? fmt(json(sp.lo), "%.3f") + "-" + fmt(json(sp.hi), "%.3f") : "";
        std::snprintf(line, sizeof line, "%-52s %9s %10s %-4s %10s %-4s %7s %13s  %-24s %s\n", r.value("path", "").c_str(),
                      r.value("bytes", 0ull) ? human_bytes(r["bytes"].get<unsigned long long>()).c_str() : "",
                      fmt(r["figure"], "%.2f").c_str(), unit.c_str(), fmt(r["peak"], "%.2f").c_str(), unit.c_str(),
                      fmt(r["ratio"], "%.3f").c_str(), spread.c_str(), target.c_str(), verdict.c_str());
        out += line;
    }
    return out;
}

namespace {
// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}
std::string csv_number(const json &v) {
    if (!v.is_number()) return "";
    char s[64];
    std::snprintf(s, sizeof s, "%.6g", v.get<double>());
    return s;
}
} // namespace

std::string bench_csv(const json &doc) {
    std::string out = "path,series,bytes,size,figure,unit,peak,ratio,ratio_lo,ratio_hi,ratio_min,ratio_max,samples,"
                      "requirement,target,baseline,verdict\n";
    for (const auto &r : doc["rows"]) {
        const unsigned long long bytes = r.value("bytes", 0ull);
        const std::vector<std::string> f = {
            r.value("path", ""), r.value("series", r.value("path", "")), bytes ? std::to_string(bytes) : "",
            bytes ? human_bytes(bytes) : "", csv_number(r["figure"]), r.value("unit", ""), csv_number(r["peak"]),
            csv_number(r["ratio"]), csv_number(field(r, "ratio_lo")), csv_number(field(r, "ratio_hi")), csv_number(field(r, "ratio_min")),
            csv_number(field(r, "ratio_max")), r.value("samples", 0) > 0 ? std::to_string(r["samples"].get<int>()) : "",
            r.value("requirement", ""), r.value("target", 0.0) > 0 ? csv_number(r["target"]) : "",
            r.contains("baseline") ? csv_number(field(r["baseline"], "ratio")) : "", r.value("verdict", "")};
        for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csv_field(f[i]);
        out += "\n";
    }
    return out;
}

std::vector<std::string> bench_failures(const json &doc) {
    std::vector<std::string> v;
    if (doc.contains("error")) v.push_back(doc["error"].get<std::string>());
    if (doc.contains("baseline_error")) v.push_back(doc["baseline_error"].get<std::string>());
    for (const auto &r : doc["rows"]) {
        const std::string verdict = r.value("verdict", "");
        if (verdict == "broken")
            v.push_back("broken measurement: " + row_name(r) + ": the figure " + fmt(r["figure"], "%.2f") + " " +
                        r.value("unit", "") + " beats its same-run peak " + fmt(r["peak"], "%.2f") + " " + r.value("unit", "") +
                        ": " + median_words(r) + fmt(r["ratio"], "%.3f") + ", above " + fmt(json(kBrokenAbove), "%.2f"));
        else if (verdict == "missed")
            v.push_back("target missed: " + row_name(r) + ": " + median_words(r) + fmt(r["ratio"], "%.3f") + spread_words(r) +
                        " below " + (r.value("requirement", "").empty() ? "" : r.value("requirement", "") + "'s ") +
                        "target " + fmt(r["target"], "%.2f"));
        else if (verdict == "below baseline")
            v.push_back("below baseline: " + row_name(r) + ": " + median_words(r) + fmt(r["ratio"], "%.3f") + spread_words(r) +
                        " below the baseline's " + fmt(field(r["baseline"], "ratio"), "%.3f") + " less its tolerance " +
                        fmt(field(r["baseline"], "tolerance"), "%.3f") + " (floor " + fmt(field(r["baseline"], "floor"), "%.3f") + ")");
    }
    return v;
}

std::vector<std::string> bench_noisy(const json &doc) {
    std::vector<std::string> v;
    for (const auto &r : doc["rows"]) {
        if (r.value("verdict", "") != "noisy") continue;
        std::string against;
        const RatioSpread sp = ratio_spread(r);
        if (r.value("target", 0.0) > 0 && judge(sp, r["target"].get<double>()) == Judgement::noisy)
            against = "target " + fmt(r["target"], "%.2f");
        if (sp.ratio > kBrokenAbove)
            against += (against.empty() ? "" : " and ") + std::string("broken-measurement bound ") +
                       fmt(json(kBrokenAbove), "%.2f") + " (the figure beats its peak in some pairs, not in others)";
        if (r.contains("baseline") && field(r["baseline"], "floor").is_number() &&
            judge(sp, field(r["baseline"], "floor").get<double>()) == Judgement::noisy)
            against += (against.empty() ? "" : " and ") + std::string("baseline floor ") + fmt(field(r["baseline"], "floor"), "%.3f");
        v.push_back(row_name(r) + ": " + median_words(r) + fmt(r["ratio"], "%.3f") + spread_words(r) + " straddles its " +
                    against + ": its margin is smaller than its spread, rerun it");
    }
    return v;
}

std::vector<std::string> below_floor(const json &doc, double min_ratio) {
    std::vector<std::string> v;
    if (min_ratio <= 0) return v;
    for (const auto &r : doc["rows"]) {
        const std::string what = row_name(r);
        if (!r["ratio"].is_number()) v.push_back(what + ": no ratio (the figure or the peak was not measured)");
        else if (r["ratio"].get<double>() < min_ratio)
            v.push_back(what + ": ratio " + fmt(r["ratio"], "%.3f") + " is below --min-ratio " + fmt(json(min_ratio), "%.3f"));
    }
    return v;
}

int peaks_vs_nvbandwidth(const std::string &dir, double within) {
    // xmc's copy peak -> nvbandwidth's testcase of the same copy (device_local_copy counts a
    // device copy's bytes once: xmc's d2d_copy, half its read+write figure).
    const std::pair<const char *, const char *> kPairs[] = {
        {"h2d", "host_to_device_memcpy_ce"}, {"d2h", "device_to_host_memcpy_ce"}, {"d2d_copy", "device_local_copy"}};
    std::vector<std::pair<unsigned long long, std::string>> found;  // (bytes, xmc peaks file)
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
        std::smatch m;
        const std::string name = e.path().filename().string();
        if (std::regex_match(name, m, std::regex(R"(xmc-peaks-([0-9]+)\.json)")))
            found.emplace_back(std::stoull(m[1]), e.path().string());
    }
    std::sort(found.begin(), found.end());
    if (ec || found.empty()) {
        std::fprintf(stderr, "xmc bench: --peaks-vs-nvbandwidth %s: no xmc-peaks-<bytes>.json there (xmc_gpu_bench "
                             "--peaks-only --bytes N --json DIR/xmc-peaks-N.json; hardware/nvbandwidth.sh writes them)\n",
                     dir.c_str());
        return 2;
    }
    std::printf("| size | copy | xmc peak (GB/s) | nvbandwidth (GB/s) | xmc / nvbandwidth | within %.0f%% |\n|---|---|---|---|---|---|\n",
                100 * within);
    int outside = 0, inside = 0;
    for (const auto &[bytes, xf] : found) {
        std::string text;
        const json x = read_text(xf, &text) ? json::parse(text, nullptr, false) : json();
        const std::string nf = dir + "/nvbandwidth-" + std::to_string(bytes) + ".json";
        json nv = read_text(nf, &text) ? json::parse(text, nullptr, false) : json();
        for (const auto &[ours, theirs] : kPairs) {
            double mine = x.is_object() && x.contains("peaks") ? x["peaks"].value(ours, 0.0) : 0.0;
            double ref = 0;
            if (nv.is_object() && nv.contains("nvbandwidth"))
                for (const auto &tc : nv["nvbandwidth"].value("testcases", json::array()))
                    if (tc.value("name", "") == theirs && tc.contains("bandwidth_matrix") && !tc["bandwidth_matrix"].empty() &&
                        !tc["bandwidth_matrix"][0].empty()) {
                        const json &v = tc["bandwidth_matrix"][0][0];  // device 0
                        ref = v.is_number() ? v.get<double>() : v.is_string() ? std::atof(v.get<std::string>().c_str()) : 0;
                    }
            const bool both = mine > 0 && ref > 0;
            const bool in = both && std::fabs(mine / ref - 1) <= within;
            outside += !in;
            inside += in;
            std::printf("| %s | %s | %s | %s | %s | %s |\n", human_bytes(bytes).c_str(), theirs,
                        mine > 0 ? fmt(json(mine), "%.2f").c_str() : "n/a", ref > 0 ? fmt(json(ref), "%.2f").c_str() : "n/a",
                        both ? fmt(json(mine / ref), "%.3f").c_str() : "n/a", in ? "yes" : both ? "**NO**" : "not measured");
        }
    }
    std::printf("\nxmc bench: %d of %d peaks within %.0f%% of nvbandwidth's (a peak either side did not measure counts "
                "as outside)\n", inside, inside + outside, 100 * within);
    return outside == 0 ? 0 : 1;
}

int make_baseline_command(const std::vector<std::string> &runs, const std::string &out) {
    json b;
    std::string err;
    if (!make_baseline(runs, &b, &err)) {
        std::fprintf(stderr, "xmc bench: %s\n", err.c_str());
        return 2;
    }
    if (!write_text(out, b.dump(2) + "\n", &err)) {
        std::fprintf(stderr, "xmc bench: %s\n", err.c_str());
        return 2;
    }
    size_t wide = 0;
    for (const auto &r : b["rows"]) wide += r.contains("note");
    std::printf("xmc bench: wrote the baseline %s from %zu runs: %zu rows (median ratio, tolerance from the runs' "
                "spread), %zu at the largest tolerance %.2f, %zu left out (missing or broken in a run); device '%s', "
                "driver '%s': check it in as hardware/baselines/%s\n",
                out.c_str(), runs.size(), b["rows"].size(), wide, kMaxTolerance, b["left_out"].get<size_t>(),
                b.value("device", "").c_str(), b.value("driver", "").c_str(), baseline_name(b).c_str());
    return 0;
}

int bench_command(const BenchOptions &o, const BenchFiles &files) {
    // A baseline that cannot be read is refused before anything runs.
    json baseline;
    if (!files.baseline.empty()) {
        std::string text;
        if (!read_text(files.baseline, &text) || (baseline = json::parse(text, nullptr, false)).is_discarded()) {
            std::fprintf(stderr, "xmc bench: --baseline %s: cannot read it as JSON\n", files.baseline.c_str());
            return 2;
        }
    }
    std::printf("xmc bench: backend %s\n", o.backend.c_str());
    json doc = run_benchmarks(o);
    if (doc.contains("skipped") && doc["rows"].empty()) {
        std::printf("xmc bench: skipped: %s\n", doc["skipped"].get<std::string>().c_str());
        return 77;
    }
    if (!files.baseline.empty()) {
        std::string err;
        if (!compare_baseline(doc, baseline, files.baseline, &err)) {
            std::fprintf(stderr, "xmc bench: %s\n", err.c_str());
            return 2;
        }
    }
    rerun_noisy(o, baseline, files.baseline, &doc);
    if (!doc["rows"].empty()) std::printf("\n%s", bench_table(doc).c_str());
    std::string err;
    if (!files.json_out.empty()) {
        std::string csv = files.json_out;
        csv = (csv.size() > 5 && csv.compare(csv.size() - 5, 5, ".json") == 0 ? csv.substr(0, csv.size() - 5) : csv) + ".csv";
        if (!write_text(files.json_out, doc.dump(2) + "\n", &err) || !write_text(csv, bench_csv(doc), &err)) {
            std::fprintf(stderr, "xmc bench: %s\n", err.c_str());
            return 2;
        }
        std::printf("xmc bench: wrote %s and %s\n", files.json_out.c_str(), csv.c_str());
    }
    if (!files.write_baseline.empty()) {
        if (!write_text(files.write_baseline, baseline_of(doc, files.tolerance).dump(2) + "\n", &err)) {
            std::fprintf(stderr, "xmc bench: %s\n", err.c_str());
            return 2;
        }
        std::printf("xmc bench: wrote the baseline %s of one run (device '%s', driver '%s', tolerance %.2f; "
                    "--make-baseline derives each row's tolerance from 5 runs); check it in as hardware/baselines/%s\n", files.write_baseline.c_str(), doc.value("device", "").c_str(),
                    doc.value("driver", "").c_str(), files.tolerance, baseline_name(doc).c_str());
    }
    const auto failures = bench_failures(doc);
    for (const auto &f : failures) std::printf("xmc bench: FAILED: %s\n", f.c_str());
    const auto low = below_floor(doc, o.min_ratio);
    for (const auto &l : low) std::printf("xmc bench: BELOW FLOOR: %s\n", l.c_str());
    const auto noisy = bench_noisy(doc);
    for (const auto &n : noisy) std::printf("xmc bench: NOISY: %s\n", n.c_str());
    std::printf("xmc bench: %zu figures%s%s%s\n", doc["rows"].size(),
                failures.empty() ? ", none broken, every target met" : ", some failed (above)",
                o.min_ratio > 0 ? (low.empty() ? ", all at or above --min-ratio" : ", some below --min-ratio") : "",
                noisy.empty() ? "" : (", " + std::to_string(noisy.size()) + " noisy (neither passed nor failed: rerun)").c_str());
    if (!failures.empty() || !low.empty()) return 1;
    if (!noisy.empty()) {
        std::printf("xmc bench: exit %d: only noisy rows stand between this run and a pass\n", kBenchNoisy);
        return kBenchNoisy;
    }
    return 0;
}

} // namespace xmc::conformance
