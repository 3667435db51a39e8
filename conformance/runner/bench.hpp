// xmc bench: runs the benchmark executables found next to xmc for a backend
// and merges their JSON into one table, each figure beside the platform peak
// measured in the same run and the ratio (SPEC 10). Also `qualify --bench`.
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
};

// Runs the benchmarks. The document: backend, kind, runs (command, exit
// status, seconds), rows (path, series, bytes, unit, figure, peak, ratio,
// higher_is_better, requirement, target), and "skipped" (why nothing could be
// measured, e.g. no GPU) or "error" (the benchmark itself failed).
json run_benchmarks(const BenchOptions &o);

// The rows as an aligned text table.
std::string bench_table(const json &doc);

// Each row whose ratio is below `min_ratio` or could not be computed, said in words.
std::vector<std::string> below_floor(const json &doc, double min_ratio);

// "1M,16M,1G" or "1048576,..." -> bytes; false with *error on bad input.
bool parse_sizes(const std::string &text, std::vector<unsigned long long> *out, std::string *error);

// `xmc bench`: runs, prints the table, writes `json_out` if given; exit status
// 0, 1 (a figure below --min-ratio, or the benchmark failed), 2 (bad input),
// 77 (nothing to measure here, e.g. no GPU; the reason is printed).
int bench_command(const BenchOptions &o, const std::string &json_out);

} // namespace xmc::conformance
