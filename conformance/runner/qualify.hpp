// xmc qualify: runs each requirement's tests for one backend in a child
// process with a time limit, so a crash or a hang fails that requirement and
// the run goes on; then writes the results (JSON, JUnit XML, summary).
#pragma once
#include <string>

namespace xmc::conformance {

struct QualifyOptions {
    std::string backend;
    std::string out_dir;
    std::string filter;       // glob over requirement IDs, e.g. "PIN-*"
    std::string waivers;      // file: ID <TAB> backend <TAB> reason
    std::string expect_fail;  // self-test: exactly these IDs must fail
    int timeout_s = 300;      // per requirement
};

int qualify(const QualifyOptions &o);

} // namespace xmc::conformance
