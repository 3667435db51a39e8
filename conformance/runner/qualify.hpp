// xmc qualify: runs each requirement's tests for one backend in a child
// process with a time limit, so a crash or a hang fails that requirement and
// the run goes on; then writes the qualification package (SPEC 9): results
// (JSON, JUnit XML, summary), the must-pass list, the waivers, capabilities,
// environment, benchmarks (--bench) and the report. docs/qualify.md.
// At fleet scale: --jobs N (requirements in parallel), --shard I/N (one share
// of the selection; `xmc merge` joins the shares), --rerun-failed DIR (what
// failed in an earlier package, the rest taken over), --repeat N (flake rates).
// --procs N: the transfer requirements' tests also run in a world of N forked
// ranks over gloo (procs.hpp), where the paths between processes (IPC) run.
#pragma once
#include <string>
#include <vector>

namespace xmc::conformance {

struct QualifyOptions {
    std::string backend;
    std::string out_dir;
    std::string filter;       // glob over requirement IDs, e.g. "PIN-*"
    std::string tier;         // only the rows whose tiers (requirements.tsv) include it; "" every row
    std::string mustpass;     // suite version of the must-pass lists; "" this suite's
    std::string waivers;      // file: ID<TAB>backend<TAB>device<TAB>reason<TAB>link (or ID<TAB>backend<TAB>reason)
    std::string expect_fail;  // self-test: exactly these IDs must fail
    std::string may_fail;     // self-test: these may fail too (their premise is what the bug breaks)
    int timeout_s = 300;      // per requirement
    bool bench = false;       // also run the benchmarks (bench.json, bench.csv, plots)
    std::vector<unsigned long long> bench_sizes;  // transfer sizes for them; empty: defaults
    int jobs = 1;             // requirements run at once (the catalogue's `alone` rows run by themselves)
    int shard_index = 0;      // --shard I/N: this run is share I of N (1-based); 0: the whole selection
    int shard_count = 0;
    int repeat = 1;           // each requirement's tests run this many times; any failing run fails it
    std::string rerun_failed; // an earlier package: rerun what failed there, take the rest over
    std::string sanitize;     // "thread": the children are the TSan runner on the TSan backend (sanitize.hpp)
    int procs = 2;            // the transfer tests also run in a world of this many processes (procs.hpp); 0: not
    bool procs_auto = true;   // --procs not given: the process world runs only for a requirement whose tests took,
                              // in the thread world, a path within one address space (direct), which between
                              // processes becomes another (IPC); staged alone would be the same path again
};

// --shard I/N: "I/N" with 1 <= I <= N; false with *error saying what is wrong.
bool parse_shard(const std::string &text, int *index, int *count, std::string *error);

int qualify(const QualifyOptions &o);
// The self-test's exit status from the requirements that failed (selftest_verdict.cpp): 0 when they
// are exactly `expect_fail` ("none": none) but for any of `may_fail`; says what it found.
int selftest_verdict(const std::string &expect_fail, const std::string &may_fail,
                     const std::vector<std::string> &failed_ids);

} // namespace xmc::conformance
