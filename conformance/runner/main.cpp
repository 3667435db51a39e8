// xmc: the conformance runner. Its subcommands and their options are declared
// once, below, with CLI11, which prints `xmc --help` and `xmc SUBCOMMAND --help`
// from them and refuses (exit 2, naming it) an unknown subcommand or flag, a
// missing required option and a bad value.
//   xmc list-backends | list-devices | list-requirements | where ID
//   xmc qualify --backend NAME|PATH --out DIR ...   (the qualification package)
//   xmc verify DIR | merge DIR... --out DIR | bench --backend ... | mustpass [--check | --generate --out DIR]
//   xmc run --backend NAME|PATH [gtest flags]       (the test bodies, in process)
#include "bench.hpp"
#include "catalogue.hpp"
#include "fixture.hpp"
#include "transport_world.hpp"
#include "loader.hpp"
#include "merge.hpp"
#include "package.hpp"
#include "procs.hpp"
#include "qualify.hpp"
#include "verify.hpp"
#include "where.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

using namespace xmc::conformance;

// qualify.hpp: --shard I/N.
bool xmc::conformance::parse_shard(const std::string &text, int *index, int *count, std::string *error) {
    const size_t slash = text.find('/');
    char *end1 = nullptr, *end2 = nullptr;
    const std::string a = text.substr(0, slash), b = slash == std::string::npos ? "" : text.substr(slash + 1);
    const long i = std::strtol(a.c_str(), &end1, 10), n = std::strtol(b.c_str(), &end2, 10);
    if (slash == std::string::npos || a.empty() || b.empty() || *end1 || *end2 || n < 1 || i < 1 || i > n ||
        n > 100000) {
        *error = "takes I/N, share I of N with 1 <= I <= N (e.g. 1/2), not '" + text + "'";
        return false;
    }
    *index = static_cast<int>(i);
    *count = static_cast<int>(n);
    return true;
}

namespace {

// ---- option values CLI11 checks while it parses --------------------------------

// A number >= lo. (CLI11's PositiveNumber and Range name their upper bound,
// DBL_MAX, in the message; this names what is asked.)
CLI::Validator at_least(double lo) {
    std::ostringstream bound;
    bound << lo;
    return CLI::Validator(
        [lo, b = bound.str()](std::string &text) {
            double v = 0;
            if (CLI::detail::lexical_cast(text, v) && v >= lo) return std::string();
            return "takes a number >= " + b + ", not '" + text + "'";
        },
        ">=" + bound.str());
}

// A size list such as 1M,16M,1G (parse_sizes says what is wrong).
CLI::Validator size_list() {
    return CLI::Validator(
        [](std::string &text) {
            std::vector<unsigned long long> sizes;
            std::string err;
            return parse_sizes(text, &sizes, &err) ? std::string() : err;
        },
        "SIZE[,SIZE...]");
}

// --filter GLOB[,GLOB...][,-GLOB...] (filter_problem says what is wrong).
CLI::Validator filter_spec() {
    return CLI::Validator([](std::string &text) { return filter_problem(text); }, "GLOB[,GLOB...][,-GLOB...]");
}

// --shard I/N (parse_shard says what is wrong).
CLI::Validator shard_spec() {
    return CLI::Validator(
        [](std::string &text) {
            int i = 0, n = 0;
            std::string err;
            return parse_shard(text, &i, &n, &err) ? std::string() : err;
        },
        "I/N");
}

// Comma-separated requirement IDs of the catalogue (`none_too`: or "none" alone).
CLI::Validator catalogue_ids(bool none_too = false) {
    return CLI::Validator(
        [none_too](std::string &text) {
            if (none_too && text == "none") return std::string();
            std::stringstream ss(text);
            for (std::string id; std::getline(ss, id, ',');) {
                bool known = false;
                for (const auto &r : catalogue()) known |= r.id == id;
                if (!known) return "'" + id + "' is not a requirement of the catalogue (xmc list-requirements)";
            }
            return std::string();
        },
        "ID[,ID...]");
}

// The tiers the catalogue names (its third column).
std::vector<std::string> catalogue_tiers() {
    std::set<std::string> tiers;
    for (const auto &r : catalogue()) tiers.insert(r.tiers.begin(), r.tiers.end());
    return {tiers.begin(), tiers.end()};
}

// The suite versions `mustpass --version` takes: those whose lists are embedded, and this
// suite's own (whose lists a new version's build lacks until they are generated).
std::vector<std::string> mustpass_version_choices() {
    std::vector<std::string> v = mustpass_versions();
    if (std::find(v.begin(), v.end(), suite_version()) == v.end()) v.push_back(suite_version());
    return v;
}

// `xmc mustpass`: prints the embedded lists of one suite version, or of every
// version; --check checks them (or those under --dir): this suite's lists must be
// what --generate writes, an older version's must agree with the catalogue (every
// ID exists, has the list's capability, runs in `pr`).
int mustpass_command(bool check, const std::string &version, const std::string &dir) {
    std::vector<std::string> versions = version.empty() ? mustpass_version_choices() : std::vector<std::string>{version};
    size_t problems = 0;
    for (const auto &v : versions) {
        std::vector<MustPassList> lists = mustpass_lists(v);
        std::string shown = mustpass_dir(v);
        if (!dir.empty()) {
            std::string err;
            shown = dir + "/" + v + "/";
            if (!read_mustpass_lists(shown, &lists, &err)) {
                std::fprintf(stderr, "xmc mustpass: %s\n", err.c_str());
                return 2;
            }
        }
        for (const auto &l : lists) {
            std::printf("%s/%s.txt:", v.c_str(), l.name.c_str());
            for (const auto &id : l.ids) std::printf(" %s", id.c_str());
            std::printf("\n");
        }
        if (!check) continue;
        const auto found = check_mustpass_lists(v, lists, shown);
        for (const auto &pr : found) std::fprintf(stderr, "xmc mustpass: %s\n", pr.c_str());
        if (!found.empty() && v == suite_version())
            std::fprintf(stderr, "xmc mustpass: %s\n", mustpass_regenerate_hint(v).c_str());
        std::printf("xmc mustpass: %zu problem(s) in the must-pass lists of suite %s%s\n", found.size(), v.c_str(),
                    v == suite_version() ? " (this suite: compared with the lists the catalogue generates)"
                                         : " (frozen: checked for agreement with the catalogue)");
        problems += found.size();
    }
    return problems ? 1 : 0;
}

// `xmc mustpass --generate --out DIR`: writes this suite's lists, generated from the catalogue,
// as DIR/<list>.txt (conformance/mustpass/<suite version>/ in the source tree).
int mustpass_generate(const std::string &version, const std::string &out) {
    if (!version.empty() && version != suite_version()) {
        std::fprintf(stderr,
                     "xmc mustpass: --generate writes the lists of this suite, %s, from its catalogue; "
                     "the lists of %s are frozen\n",
                     suite_version(), version.c_str());
        return 2;
    }
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) {
        std::fprintf(stderr, "xmc mustpass: %s: %s\n", out.c_str(), ec.message().c_str());
        return 2;
    }
    const std::vector<MustPassList> lists = generate_mustpass_lists();
    for (const auto &l : lists) {
        const std::string path = out + "/" + l.name + ".txt";
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f << l.text;
        if (!f.flush()) {
            std::fprintf(stderr, "xmc mustpass: %s: cannot write\n", path.c_str());
            return 2;
        }
    }
    std::printf("xmc mustpass: wrote the %zu must-pass lists of suite %s to %s\n", lists.size(), suite_version(),
                out.c_str());
    // A list left from a capability since renamed or removed: said, not deleted.
    std::vector<MustPassList> there;
    std::string err;
    int stale = 0;
    if (read_mustpass_lists(out, &there, &err))
        for (const auto &t : there)
            if (std::none_of(lists.begin(), lists.end(), [&](const MustPassList &l) { return l.name == t.name; })) {
                std::fprintf(stderr, "xmc mustpass: %s/%s.txt is not a list the catalogue generates: remove it\n",
                             out.c_str(), t.name.c_str());
                ++stale;
            }
    return stale ? 1 : 0;
}

// The devices a backend reports, one line each: "device <index> <uuid> <name>".
int list_devices(const std::string &name) {
    std::string err;
    const LoadedBackend *b = load_backend(name.empty() ? "host" : name, &err);
    if (!b) {
        std::fprintf(stderr, "xmc list-devices: %s\n", err.c_str());
        return 2;
    }
    xmc_instance *inst = nullptr;
    xmc_open_params p{sizeof p, nullptr};
    if (b->api->open(&p, &inst) != XMC_OK) {
        std::fprintf(stderr, "xmc list-devices: cannot open backend %s\n", b->api->name);
        return 2;
    }
    int32_t n = 0;
    if (b->api->device_count(inst, &n) != XMC_OK) n = 0;
    for (int32_t i = 0; i < n; ++i) {
        xmc_device_info d{};
        if (b->api->device_info(inst, i, &d) != XMC_OK) continue;
        std::printf("device %d ", i);
        for (int k = 0; k < 16; ++k) std::printf("%02x", d.uuid[k]);
        std::printf(" %s\n", d.name);
    }
    std::printf("xmc: backend %s reports %d device(s)\n", b->api->name, n);
    b->api->close(inst);
    return 0;
}

int list_backends() {
    for (const auto &name : discover_backends()) {
        std::string err;
        const LoadedBackend *b = load_backend(name, &err);
        if (!b) {
            std::printf("%-22s (cannot load: %s)\n", name.c_str(), err.c_str());
            continue;
        }
        std::printf("%-22s %-8s caps=%s  %s\n", b->api->name, b->api->version,
                    caps_to_string(b->api->capabilities).c_str(), b->path.c_str());
    }
    return 0;
}

// The catalogue check (SPEC 6), both ways: every requirement whose capabilities
// some built backend declares (or that checks the model, or every backend's
// entry points) has at least one registered test naming it, and every
// registered test's name starts with a catalogue ID (qualify would never run
// one that does not).
int list_requirements(bool check) {
    xmc_caps declared = 0;
    for (const auto &name : discover_backends())
        if (const LoadedBackend *b = load_backend(name, nullptr)) declared |= b->api->capabilities;
    std::map<std::string, int> tests;
    std::vector<std::string> orphans;
    const auto *ut = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < ut->total_test_suite_count(); ++i) {
        const auto *suite = ut->GetTestSuite(i);
        for (int j = 0; j < suite->total_test_count(); ++j) {
            const auto *t = suite->GetTestInfo(j);
            if (const Requirement *r = requirement_of_test(t->name())) tests[r->id]++;
            else orphans.push_back(std::string(suite->name()) + "." + t->name() + " (" + t->file() + ":" +
                                   std::to_string(t->line()) + ")");
        }
    }
    int missing = 0;
    for (const auto &r : catalogue()) {
        const bool needed = r.capability == "model" || r.capability == "always" || r.missing_capability(declared).empty();
        const int n = tests.count(r.id) ? tests[r.id] : 0;
        std::string caps;
        for (const auto &c : r.capabilities) caps += (caps.empty() ? "" : "+") + c;
        std::string tiers;
        for (const auto &x : r.tiers) tiers += (tiers.empty() ? "" : ",") + x;
        std::printf("%-24s %-22s %-22s tests=%-3d %s%s\n", r.id.c_str(), caps.c_str(), tiers.c_str(), n,
                    r.summary.c_str(), !r.waits.empty() ? " [waits]" : r.alone.empty() ? "" : r.alone_if_shared ? " [alone on a shared device]" : " [alone]");
        if (check && needed && n == 0 && r.in_tier("pr")) {
            std::fprintf(stderr, "xmc: requirement %s (capabilities %s, declared by a built backend) has no test\n",
                         r.id.c_str(), caps.c_str());
            ++missing;
        }
    }
    if (check)
        for (const auto &o : orphans)
            std::fprintf(stderr, "xmc: test %s carries no catalogue ID, so qualify never runs it\n", o.c_str());
    if (check)
        std::printf("xmc: catalogue check: %d requirement(s) without a test, %zu test(s) without a requirement\n",
                    missing, orphans.size());
    return missing || (check && !orphans.empty()) ? 1 : 0;
}

// Records each test's outcome as one JSON line, flushed as it happens, so the
// parent learns which test was running if this process dies. A declared skip
// carries its kind and reason (the test's xmc_skip properties, fixture.hpp).
// Text that is not valid UTF-8 (a backend's message may hold any byte) is
// written with U+FFFD in its place: the line must always parse.
class ResultsListener : public ::testing::EmptyTestEventListener {
public:
    explicit ResultsListener(const std::string &path) : out_(path) {}
    void OnTestStart(const ::testing::TestInfo &info) override {
        emit({{"event", "start"}, {"name", full(info)}});
    }
    void OnTestEnd(const ::testing::TestInfo &info) override {
        const auto *r = info.result();
        std::string msg;
        for (int i = 0; i < r->total_part_count(); ++i) {
            const auto &p = r->GetTestPartResult(i);
            if (!msg.empty()) msg += "\n";
            if (p.file_name()) msg += std::string(p.file_name()) + ":" + std::to_string(p.line_number()) + ": ";
            msg += p.message();
        }
        const char *status = r->Skipped() ? "skipped" : r->Failed() ? "failed" : "passed";
        nlohmann::json ev = {{"event", "end"}, {"name", full(info)}, {"status", status},
                             {"ms", r->elapsed_time()}, {"message", msg}};
        for (int i = 0; i < r->test_property_count(); ++i) {
            const auto &p = r->GetTestProperty(i);
            if (std::strcmp(p.key(), kSkipKindProperty) == 0) ev["skip_kind"] = p.value();
            if (std::strcmp(p.key(), kSkipReasonProperty) == 0) ev["skip_reason"] = p.value();
        }
        // The data paths its transfers took (qualify's log names them per world).
        const auto paths = take_paths_taken();
        if (!paths.empty()) ev["paths"] = paths;
        emit(ev);
    }
    // This process could not join qualify's process world: said once, instead of any test.
    static void world_failed(const std::string &path, const std::string &why) {
        std::ofstream(path, std::ios::app) << nlohmann::json{{"event", "world"}, {"error", why}}.dump(
                                                  -1, ' ', false, nlohmann::json::error_handler_t::replace)
                                           << "\n";
    }

private:
    static std::string full(const ::testing::TestInfo &i) {
        return std::string(i.test_suite_name()) + "." + i.name();
    }
    void emit(const nlohmann::json &ev) {
        out_ << ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n" << std::flush;
    }
    std::ofstream out_;
};

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"xmc: the conformance suite of the host-memory offload primitives (docs/qualify.md)", "xmc"};
    app.footer("`xmc SUBCOMMAND --help` describes one subcommand.");
    // A refusal names the subcommand and what was wrong with it.
    app.failure_message([](const CLI::App *a, const CLI::Error &e) {
        std::string who = "xmc";
        for (const CLI::App *sub : a->get_subcommands()) who += " " + sub->get_name();
        return who + ": " + e.what() + " (" + who + " --help)\n";
    });
    std::string backend;  // --backend of whichever subcommand takes it

    auto *list_backends_cmd = app.add_subcommand("list-backends", "The built-in backends and their capabilities");

    auto *list_devices_cmd = app.add_subcommand("list-devices", "The devices a backend reports");
    list_devices_cmd->add_option("--backend", backend, "Backend name or library path (default: host)");

    auto *list_requirements_cmd = app.add_subcommand("list-requirements", "The requirement catalogue");
    bool check = false;
    std::string catalogue_file;
    list_requirements_cmd->add_flag("--check", check,
                                    "Fail (exit 1) if a requirement has no test or a test names no requirement");
    list_requirements_cmd->add_option("--catalogue", catalogue_file, "Check this catalogue file, not the embedded one")
        ->check(CLI::ExistingFile);

    auto *where_cmd = app.add_subcommand(
        "where", "A requirement's row, its tests, and the model, backend and broken-backend lines naming it");
    std::string where_id;
    where_cmd->add_option("ID", where_id, "Requirement ID, e.g. PIN-FREE")->required();

    auto *qualify_cmd = app.add_subcommand(
        "qualify", "Run the catalogue on one backend, each requirement in a child process, and write the package");
    QualifyOptions q;
    q.mustpass = suite_version();
    std::string bench_sizes;
    qualify_cmd->add_option("--backend", backend, "Backend name or library path")->required();
    qualify_cmd->add_option("--out", q.out_dir, "Folder that receives the package")->required();
    qualify_cmd->add_option("--filter", q.filter,
                            "Only the requirements whose ID matches one of these comma-separated globs and no "
                            "'-GLOB' exclusion, e.g. 'PIN-*', 'VMM-*,GRAPH-*', 'AFF-*,-AFF-SPEED'")
        ->check(filter_spec());
    qualify_cmd->add_option("--tier", q.tier, "Only the requirements of this tier (requirements.tsv, third column)")
        ->check(CLI::IsMember(catalogue_tiers()));
    qualify_cmd->add_option("--mustpass", q.mustpass, "Hold the backend to the must-pass lists of this suite version")
        ->check(CLI::IsMember(mustpass_versions()))
        ->capture_default_str();
    qualify_cmd->add_option("--waivers", q.waivers, "Waiver file: ID, backend, device, reason, link (tab-separated)")
        ->check(CLI::ExistingFile);
    qualify_cmd->add_option("--timeout", q.timeout_s, "Time limit of one requirement, in seconds")
        ->check(at_least(1))
        ->capture_default_str();
    qualify_cmd->add_option("--expect-fail", q.expect_fail,
                            "Self-test: succeed only when exactly these requirements fail ('none': none need fail, "
                            "but those of --may-fail may)")
        ->check(catalogue_ids(true));
    qualify_cmd->add_option("--may-fail", q.may_fail,
                            "Self-test: these requirements may fail as well (a race reaches them through the bug)")
        ->check(catalogue_ids())
        ->needs("--expect-fail");
    qualify_cmd->add_option("--sanitize", q.sanitize,
                            "thread: run the children under ThreadSanitizer (the TSan builds of the runner and backend); "
                            "none: not even the concurrency rows, which otherwise also run under it where those builds exist")
        ->check(CLI::IsMember({"thread", "none"}));
        auto *bench_flag = qualify_cmd->add_flag("--bench", q.bench, "Also run the benchmarks (bench.json, bench.csv, plots)");
    qualify_cmd->add_option("--bench-sizes", bench_sizes, "Transfer sizes of the benchmarks (default 16M,64M,256M,1G)")
        ->check(size_list())
        ->needs(bench_flag);
    qualify_cmd->add_option("--jobs", q.jobs, "Requirements run at once, each in its own child processes "
                                              "(a catalogue row marked alone runs by itself; one marked waits, "
                                              "in a lane beside the N)")
        ->check(at_least(1))
        ->capture_default_str();
    auto *procs_opt = qualify_cmd->add_option("--procs", q.procs, "The transfer requirements' tests also run in a world of N processes on "
                                                "this host, over gloo (the paths between processes, e.g. CUDA IPC); 0: not. "
                                                "Not given: 2, for each requirement whose tests took the direct path "
                                                "among threads")
        ->check(CLI::Validator(
            [](std::string &text) {
                int v = -1;
                return CLI::detail::lexical_cast(text, v) && (v == 0 || v >= 2) ? std::string()
                                                                                 : "takes 0 (off) or a number >= 2, not '" + text + "'";
            },
            "0|N>=2"))
        ->capture_default_str();
    std::string shard;
    auto *shard_opt = qualify_cmd->add_option("--shard", shard, "Run share I of N of the selection (every N-th row); "
                                                                 "xmc merge joins the shares")
        ->check(shard_spec());
    qualify_cmd->add_option("--repeat", q.repeat, "Run each requirement's tests N times; any failing run fails it "
                                                  "(the flake rate is reported)")
        ->check(at_least(1))
        ->capture_default_str();
    qualify_cmd->add_option("--rerun-failed", q.rerun_failed, "Rerun what failed, crashed or timed out in this earlier "
                                                              "package; take the rest over from it")
        ->check(CLI::ExistingDirectory)
        ->excludes(shard_opt)
        ->excludes("--filter")
        ->excludes("--tier")
        ->excludes("--waivers")
        ->excludes("--mustpass");

    auto *verify_cmd = app.add_subcommand("verify", "Check that a qualification package is complete and consistent");
    std::string verify_dir;
    bool qualified = false;
    verify_cmd->add_option("DIR", verify_dir, "The --out folder of xmc qualify")->required();
    verify_cmd->add_flag("--qualified", qualified,
                         "Also require every must-pass requirement to have passed, been waived or be unsupported");

    auto *merge_cmd = app.add_subcommand("merge", "Join the packages of qualify --shard I/N into one package");
    std::vector<std::string> merge_dirs;
    std::string merge_out;
    merge_cmd->add_option("DIR", merge_dirs, "The shard packages (the --out folders of qualify --shard)")
        ->required()
        ->check(CLI::ExistingDirectory);
    merge_cmd->add_option("--out", merge_out, "Folder that receives the joined package")->required();

    auto *bench_cmd = app.add_subcommand("bench", "The benchmarks beside the platform peak of the same run");
    BenchOptions b;
    BenchFiles bench_files;
    std::string sizes;
    bench_cmd->add_option("--backend", backend, "Backend name or library path (required unless --from)");
    bench_cmd->add_option("--kind", b.kind, "The benchmark to run (default: from the backend's name)")
        ->check(CLI::IsMember({"cuda", "host"}));
    bench_cmd->add_option("--sizes", sizes, "Transfer sizes (default 16M,64M,256M,1G)")->check(size_list());
    bench_cmd->add_option("--min-ratio", b.min_ratio, "Exit 1 when a figure's ratio to its peak is below this")
        ->check(at_least(0));
    bench_cmd->add_option("--json", bench_files.json_out, "Also write the table as JSON to this file, and as CSV beside it");
    bench_cmd->add_option("--from", b.from, "Judge these earlier runs (xmc bench --json, or xmc_gpu_bench --json files, "
                                            "one per size) instead of running")
        ->check(CLI::ExistingFile);
    bench_cmd->add_option("--baseline", bench_files.baseline, "Fail a figure that drops below this baseline beyond its "
                                                              "tolerance (hardware/baselines/<device>-<driver>.json)")
        ->check(CLI::ExistingFile);
    auto *write_baseline = bench_cmd->add_option("--write-baseline", bench_files.write_baseline,
                                                 "Write this run's figures as a baseline to this file");
    bench_cmd->add_option("--tolerance", bench_files.tolerance, "The tolerance of each row of a written baseline "
                                                                "(a fraction of its figure)")
        ->check(CLI::Range(0.0, 0.99))
        ->needs(write_baseline)
        ->capture_default_str();
    bench_cmd->add_option("--reruns", b.reruns, "Measure the sizes of noisy rows again, up to this many times, "
                                                "pooling each noisy row's pairs (CUDA runs; 0: report them noisy)")
        ->check(CLI::Range(0, 10))
        ->capture_default_str();
    bench_cmd->add_option("--timeout", b.timeout_s, "Time limit of one benchmark run, in seconds")
        ->check(at_least(1))
        ->capture_default_str();
    std::vector<std::string> make_baseline_runs;
    std::string make_baseline_out;
    auto *make_baseline_opt = bench_cmd->add_option(
        "--make-baseline", make_baseline_runs,
        "Write a baseline from these runs (xmc bench --json files of one device and driver, 5 recommended): each "
        "row's median ratio and a tolerance from their spread; runs nothing")
        ->check(CLI::ExistingFile);
    bench_cmd->add_option("--out", make_baseline_out, "The baseline file --make-baseline writes")->needs(make_baseline_opt);
    make_baseline_opt->needs("--out");
    std::string peaks_dir;
    bench_cmd->add_option("--peaks-vs-nvbandwidth", peaks_dir,
                          "Print each copy peak of xmc_gpu_bench --peaks-only beside nvbandwidth's (DIR of "
                          "hardware/nvbandwidth.sh) and exit 1 unless every one is within 2%; runs nothing")
        ->check(CLI::ExistingDirectory);

    auto *mustpass_cmd = app.add_subcommand("mustpass", "The must-pass lists embedded in this xmc; --generate writes "
                                                        "this suite's from the catalogue");
    bool mustpass_check = false, mustpass_gen = false;
    std::string mustpass_version, mustpass_out, mustpass_dir_opt;
    auto *check_flag = mustpass_cmd->add_flag(
        "--check", mustpass_check,
        "Fail (exit 1) if this suite's lists differ from those --generate writes, or an older suite's disagree "
        "with the catalogue");
    auto *generate_flag = mustpass_cmd->add_flag(
        "--generate", mustpass_gen, "Write this suite's lists, generated from the catalogue, to --out");
    mustpass_cmd->add_option("--version", mustpass_version, "Only the lists of this suite version (default: every one)")
        ->check(CLI::IsMember(mustpass_version_choices()));
    auto *out_opt = mustpass_cmd->add_option("--out", mustpass_out,
                                             "Folder that receives the generated lists (conformance/mustpass/" +
                                                 std::string(suite_version()) + " in the source tree)");
    mustpass_cmd->add_option("--dir", mustpass_dir_opt,
                             "Check the lists under DIR/<version>/ instead of those embedded (e.g. conformance/mustpass)")
        ->needs(check_flag)
        ->check(CLI::ExistingDirectory);
    generate_flag->needs(out_opt)->excludes(check_flag);
    out_opt->needs(generate_flag);

    auto *run_cmd = app.add_subcommand("run", "Run the test bodies in this process");
    std::string results_file;
    run_cmd->add_option("--backend", backend, "Backend name or library path (default: $XMC_BACKENDS, else host)");
    run_cmd->add_option("--xmc-results", results_file, "Write each test's outcome as a JSON line here (for qualify)");
    // One rank of qualify's process world (--procs; procs.hpp): set by qualify, not by hand.
    int xmc_rank = -1, xmc_ranks = 0;
    std::string xmc_store;
    auto *rank_opt = run_cmd->add_option("--xmc-rank", xmc_rank, "Run as this rank of a process world (for qualify --procs)")
        ->check(CLI::NonNegativeNumber);
    auto *ranks_opt = run_cmd->add_option("--xmc-ranks", xmc_ranks, "The process world's size (for qualify --procs)")
        ->check(at_least(2));
    auto *store_opt = run_cmd->add_option("--xmc-store", xmc_store,
                                          "The process world's rendezvous folder, a gloo FileStore (for qualify --procs)");
    rank_opt->needs(ranks_opt)->needs(store_opt);
    ranks_opt->needs(rank_opt);
    store_opt->needs(rank_opt);
    run_cmd->allow_extras();  // GoogleTest's flags
    run_cmd->footer("Other arguments go to GoogleTest: --gtest_filter=PATTERN, --gtest_repeat=N, --gtest_brief=1, ...");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        const int rc = app.exit(e);  // prints the help, or the error naming what was wrong
        return rc == 0 ? 0 : 2;
    }
    if (app.get_subcommands().empty()) {
        std::cerr << "xmc: a subcommand is required\n" << app.help();
        return 2;
    }

    // The backend the test bodies are instantiated for: set before GoogleTest
    // registers them (InitGoogleTest).
    if (!backend.empty()) selected_backends() = {backend};
    int gtest_argc = 1;
    char *gtest_argv[] = {argv[0], nullptr};

    if (*list_backends_cmd) return list_backends();
    if (*list_devices_cmd) return list_devices(backend);
    if (*list_requirements_cmd) {
        // Another catalogue than the embedded one: the test of the check itself.
        if (!catalogue_file.empty()) {
            std::ifstream in(catalogue_file);
            std::stringstream text;
            text << in.rdbuf();
            std::vector<Requirement> rows;
            std::string err;
            if (!in || !parse_catalogue(text.str(), &rows, &err)) {
                std::fprintf(stderr, "xmc list-requirements: %s: %s\n", catalogue_file.c_str(),
                             in ? err.c_str() : "cannot read");
                return 2;
            }
            use_catalogue(std::move(rows));
        }
        ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
        return list_requirements(check);
    }
    if (*where_cmd) {
        ::testing::InitGoogleTest(&gtest_argc, gtest_argv);
        return where_command(where_id);
    }
    if (*run_cmd) {
        // What CLI11 did not take goes to GoogleTest; what neither knows is refused.
        std::vector<std::string> rest = run_cmd->remaining();
        std::vector<char *> args = {argv[0]};
        for (auto &a : rest) args.push_back(a.data());
        args.push_back(nullptr);
        int n = static_cast<int>(args.size()) - 1;
        ::testing::InitGoogleTest(&n, args.data());
        if (n > 1) {
            std::fprintf(stderr, "xmc run: '%s' is neither an option of xmc run nor a GoogleTest flag (xmc run --help)\n",
                         args[1]);
            return 2;
        }
        if (xmc_rank >= xmc_ranks && xmc_rank >= 0) {
            std::fprintf(stderr, "xmc run: --xmc-rank %d is not below --xmc-ranks %d\n", xmc_rank, xmc_ranks);
            return 2;
        }
        ProcsRank rank;
        if (xmc_rank >= 0) {
            std::string why;
            if (!rank.join(xmc_rank, xmc_ranks, xmc_store, &why)) {
                std::fprintf(stderr, "xmc run: rank %d of %d cannot join the process world: %s\n", xmc_rank, xmc_ranks,
                             why.c_str());
                if (!results_file.empty()) ResultsListener::world_failed(results_file, why);
                return 5;  // qualify: the world did not start (its tests did not run)
            }
            std::printf("xmc run: rank %d of %d over gloo (file store %s), seed %llu (rerun: XMC_SEED=%llu)\n", xmc_rank,
                        xmc_ranks, xmc_store.c_str(), (unsigned long long)rank.seed(), (unsigned long long)rank.seed());
            std::fflush(stdout);
        }
        if (!results_file.empty())
            ::testing::UnitTest::GetInstance()->listeners().Append(new ResultsListener(results_file));
        const int rc = RUN_ALL_TESTS();
        rank.leave();
        return rc;
    }
    if (*qualify_cmd) {
        q.backend = backend;
        q.procs_auto = procs_opt->count() == 0;
        std::string err;
        if (!bench_sizes.empty()) parse_sizes(bench_sizes, &q.bench_sizes, &err);  // checked by size_list()
        if (!shard.empty()) parse_shard(shard, &q.shard_index, &q.shard_count, &err);  // checked by shard_spec()
        ::testing::InitGoogleTest(&gtest_argc, gtest_argv);  // registers the tests so they can be listed
        return qualify(q);
    }
    if (*verify_cmd) return verify(verify_dir, qualified);
    if (*merge_cmd) return merge(merge_dirs, merge_out);
    if (*mustpass_cmd) {
        if (mustpass_gen) return mustpass_generate(mustpass_version, mustpass_out);
        return mustpass_command(mustpass_check, mustpass_version, mustpass_dir_opt);
    }
    if (*bench_cmd) {
        if (!make_baseline_runs.empty()) return make_baseline_command(make_baseline_runs, make_baseline_out);
        if (!peaks_dir.empty()) return peaks_vs_nvbandwidth(peaks_dir);
        if (backend.empty() && b.from.empty()) {
            std::fprintf(stderr, "xmc bench: --backend is required (xmc bench --help)\n");
            return 2;
        }
        b.backend = backend;
        std::string err;
        if (!sizes.empty()) parse_sizes(sizes, &b.sizes, &err);  // checked by size_list()
        return bench_command(b, bench_files);
    }
    return 2;  // every subcommand is handled above
}
