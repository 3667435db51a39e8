// xmc bench: runs the benchmark executables found next to xmc for a backend
// and merges their JSON into one table, each figure beside the platform peak
// measured in the same run and the ratio (SPEC 10), judged against its target,
// its peak (a broken measurement) and a baseline. Also `qualify --bench`.
//   kind cuda: xmc_gpu_bench --backend B --bytes N --json F, once per size
//   kind host: xmc_bench_pin --benchmark_out=F --benchmark_out_format=json,
//              peaks: the raw calls (posix_memalign+mlock+munlock+free) timed here
#pragma once
#include "package.hpp"

#include <string>
#include <vector>

namespace xmc::conformance {

struct BenchOptions {
    std::string backend;                    // name or path, as for qualify
    std::string kind;                       // "cuda" | "host" | "" (from the backend's name)
    std::vector<unsigned long long> sizes;  // transfer sizes (cuda); empty: the defaults
    double min_ratio = 0;                   // floor for every ratio (0: no floor)
    int timeout_s = 900;                    // per benchmark run
    std::string log_dir;                    // each run's output; "" = a temporary folder
    std::vector<std::string> from;          // judge these earlier runs' JSON instead of running (--from)
};

// A figure above this much of its same-run peak is a broken measurement (a
// peak is a physical limit: beating it by more than noise means the figure or
// the peak measured something else).
inline constexpr double kBrokenAbove = 1.05;

// Runs the benchmarks. The document: backend, kind, device and driver (what a
// baseline is for), runs (command, exit status, seconds), rows (path, series,
// bytes, unit, figure, peak, ratio, higher_is_better, requirement, target,
// verdict), and "skipped" (why nothing could be measured, e.g. no GPU) or
// "error" (the benchmark itself failed). A row's verdict: "broken" (ratio
// above kBrokenAbove), "missed" (below its target, or no ratio where it has
// one), else "ok"; compare_baseline adds "below baseline".
json run_benchmarks(const BenchOptions &o);

// The rows as an aligned text table.
std::string bench_table(const json &doc);
// The rows as CSV (RFC 4180): one row per path and size, the measurements as
// columns (path, series, bytes, size, figure, unit, peak, ratio, requirement,
// target, baseline, verdict). Written beside the JSON.
std::string bench_csv(const json &doc);
// Why the run fails, one line each: the benchmark's error, a broken
// measurement, a missed target, a drop below the baseline.
std::vector<std::string> bench_failures(const json &doc);

// Each row whose ratio is below `min_ratio` or could not be computed, said in words.
std::vector<std::string> below_floor(const json &doc, double min_ratio);

// ---- baselines (hardware/baselines/<device model>-<driver>.json) --------------
// A baseline holds one device model's and driver's figures, each row with a
// tolerance: a later run on that model and driver fails a row whose figure
// drops further than its tolerance below it (for times: rises above it).
// A baseline from a run: every measured row, each with `tolerance`.
json baseline_of(const json &doc, double tolerance);
// The file name a baseline of this run is checked in under: "<device>-<driver>.json", slugged.
std::string baseline_name(const json &doc);
// Compares the run with a baseline: false with *error (the run stays as it
// was) when the baseline is malformed or for another device model or driver;
// else marks each row it covers ("baseline", and verdict "below baseline"
// where the drop is beyond the tolerance).
bool compare_baseline(json &doc, const json &baseline, const std::string &source, std::string *error);

// "1M,16M,1G" or "1048576,..." -> bytes; false with *error on bad input.
bool parse_sizes(const std::string &text, std::vector<unsigned long long> *out, std::string *error);

// `xmc bench`: runs, prints the table, writes `json_out` (and the CSV beside
// it) if given; compares with `baseline` and writes `write_baseline` if
// given. Exit status 0, 1 (a broken measurement, a missed target, a drop below
// the baseline, a figure below --min-ratio, or the benchmark failed), 2 (bad
// input: also a baseline of another device or driver), 77 (nothing to measure
// here, e.g. no GPU; the reason is printed).
struct BenchFiles {
    std::string json_out, baseline, write_baseline;
    double tolerance = 0.1;  // of each row of a written baseline
};
int bench_command(const BenchOptions &o, const BenchFiles &files);

} // namespace xmc::conformance
