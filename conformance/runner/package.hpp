// The qualification package (SPEC 9): what `xmc qualify --out DIR` writes and
// `xmc verify DIR` checks. This header holds the parts both sides share: the
// file names, the suite's identity, the must-pass lists, the waiver file and
// the environment statement. docs/qualify.md describes the layout for vendors.
#pragma once
#include "loader.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace xmc::conformance {

using json = nlohmann::json;

// ---- layout ----------------------------------------------------------------
// The package format; verify refuses a package of another format.
inline constexpr const char *kPackageFormat = "xmc-qualification/1";
// Files every package holds (logs/<ID>.log per requirement that ran tests,
// bench.json when --bench was given, plots/*.svg named by the report).
inline constexpr const char *kPackageFiles[] = {
    "results.json", "junit.xml",    "summary.txt", "mustpass.txt", "waivers.tsv",
    "capabilities.json", "environment.json", "report.html", "report.md",
};

// Trims spaces, tabs and a trailing '\r' (mustpass.cpp; the waiver and list parsers use it).
std::string trim(const std::string &s);

// ---- the suite's identity (embedded at configure time) ----------------------
const char *suite_version();  // the project version, e.g. "0.2.0"
const char *git_revision();   // `git rev-parse HEAD` (+"-dirty"), or "unknown"
const char *build_compiler(); // compiler id and version xmc was built with

// ---- must-pass lists --------------------------------------------------------
// conformance/mustpass/<version>/<list>.txt of every suite version, embedded
// (a package made with `qualify --mustpass 0.1.0` is held to, and verified
// against, 0.1.0's lists): one list per capability (named like it), `model`
// (the suite's own reference checks) and, from 0.2.0, `always` (the entry
// points every backend has); those two apply to every backend. A line holds
// one requirement ID; '#' starts a comment.
// The current version's lists are generated from the catalogue (`xmc mustpass
// --generate`, generate_mustpass_lists) and checked in; an older version's are
// frozen history, checked for agreement with the catalogue only.
struct MustPassList {
    std::string name;              // "pin", "model", ...
    std::vector<std::string> ids;  // in file order
    std::string text;              // the file, byte for byte
};
// The versions whose lists are embedded, oldest first; suite_version() is one
// once its lists are checked in (a new version's build has none until they are generated).
std::vector<std::string> mustpass_versions();
bool is_mustpass_version(const std::string &version);
// The lists of one version (empty for a version not embedded).
std::vector<MustPassList> mustpass_lists(const std::string &version);
// The lists that are files dir/*.txt (`xmc mustpass --check --dir`, what --generate finds in
// --out): false, *error when the folder cannot be read. Sorted by name.
bool read_mustpass_lists(const std::string &dir, std::vector<MustPassList> *out, std::string *error);
// The lists of this suite version generated from the catalogue, sorted by name: `model`,
// `always` and one per capability of <xmc/backend.h> (empty lists too: qualify needs a list for
// every capability a backend may declare). A list holds the `pr` rows whose primary capability
// (first in the catalogue's second column) names it, in catalogue order.
std::vector<MustPassList> generate_mustpass_lists();
// Where the lists of a version are checked in, relative to the source tree's root.
std::string mustpass_dir(const std::string &version);

// The must-pass set of a backend: the union of `model`, `always` (where the
// version has them) and the list of each declared capability.
struct MustPass {
    std::string suite;               // suite version the lists belong to
    std::vector<std::string> lists;  // list names used, e.g. {"model","always","pin"}
    std::vector<std::string> ids;    // union, in catalogue order
    bool contains(const std::string &id) const;
};
// Fails (false, *error) for a version not embedded, or when a declared
// capability has no list in it.
bool mustpass_for(const std::string &version, xmc_caps caps, MustPass *out, std::string *error);
// mustpass.txt: a header naming the suite version and the lists, then the IDs.
std::string mustpass_text(const MustPass &m);
bool parse_mustpass(const std::string &text, MustPass *out, std::string *error);
// Checks one version's lists (`lists`, shown as under `shown_dir`). The current
// version's must equal generate_mustpass_lists() byte for byte: a list missing, one
// the catalogue does not generate, or the first line that differs is a problem
// (mustpass_regenerate_hint says how to mend them). An older version's are checked
// for agreement with the catalogue: every ID exists, has the list's capability and runs
// in `pr`, no ID twice (they predate the newer rows). Returns the problems (empty: consistent).
std::vector<std::string> check_mustpass_lists(const std::string &version, const std::vector<MustPassList> &lists,
                                              const std::string &shown_dir);
// What to do when this suite's lists differ from the generated ones: the command that regenerates them.
std::string mustpass_regenerate_hint(const std::string &version);

// ---- waivers ----------------------------------------------------------------
// One waiver a line, tab-separated:
//   ID <TAB> backend <TAB> device <TAB> reason <TAB> link      (5 columns)
//   ID <TAB> backend <TAB> reason                              (3 columns, older form)
// backend: a backend name or '*'. device: a device name or UUID as the backend
// reports it, or '*' (every device). link: where the known failure is tracked.
struct Waiver {
    std::string id, backend, device = "*", reason, link;
    int line = 0;
};
// Parses a waiver file's text; `source` names it in errors ("waivers.tsv:4: ...").
bool parse_waivers(const std::string &text, const std::string &source, std::vector<Waiver> *out,
                   std::string *error);
bool read_waivers(const std::string &path, std::vector<Waiver> *out, std::string *error);

// A device as the backend reports it through device_count/device_info.
struct DeviceFacts {
    int index = 0;
    std::string name, uuid;  // uuid: 32 hex digits as 8-4-4-4-12
    unsigned long long total_memory = 0;
};
// Whether a waiver applies to this backend on these devices.
bool waiver_applies(const Waiver &w, const std::string &backend, const std::vector<DeviceFacts> &devices);

// ---- environment statement --------------------------------------------------
// Suite version and revision, OS (uname, /etc/os-release), CPU, compiler, the
// backend, its driver library and version where known, and its devices. The
// backend is opened in a child process (time limit `timeout_s`), so a backend
// that crashes or hangs on open is recorded as such, not fatal.
json collect_environment(const LoadedBackend &b, int timeout_s);
// Whether the backend's device 0 is shared with other processes, as a GPU is (the host backend's
// model of a device and the fake drivers' are each process's own): one forked process holds
// 64 MiB of it while a second reports the free memory it sees. *how says what was seen; when it
// cannot be told (no device, no dev_alloc, no answer in time) the device is taken as shared.
bool device_shared(const LoadedBackend &b, int timeout_s, std::string *how);
// The environment variables that choose the backend and its driver
// (XMC_CUDA_DRIVER, ZE_ENABLE_ALT_DRIVERS, XMC_BACKEND_PATH, XMC_FAKE_*), as set now.
std::vector<std::pair<std::string, std::string>> driver_variables();
// The devices recorded in an environment statement.
std::vector<DeviceFacts> devices_of(const json &environment);

// The identity of an environment's devices: index, name, UUID, memory and PCI
// address of each (not the link's current speed, which a GPU lowers when idle).
// Two packages are of one environment when these are equal (merge, rerun).
json device_identity(const json &environment);

// ---- reading packages back (merge, --rerun-failed, verify) ---------------------
// DIR's results.json: false with *error saying why DIR is no qualification
// package (no folder, no readable results.json, another format, no requirements).
bool read_package_results(const std::string &dir, json *results, std::string *error);
// The SHA-256 of a file's bytes in hex (the digest a rerun and a merge record
// of their parent's and shards' results.json); "" when it cannot be read.
std::string sha256_file(const std::string &path);
// Recounts results["summary"] from its verdicts and returns the summary line.
std::string recount_summary(json &results);

// The parent package of --rerun-failed, read and checked against this run.
struct Parent {
    std::string dir;      // as given
    std::string path;     // absolute
    std::string digest;   // SHA-256 of its results.json
    json results, environment;
    std::string waivers_text;
};
bool read_parent(const std::string &dir, Parent *p, std::string *err);

// ---- junit.xml ----------------------------------------------------------------
// junit.xml of a results.json: one testsuite per requirement, one testcase per
// test (one named after the requirement when it ran none). Written by pugixml:
// it escapes what XML needs, a newline in an attribute as &#10; (written raw,
// a parser reads it back as a space); verify reads it back the same way.
std::string junit_xml(const json &results);
// The text of a junit.xml attribute or element: `s` with each character that
// XML 1.0 cannot hold at all (control characters but tab, newline and carriage
// return) replaced by U+FFFD. pugixml writes the rest exactly (newlines in an
// attribute as &#10;, so a parser does not normalise them to spaces); verify
// compares the file's text with this of results.json's.
std::string junit_text(const std::string &s);

// ---- helpers shared by the package's writers and readers ---------------------
// Escapes text for HTML and SVG (the report).
std::string xml_escape(const std::string &s);
bool read_text(const std::string &path, std::string *out);
bool write_text(const std::string &path, const std::string &text, std::string *error);
// "xmc: tests:N passed:N failed:N unsupported:N waived:N"
std::string summary_line(int tests, int passed, int failed, int unsupported, int waived);
// The primitive a requirement ID belongs to: "PIN", "REG", "VMM", "COPY", "AFF".
std::string primitive_of(const std::string &id);
std::string human_bytes(unsigned long long n);

} // namespace xmc::conformance
