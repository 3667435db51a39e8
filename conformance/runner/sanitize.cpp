#include "sanitize.hpp"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

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

bool executable(const std::string &p) { return access(p.c_str(), X_OK) == 0; }
bool readable(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

} // namespace

bool sanitized_run(const std::string &backend, SanitizedRun *out, std::string *why) {
    const char *env = std::getenv("XMC_TSAN_RUNNER");
    const std::string here = exe_dir();
    std::string runner;
    if (env && *env) runner = env;
    else
        for (const std::string &c : {here + "/../lib/tsan/xmc", here + "/../lib/xmc/tsan/xmc"})
            if (executable(c)) {
                runner = c;
                break;
            }
    if (runner.empty() || !executable(runner)) {
        *why = "no ThreadSanitizer build of the runner (" + (runner.empty() ? here + "/../lib/tsan/xmc" : runner) +
               "): configure with XMC_TSAN_TWINS=ON, or set XMC_TSAN_RUNNER";
        return false;
    }
    out->runner = runner;
    if (backend.find('/') == std::string::npos) {
        // A name: the TSan runner searches its own folder first (loader.cpp).
        const std::string dir = runner.substr(0, runner.find_last_of('/'));
        const std::string lib = dir + "/libxmc_backend_" + backend + ".so";
        if (!readable(lib) && !std::getenv("XMC_BACKEND_PATH")) {
            *why = "no ThreadSanitizer build of backend '" + backend + "' (" + lib + ")";
            return false;
        }
        out->backend = backend;
        return true;
    }
    const size_t slash = backend.find_last_of('/');
    const std::string lib = backend.substr(0, slash) + "/tsan/" + backend.substr(slash + 1);
    if (!readable(lib)) {
        *why = "no ThreadSanitizer build of " + backend + " (" + lib +
               "): build it with xmc_add_backend(NAME SOURCES ... SANITIZE thread)";
        return false;
    }
    out->backend = lib;
    return true;
}

std::string tsan_options() {
    // halt_on_error: the first report ends the child (a racy backend can make thousands, each
    // slow to print, and the requirement has failed already). The caller's options come after
    // and win.
    const char *env = std::getenv("TSAN_OPTIONS");
    return std::string("halt_on_error=1:exitcode=66") + (env && *env ? std::string(":") + env : "");
}

bool tsan_reported(const std::string &log_path, std::string *first_line) {
    std::ifstream in(log_path);
    for (std::string line; std::getline(in, line);)
        if (line.find("WARNING: ThreadSanitizer:") != std::string::npos) {
            *first_line = line;
            return true;
        }
    return false;
}

} // namespace xmc::conformance
