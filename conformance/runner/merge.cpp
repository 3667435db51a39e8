#include "merge.hpp"

#include "catalogue.hpp"
#include "package.hpp"
#include "report.hpp"


#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace xmc::conformance {
namespace {

struct Shard {
    std::string dir, path, digest;
    json results, environment, caps;
    std::string mustpass, waivers;
    int index = 0, count = 0;
};

// What every shard must have in common, each with its name in the refusal.
struct Same {
    const char *what;
    std::string (*of)(const Shard &);
};
const Same kSame[] = {
    {"backend (name, version, library, capabilities)",
     [](const Shard &s) {
         const json &b = s.results["backend"];
         return b.value("name", "") + " " + b.value("version", "") + " " + b.value("path", "") + " [" +
                b.value("capabilities", "") + "]";
     }},
    {"suite (version and git revision)",
     [](const Shard &s) {
         return s.results["suite"].value("version", "") + " (" + s.results["suite"].value("git_revision", "") + ")";
     }},
    {"environment (the devices)", [](const Shard &s) { return device_identity(s.environment).dump(); }},
    {"selection (--filter and --tier)",
     [](const Shard &s) { return "filter '" + s.results.value("filter", "") + "', tier '" + s.results.value("tier", "") + "'"; }},
    {"must-pass list (mustpass.txt)", [](const Shard &s) { return s.mustpass; }},
    {"waiver file (waivers.tsv)", [](const Shard &s) { return s.waivers; }},
    {"number of shards (--shard I/N's N)", [](const Shard &s) { return std::to_string(s.count); }},
};

bool load_shard(const std::string &dir, Shard *s, std::string *err) {
    s->dir = dir;
    if (!read_package_results(dir, &s->results, err)) return false;
    if (!s->results["shard"].is_object()) {
        *err = dir + " is not a shard package: its results.json records no --shard I/N";
        return false;
    }
    s->index = s->results["shard"].value("index", 0);
    s->count = s->results["shard"].value("count", 0);
    std::string text;
    for (const auto &[file, into] : {std::pair<const char *, json *>{"environment.json", &s->environment},
                                     std::pair<const char *, json *>{"capabilities.json", &s->caps}}) {
        if (!read_text(dir + "/" + file, &text) || (*into = json::parse(text, nullptr, false)).is_discarded()) {
            *err = dir + " is not a complete package: " + file + " is missing or not JSON";
            return false;
        }
    }
    if (!read_text(dir + "/mustpass.txt", &s->mustpass) || !read_text(dir + "/waivers.tsv", &s->waivers)) {
        *err = dir + " is not a complete package: mustpass.txt or waivers.tsv is missing";
        return false;
    }
    std::error_code ec;
    s->path = std::filesystem::absolute(dir, ec).lexically_normal().string();
    s->digest = sha256_file(dir + "/results.json");
    return true;
}

std::string share(const Shard &s) { return s.dir + " (shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + ")"; }

} // namespace

int merge(const std::vector<std::string> &dirs, const std::string &out_dir) {
    std::vector<Shard> shards(dirs.size());
    std::string err;
    for (size_t i = 0; i < dirs.size(); ++i)
        if (!load_shard(dirs[i], &shards[i], &err)) {
            std::fprintf(stderr, "xmc merge: %s\n", err.c_str());
            return 2;
        }
    // One backend, suite, environment, selection and N.
    for (const Same &same : kSame)
        for (size_t i = 1; i < shards.size(); ++i)
            if (same.of(shards[i]) != same.of(shards[0])) {
                std::fprintf(stderr, "xmc merge: the shards are not of one %s: %s has %s, %s has %s\n", same.what,
                             share(shards[0]).c_str(), same.of(shards[0]).c_str(), share(shards[i]).c_str(),
                             same.of(shards[i]).c_str());
                return 2;
            }
    // Each selected row exactly once: no overlap, no gap.
    const std::string filter = shards[0].results.value("filter", ""), tier = shards[0].results.value("tier", "");
    std::map<std::string, const Shard *> holder;
    for (const Shard &s : shards)
        for (const auto &r : s.results["requirements"]) {
            const std::string id = r.value("id", "");
            if (holder.count(id)) {
                std::fprintf(stderr, "xmc merge: the shards overlap: %s is in %s and in %s\n", id.c_str(),
                             share(*holder[id]).c_str(), share(s).c_str());
                return 2;
            }
            holder[id] = &s;
        }
    json merged = shards[0].results;
    merged["requirements"] = json::array();
    std::vector<std::string> gaps;
    size_t position = 0;
    for (const auto &row : catalogue()) {
        if (!row.selected_by(filter, tier)) continue;
        const int owner = static_cast<int>(position++ % shards[0].count) + 1;
        if (!holder.count(row.id)) {
            gaps.push_back(row.id + " (shard " + std::to_string(owner) + "/" + std::to_string(shards[0].count) + ")");
            continue;
        }
        for (const auto &r : holder[row.id]->results["requirements"])
            if (r.value("id", "") == row.id) merged["requirements"].push_back(r);
        holder.erase(row.id);
    }
    if (!holder.empty()) {
        std::fprintf(stderr, "xmc merge: %s (in %s) is not a row of the selection (filter '%s', tier '%s') of suite %s\n",
                     holder.begin()->first.c_str(), share(*holder.begin()->second).c_str(), filter.c_str(), tier.c_str(),
                     suite_version());
        return 2;
    }
    if (!gaps.empty()) {
        std::string list;
        for (const auto &g : gaps) list += (list.empty() ? "" : ", ") + g;
        std::fprintf(stderr, "xmc merge: the shards leave a gap: no package given holds %s\n", list.c_str());
        return 2;
    }
    // At most one shard measured the benchmarks.
    const Shard *bench = nullptr;
    for (const Shard &s : shards)
        if (s.results.value("bench", false)) {
            if (bench) {
                std::fprintf(stderr, "xmc merge: %s and %s both hold benchmarks: run --bench in one shard only\n",
                             share(*bench).c_str(), share(s).c_str());
                return 2;
            }
            bench = &s;
        }

    // The joined package: the shards' requirements in catalogue order, their
    // logs, and the files they share.
    std::error_code ec;
    std::filesystem::create_directories(out_dir + "/logs", ec);
    if (ec) {
        std::fprintf(stderr, "xmc merge: cannot create %s/logs: %s\n", out_dir.c_str(), ec.message().c_str());
        return 2;
    }
    std::filesystem::remove(out_dir + "/bench.json", ec);
    std::filesystem::remove(out_dir + "/bench.csv", ec);
    std::filesystem::remove_all(out_dir + "/plots", ec);
    merged["shard"] = nullptr;
    merged["bench"] = bench != nullptr;
    merged["shards"] = json::array();
    int repeat = 1;
    for (const Shard &s : shards) {
        json ids = json::array();
        for (const auto &r : s.results["requirements"]) ids.push_back(r.value("id", ""));
        json entry = {{"path", s.path}, {"index", s.index}, {"count", s.count}, {"results_sha256", s.digest},
                      {"requirements", ids}, {"backend", s.results["backend"]}, {"suite", s.results["suite"]},
                      {"devices", device_identity(s.environment)}, {"repeat", s.results.value("repeat", 1)}};
        if (s.results.contains("parent")) entry["parent"] = s.results["parent"];
        merged["shards"].push_back(entry);
        repeat = std::max(repeat, s.results.value("repeat", 1));
        for (const auto &f : std::filesystem::directory_iterator(s.dir + "/logs", ec))
            std::filesystem::copy_file(f.path(), out_dir + "/logs/" + f.path().filename().string(),
                                       std::filesystem::copy_options::overwrite_existing, ec);
    }
    merged["repeat"] = repeat;
    merged.erase("parent");
    merged.erase("jobs");
    const std::string summary = recount_summary(merged);
    const std::string &first = shards[0].dir;
    std::string env_text, caps_text;
    read_text(first + "/environment.json", &env_text);
    read_text(first + "/capabilities.json", &caps_text);
    std::string bench_json, bench_csv;
    if (bench) {
        read_text(bench->dir + "/bench.json", &bench_json);
        read_text(bench->dir + "/bench.csv", &bench_csv);
    }
    if (!write_text(out_dir + "/results.json", merged.dump(2) + "\n", &err) ||
        !write_text(out_dir + "/junit.xml", junit_xml(merged), &err) ||
        !write_text(out_dir + "/summary.txt", summary + "\n", &err) ||
        !write_text(out_dir + "/mustpass.txt", shards[0].mustpass, &err) ||
        !write_text(out_dir + "/waivers.tsv", shards[0].waivers, &err) ||
        !write_text(out_dir + "/capabilities.json", caps_text, &err) ||
        !write_text(out_dir + "/environment.json", env_text, &err) ||
        (bench && (!write_text(out_dir + "/bench.json", bench_json, &err) ||
                   !write_text(out_dir + "/bench.csv", bench_csv, &err))) ||
        !write_report(out_dir, &err)) {
        std::fprintf(stderr, "xmc merge: %s\n", err.c_str());
        return 2;
    }
    std::printf("xmc merge: joined %zu shards of %d into %s: %zu requirements\n%s\n", shards.size(), shards[0].count,
                out_dir.c_str(), merged["requirements"].size(), summary.c_str());
    std::printf("xmc merge: check the package with: xmc verify %s\n", out_dir.c_str());
    return 0;
}

} // namespace xmc::conformance
