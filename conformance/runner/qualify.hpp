// xmc qualify: runs each requirement's tests for one backend in a child
// process with a time limit, so a crash or a hang fails that requirement and
// the run goes on; then writes the qualification package (SPEC 9): results
// (JSON, JUnit XML, summary), the must-pass list, the waivers, capabilities,
// environment, benchmarks (--bench) and the report. docs/qualify.md.
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
    int timeout_s = 300;      // per requirement
    bool bench = false;       // also run the benchmarks (bench.json, plots)
    std::vector<unsigned long long> bench_sizes;  // transfer sizes for them; empty: defaults
    std::string sanitize;     // "thread": the children are the TSan runner on the TSan backend (sanitize.hpp)
};

int qualify(const QualifyOptions &o);

} // namespace xmc::conformance
