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
    int reruns = 2;                         // times the sizes of noisy CUDA rows are measured again (--reruns)
};

// A figure above this much of its same-run peak is a broken measurement (a
// peak is a physical limit: beating it by more than noise means the figure or
// the peak measured something else).
inline constexpr double kBrokenAbove = 1.05;

// A row's ratio with its spread: `samples` pairs of raw and backend work taken
// back to back (xmc_gpu_bench, xmc_bench_pin), the ratio the median of the
// per-pair ratios, lo..hi the 95% interval of that median (order statistics,
// from the row's "pairs"), or the pairs' quartiles for a row recorded without
// its pairs. A row without pairs has lo = hi = ratio.
// Why the median's interval and not the quartiles: the quartiles are the
// spread of one pair, which more pairs do not narrow, so a row whose median sat
// 0.02 above its floor stayed "noisy" however long it ran (an H100's host
// callback round trip: 200 pairs, median 0.984, quartiles 0.947-1.024 against a
// floor of 0.959, in 3 of 5 runs); the median's interval narrows as pairs are
// added, and is wider than the quartiles for a handful of pairs.
struct RatioSpread {
    double ratio = 0, lo = 0, hi = 0;
    int samples = 0;
};
RatioSpread ratio_spread(const json &row);
// Sets a row's ratio and spread from its per-pair ratios (raw over backend,
// 1.0 at the raw figure): ratio (their median), samples, pairs, ratio_lo and
// ratio_hi (quartiles), ratio_min and ratio_max, median_lo and median_hi (the
// median's 95% interval). No pairs: the row is left as it is.
void set_pairs(std::vector<double> pairs, json *row);
// The median of v (the mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> v);
// Which side of a threshold (a target, a baseline's floor) a row is on:
// above (the median and the spread's low end at or above it), below (the
// median and the spread's high end below it), or noisy (the threshold lies
// within the spread: the row's margin to it is smaller than its spread; rerun
// it, with more pairs).
enum class Judgement { above, below, noisy };
Judgement judge(const RatioSpread &s, double threshold);
// A row's verdict from its ratio, spread and target (a baseline's comes later):
// "broken" (the median ratio above kBrokenAbove), "missed", "noisy" or "ok".
std::string bench_row_verdict(const json &row);

// Runs the benchmarks. The document: backend, kind, device and driver (what a
// baseline is for), runs (command, exit status, seconds), rows (path, series,
// bytes, unit, figure, peak, ratio, higher_is_better, requirement, target,
// verdict), and "skipped" (why nothing could be measured, e.g. no GPU) or
// "error" (the benchmark itself failed). A row's verdict: "broken" (ratio
// above kBrokenAbove), "missed" (below its target, or no ratio where it has
// one), "noisy" (its spread straddles the target), else "ok"; compare_baseline
// adds "below baseline" (and "noisy" where the spread straddles its floor).
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

// The rows whose spread straddles their target or baseline floor, one line each.
std::vector<std::string> bench_noisy(const json &doc);

// ---- baselines (hardware/baselines/<device model>-<driver>.json) --------------
// A baseline (format xmc-bench-baseline/2) holds one device model's and
// driver's RATIOS (backend over the raw driver's same work in the same run),
// each row with a tolerance: a later run on that model and driver fails a row
// whose ratio's spread lies wholly below ratio * (1 - tolerance). Ratios, not
// figures: a machine whose own peak moved (the raw path slower too) does not
// fail. Format /1 (figures) is refused, naming the way to make a /2.
// A baseline from one run: every measured row, each with `tolerance`.
json baseline_of(const json &doc, double tolerance);
// A baseline from several runs of one device and driver (xmc bench --json
// documents): each row measured in every run gets the median of the runs'
// ratios and a tolerance from their spread: max(kMinTolerance, 2 x the
// largest deviation of a run's ratio from that median, as a fraction of it),
// at most kMaxTolerance (such a row can tell little; "note" says so). False
// with *error on fewer than 3 runs, unreadable ones, or runs of other devices.
// The least tolerance is 5%: a run differs from the next by more than its own pairs say (an H100's
// release+remap+reload 16 MiB against pinned H2D at 0.721, median's interval 0.715-0.724, in one
// run of five whose others gave 0.749-0.762), and with 2% two of five runs of a correct backend
// failed a baseline made from the other four; with 5%, none, and a backend 10% slower still fails
// 51-58 of 103 rows below its baseline in each of 5 runs (2026-12-07).
inline constexpr double kMinTolerance = 0.05, kMaxTolerance = 0.5;
bool make_baseline(const std::vector<std::string> &runs, json *out, std::string *error);
// Noisy rows measured again (SPEC 9's "rerun it", done by the tool): while a row of a CUDA run
// with pairs is noisy, xmc_gpu_bench runs again at its size, up to o.reruns times, and each noisy
// row's pairs are pooled with the new run's pairs of that row (never replaced: a lucky rerun
// cannot pass a row), then every row is judged again, against `baseline` too where it is an
// object. Each rerun is a run of the document's ("rerun": k); each pooled row says how many
// runs its pairs came from ("runs"). Nothing to do for a host run or --from.
void rerun_noisy(const BenchOptions &o, const json &baseline, const std::string &baseline_file, json *doc);
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
// input: also a baseline of another device or driver), 3 (kBenchNoisy: nothing
// failed, but a row's spread straddles its target or baseline floor, so the
// run cannot say pass or fail for it: rerun), 77 (nothing to measure here,
// e.g. no GPU; the reason is printed).
inline constexpr int kBenchNoisy = 3;
struct BenchFiles {
    std::string json_out, baseline, write_baseline;
    double tolerance = 0.1;  // of each row of a written baseline
};
int bench_command(const BenchOptions &o, const BenchFiles &files);
// `xmc bench --make-baseline RUN.json... --out FILE`: make_baseline, written to FILE. 0, or 2 with the reason.
int make_baseline_command(const std::vector<std::string> &runs, const std::string &out);
// `xmc bench --peaks-vs-nvbandwidth DIR`: each xmc copy peak (DIR/xmc-peaks-<bytes>.json, from
// xmc_gpu_bench --peaks-only) beside nvbandwidth's same copy at that size (DIR/nvbandwidth-<bytes>.json,
// nvbandwidth -j: host_to_device_memcpy_ce, device_to_host_memcpy_ce, device_local_copy; device 0)
// as a markdown table. 0 when every peak is within `within` (SPEC 10: 0.02) of nvbandwidth's, 1 if not
// (or one side is missing), 2 when DIR holds no peaks.
int peaks_vs_nvbandwidth(const std::string &dir, double within = 0.02);

} // namespace xmc::conformance
