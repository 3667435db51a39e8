// xmc: the conformance runner.
//   xmc list-backends
//   xmc list-requirements [--check] [--catalogue FILE]
//   xmc where ID                                 (the row, tests, model rule, backend code, broken backends)
//   xmc qualify --backend NAME|PATH --out DIR [--filter GLOB] [--waivers FILE]
//               [--timeout SECONDS] [--expect-fail ID,ID] [--bench [--bench-sizes 1M,16M]]
//   xmc verify DIR [--qualified]                 (checks a qualification package)
//   xmc bench --backend NAME|PATH [--kind cuda|host] [--sizes 1M,16M] [--min-ratio R] [--json FILE]
//   xmc mustpass [--check]                       (the must-pass lists of this suite version)
//   xmc run --backend NAME|PATH [gtest flags]     (the test bodies, in process)
#include "bench.hpp"
#include "catalogue.hpp"
#include "fixture.hpp"
#include "loader.hpp"
#include "package.hpp"
#include "qualify.hpp"
#include "verify.hpp"
#include "where.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

using namespace xmc::conformance;

namespace {

int usage() {
    std::cerr << "usage:\n"
                 "  xmc list-backends\n"
                 "  xmc list-requirements [--check] [--catalogue FILE]\n"
                 "  xmc where ID\n"
                 "  xmc list-devices --backend NAME|PATH\n"
                 "  xmc qualify --backend NAME|PATH --out DIR [--filter GLOB] [--waivers FILE]\n"
                 "              [--timeout SECONDS] [--expect-fail ID[,ID...]] [--bench [--bench-sizes 1M,16M,...]]\n"
                 "  xmc verify DIR [--qualified]\n"
                 "  xmc bench --backend NAME|PATH [--kind cuda|host] [--sizes 1M,16M,...] [--min-ratio R]\n"
                 "            [--json FILE] [--timeout SECONDS]\n"
                 "  xmc mustpass [--check]\n"
                 "  xmc run --backend NAME|PATH [--xmc-results FILE] [gtest flags]\n";
    return 2;
}

// A number option's value, or a clear error (exit 2) for anything else.
bool parse_number(const std::string &flag, const std::string &text, double lo, double *out) {
    char *end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != 0 || !(v >= lo)) {
        std::fprintf(stderr, "xmc: %s takes a number >= %g, not '%s'\n", flag.c_str(), lo, text.c_str());
        return false;
    }
    *out = v;
    return true;
}

// `xmc mustpass`: prints each checked-in list; --check validates them against
// the catalogue (every ID exists, has the list's capability, runs in `pr`, and
// every `pr` requirement is listed).
int mustpass_command(bool check) {
    for (const auto &l : mustpass_lists()) {
        std::printf("%s/%s.txt:", suite_version(), l.name.c_str());
        for (const auto &id : l.ids) std::printf(" %s", id.c_str());
        std::printf("\n");
    }
    if (!check) return 0;
    const auto problems = check_mustpass_lists();
    for (const auto &pr : problems) std::fprintf(stderr, "xmc mustpass: %s\n", pr.c_str());
    std::printf("xmc mustpass: %zu problem(s) in the must-pass lists of suite %s\n", problems.size(), suite_version());
    return problems.empty() ? 0 : 1;
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
        std::printf("%-24s %-22s %-22s tests=%-3d %s\n", r.id.c_str(), caps.c_str(), tiers.c_str(), n,
                    r.summary.c_str());
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
        emit(ev);
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

// Removes "--flag VALUE" from argv, returning VALUE ("" if absent).
std::string take_flag(int &argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) {
            std::string v = argv[i + 1];
            for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
            argc -= 2;
            return v;
        }
    }
    return "";
}

bool take_switch(int &argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], flag) == 0) {
            for (int j = i; j + 1 <= argc; ++j) argv[j] = argv[j + 1];
            --argc;
            return true;
        }
    }
    return false;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const std::string cmd = argv[1];
    // Drop the subcommand: what follows is that command's flags.
    for (int j = 1; j + 1 <= argc; ++j) argv[j] = argv[j + 1];
    --argc;

    const std::string backend = take_flag(argc, argv, "--backend");
    if (!backend.empty()) selected_backends() = {backend};

    if (cmd == "list-backends") return list_backends();
    if (cmd == "list-devices") return list_devices(backend);
    if (cmd == "list-requirements") {
        const bool check = take_switch(argc, argv, "--check");
        // Another catalogue than the embedded one: the test of the check itself.
        if (const std::string file = take_flag(argc, argv, "--catalogue"); !file.empty()) {
            std::ifstream in(file);
            std::stringstream text;
            text << in.rdbuf();
            std::vector<Requirement> rows;
            std::string err;
            if (!in || !parse_catalogue(text.str(), &rows, &err)) {
                std::fprintf(stderr, "xmc list-requirements: %s: %s\n", file.c_str(), in ? err.c_str() : "cannot read");
                return 2;
            }
            use_catalogue(std::move(rows));
        }
        ::testing::InitGoogleTest(&argc, argv);
        return list_requirements(check);
    }
    if (cmd == "where") {
        if (argc != 2 || argv[1][0] == '-') return usage();
        ::testing::InitGoogleTest(&argc, argv);
        return where_command(argv[1]);
    }
    if (cmd == "run") {
        const std::string results = take_flag(argc, argv, "--xmc-results");
        ::testing::InitGoogleTest(&argc, argv);
        if (!results.empty())
            ::testing::UnitTest::GetInstance()->listeners().Append(new ResultsListener(results));
        return RUN_ALL_TESTS();
    }
    if (cmd == "qualify") {
        QualifyOptions o;
        o.backend = backend;
        o.out_dir = take_flag(argc, argv, "--out");
        o.filter = take_flag(argc, argv, "--filter");
        o.waivers = take_flag(argc, argv, "--waivers");
        o.expect_fail = take_flag(argc, argv, "--expect-fail");
        const std::string t = take_flag(argc, argv, "--timeout");
        double timeout = o.timeout_s;
        if (!t.empty() && !parse_number("--timeout", t, 1, &timeout)) return 2;
        o.timeout_s = static_cast<int>(timeout);
        const std::string sizes = take_flag(argc, argv, "--bench-sizes");
        o.bench = take_switch(argc, argv, "--bench");
        std::string err;
        if (!sizes.empty() && !parse_sizes(sizes, &o.bench_sizes, &err)) {
            std::fprintf(stderr, "xmc qualify: --bench-sizes: %s\n", err.c_str());
            return 2;
        }
        if (o.backend.empty() || o.out_dir.empty() || argc > 1) return usage();
        ::testing::InitGoogleTest(&argc, argv);  // registers the tests so they can be listed
        return qualify(o);
    }
    if (cmd == "verify") {
        const bool qualified = take_switch(argc, argv, "--qualified");
        if (argc != 2 || argv[1][0] == '-') return usage();
        return verify(argv[1], qualified);
    }
    if (cmd == "mustpass") {
        const bool check = take_switch(argc, argv, "--check");
        if (argc > 1) return usage();
        return mustpass_command(check);
    }
    if (cmd == "bench") {
        BenchOptions o;
        o.backend = backend;
        o.kind = take_flag(argc, argv, "--kind");
        const std::string json_out = take_flag(argc, argv, "--json");
        const std::string sizes = take_flag(argc, argv, "--sizes");
        const std::string floor = take_flag(argc, argv, "--min-ratio");
        const std::string t = take_flag(argc, argv, "--timeout");
        std::string err;
        double timeout = o.timeout_s;
        if (!sizes.empty() && !parse_sizes(sizes, &o.sizes, &err)) {
            std::fprintf(stderr, "xmc bench: --sizes: %s\n", err.c_str());
            return 2;
        }
        if (!floor.empty() && !parse_number("--min-ratio", floor, 0, &o.min_ratio)) return 2;
        if (!t.empty() && !parse_number("--timeout", t, 1, &timeout)) return 2;
        o.timeout_s = static_cast<int>(timeout);
        if (!o.kind.empty() && o.kind != "cuda" && o.kind != "host") {
            std::fprintf(stderr, "xmc bench: --kind is cuda or host, not '%s'\n", o.kind.c_str());
            return 2;
        }
        if (o.backend.empty() || argc > 1) return usage();
        return bench_command(o, json_out);
    }
    return usage();
}
