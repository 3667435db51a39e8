#include "where.hpp"

#include "catalogue.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace xmc::conformance {

namespace {

std::string relative(const std::string &path) {
    const std::string root = kWhereSourceRoot;
    return path.rfind(root, 0) == 0 ? path.substr(root.size()) : path;
}

void section(const char *title, const std::vector<std::string> &lines, const char *none) {
    std::printf("%s (%zu):\n", title, lines.size());
    if (lines.empty()) std::printf("  %s\n", none);
    for (const auto &l : lines) std::printf("  %s\n", l.c_str());
}

} // namespace

int where_command(const std::string &id) {
    const Requirement *req = nullptr;
    for (const auto &r : catalogue())
        if (r.id == id) req = &r;
    if (!req) {
        std::fprintf(stderr, "xmc where: '%s' is not a requirement of the catalogue; the IDs are:", id.c_str());
        for (const auto &r : catalogue()) std::fprintf(stderr, " %s", r.id.c_str());
        std::fprintf(stderr, "\n");
        return 2;
    }
    std::string caps, tiers;
    for (const auto &c : req->capabilities) caps += (caps.empty() ? "" : "+") + c;
    for (const auto &t : req->tiers) tiers += (tiers.empty() ? "" : ",") + t;
    std::printf("%s: %s\n  capabilities %s; tiers %s%s (conformance/requirements.tsv)\n\n", req->id.c_str(),
                req->summary.c_str(), caps.c_str(), tiers.c_str(),
                !req->waits.empty() ? ("; runs in the waiting lane under qualify --jobs: " + req->waits).c_str()
                : req->alone.empty() ? ""
                : ((req->alone_if_shared ? "; runs alone under qualify --jobs on a device other processes share: "
                                         : "; runs alone under qualify --jobs: ") + req->alone).c_str());

    // Test bodies: one line per test, whatever backends it is instantiated for.
    std::vector<std::string> tests;
    std::set<std::string> seen;
    const auto *ut = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < ut->total_test_suite_count(); ++i) {
        const auto *suite = ut->GetTestSuite(i);
        for (int j = 0; j < suite->total_test_count(); ++j) {
            const auto *t = suite->GetTestInfo(j);
            if (requirement_of_test(t->name()) != req) continue;
            std::string suite_name = suite->name();
            if (auto slash = suite_name.find('/'); slash != std::string::npos) suite_name = suite_name.substr(slash + 1);
            std::string name = t->name();
            if (auto slash = name.find('/'); slash != std::string::npos) name = name.substr(0, slash);
            const std::string line = relative(t->file()) + ":" + std::to_string(t->line()) + "  " + suite_name + "." + name;
            if (seen.insert(line).second) tests.push_back(line);
        }
    }
    section("tests", tests, "none registered (a hardware benchmark measures it: see the tiers)");

    std::map<std::string, std::vector<std::string>> by_kind;
    for (int i = 0; i < kWhereIndexCount; ++i) {
        const WhereEntry &e = kWhereIndex[i];
        if (id != e.id) continue;
        by_kind[e.kind].push_back(std::string(e.file) + ":" + std::to_string(e.line) + "  " + e.text);
    }
    const std::pair<const char *, const char *> kinds[] = {
        {"model", "model rule (reference/model/)"},
        {"planner", "affine planner (reference/affine/)"},
        {"common", "shared backend code (reference/common/)"},
        {"host", "host backend (reference/host/)"},
        {"cuda", "CUDA backend (reference/cuda/)"},
        {"level_zero", "Level Zero backend (reference/level_zero/)"},
        {"fakes", "fakes (fakes/)"},
        {"harness", "harness (conformance/harness/)"},
        {"hardware", "hardware tiers (hardware/)"},
    };
    for (const auto &[kind, title] : kinds) {
        std::printf("\n");
        section(title, by_kind[kind], "no line names it");
    }
    std::printf("\n");
    section("broken backends that must fail it (conformance/broken/, their `xmc-selftest: fails` line)",
            by_kind["broken-fails"], "none");
    return 0;
}

} // namespace xmc::conformance
