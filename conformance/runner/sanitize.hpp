// xmc qualify --sanitize thread: the child test runs are made by the ThreadSanitizer
// build of the runner against the ThreadSanitizer build of the backend, both built
// from the same sources beside the plain ones (<libdir>/tsan/: xmc_add_backend's
// SANITIZE thread, the top CMakeLists' XMC_TSAN_TWINS). A data race reported in a
// child fails the requirement it ran, with the report in that requirement's log.
// docs/qualify.md ("Concurrency under ThreadSanitizer").
#pragma once
#include <string>

namespace xmc::conformance {

struct SanitizedRun {
    std::string runner;   // the TSan runner the children exec
    std::string backend;  // what the children load: the backend's TSan build
};

// The TSan runner (XMC_TSAN_RUNNER, else tsan/xmc under ../lib or ../lib/xmc next to
// this runner) and the TSan build of `backend` (a name: found by the TSan runner in its
// own folder; a path dir/libX.so: dir/tsan/libX.so). False with the reason when either
// is missing: a vendor builds the second library with xmc_add_backend(... SANITIZE thread).
bool sanitized_run(const std::string &backend, SanitizedRun *out, std::string *why);

// TSAN_OPTIONS for a child: halt_on_error=1 and exitcode=66, so that a report ends and
// fails the run even when the test's checks pass, then the caller's (which win).
std::string tsan_options();

// True when the log holds a ThreadSanitizer report ("WARNING: ThreadSanitizer:").
bool tsan_reported(const std::string &log_path, std::string *first_line);

} // namespace xmc::conformance
