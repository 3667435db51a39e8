// xmc bench's baselines (format xmc-bench-baseline/2): one run's rows as a baseline, a baseline
// from several runs with a tolerance per row from their spread, and a run held to one. Ratios,
// not figures, so a machine whose own peak moved does not fail (bench.hpp says more).
#include "bench.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <string>
#include <vector>

namespace xmc::conformance {

namespace {
constexpr const char *kBaselineFormat = "xmc-bench-baseline/2";

// The rows a baseline can hold: a ratio measured, not a broken measurement.
bool baseline_row(const json &r) {
    return r["ratio"].is_number() && r["ratio"].get<double>() > 0 && r.value("verdict", "") != "broken";
}
json baseline_head(const json &doc) {
    char when[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return {{"format", kBaselineFormat}, {"kind", doc.value("kind", "")}, {"device", doc.value("device", "")},
            {"driver", doc.value("driver", "")}, {"backend", doc.value("backend", "")}, {"recorded", when},
            {"rows", json::array()}};
}

std::string slug_of(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') o += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        else if (!o.empty() && o.back() != '-') o += '-';
    }
    while (!o.empty() && o.back() == '-') o.pop_back();
    return o;
}
} // namespace

std::string baseline_name(const json &doc) {
    return slug_of(doc.value("device", "unknown")) + "-" + slug_of(doc.value("driver", "unknown")) + ".json";
}

json baseline_of(const json &doc, double tolerance) {
    json b = baseline_head(doc);
    b["runs"] = 1;
    for (const auto &r : doc["rows"]) {
        if (!baseline_row(r)) continue;
        b["rows"].push_back({{"series", r.value("series", r.value("path", ""))}, {"bytes", r.value("bytes", 0ull)},
                             {"unit", r.value("unit", "")}, {"ratio", r["ratio"]}, {"tolerance", tolerance}});
    }
    return b;
}

bool make_baseline(const std::vector<std::string> &runs, json *out, std::string *error) {
    if (runs.size() < 3) {
        *error = "--make-baseline needs at least 3 runs (5 are recommended) to derive each row's tolerance from their "
                 "spread; got " + std::to_string(runs.size());
        return false;
    }
    std::vector<json> docs;
    for (const auto &f : runs) {
        std::string text;
        json j = read_text(f, &text) ? json::parse(text, nullptr, false) : json();
        if (j.is_discarded() || !j.is_object() || !j["rows"].is_array() || !j.contains("device")) {
            *error = "--make-baseline " + f + ": not the JSON of xmc bench --json (an object with 'device' and 'rows')";
            return false;
        }
        if (!docs.empty() && (j.value("device", "") != docs[0].value("device", "") ||
                              j.value("driver", "") != docs[0].value("driver", ""))) {
            *error = "--make-baseline " + f + " is of device '" + j.value("device", "") + "' with driver '" +
                     j.value("driver", "") + "', " + runs[0] + " of '" + docs[0].value("device", "") + "' with '" +
                     docs[0].value("driver", "") + "': a baseline is of one device model and driver";
            return false;
        }
        docs.push_back(std::move(j));
    }
    json b = baseline_head(docs[0]);
    b["runs"] = docs.size();
    size_t left_out = 0;
    for (const auto &r0 : docs[0]["rows"]) {
        const std::string series = r0.value("series", r0.value("path", ""));
        const unsigned long long bytes = r0.value("bytes", 0ull);
        const std::string unit = r0.value("unit", "");
        std::vector<double> ratios;
        for (const auto &d : docs)
            for (const auto &r : d["rows"])
                if (r.value("series", r.value("path", "")) == series && r.value("bytes", 0ull) == bytes &&
                    r.value("unit", "") == unit && baseline_row(r)) {
                    ratios.push_back(r["ratio"].get<double>());
                    break;
                }
        if (ratios.size() != docs.size()) {  // a row some run lacks or measured as broken: no spread to judge by
            left_out += baseline_row(r0);
            continue;
        }
        std::sort(ratios.begin(), ratios.end());
        const double med = median_of(ratios);
        const double dev = std::max(med - ratios.front(), ratios.back() - med) / med;
        const double tol = std::min(kMaxTolerance, std::max(kMinTolerance, 2 * dev));
        json row = {{"series", series}, {"bytes", bytes}, {"unit", unit}, {"ratio", med}, {"tolerance", tol},
                    {"runs_min", ratios.front()}, {"runs_max", ratios.back()}};
        if (2 * dev > kMaxTolerance)
            row["note"] = "the runs' ratios spread further than the largest tolerance: this row can tell little";
        b["rows"].push_back(row);
    }
    b["left_out"] = left_out;
    *out = b;
    return true;
}

bool compare_baseline(json &doc, const json &baseline, const std::string &source, std::string *error) {
    if (baseline.is_object() && baseline.value("format", "") == "xmc-bench-baseline/1") {
        *error = "baseline " + source + " is of format xmc-bench-baseline/1, which holds figures: a machine whose own "
                 "peak moved failed it with its raw path as slow as the backend. Make a baseline of ratios from 5 runs: "
                 "xmc bench --make-baseline run1.json ... run5.json --out BASE.json";
        return false;
    }
    if (!baseline.is_object() || baseline.value("format", "") != kBaselineFormat || !baseline["rows"].is_array()) {
        *error = "baseline " + source + " is not a baseline (a JSON object of format " + kBaselineFormat +
                 " with 'rows'; xmc bench --make-baseline makes one)";
        return false;
    }
    const std::string dev = baseline.value("device", ""), drv = baseline.value("driver", "");
    if (dev != doc.value("device", "") || drv != doc.value("driver", "")) {
        *error = "baseline " + source + " is for device '" + dev + "' with driver '" + drv + "', but this run measured '" +
                 doc.value("device", "") + "' with driver '" + doc.value("driver", "") +
                 "': compare with the baseline of this device model and driver (hardware/baselines/" + baseline_name(doc) + ")";
        return false;
    }
    for (const auto &br : baseline["rows"]) {
        const double tol = br.value("tolerance", -1.0);
        if (!br["ratio"].is_number() || br["ratio"].get<double>() <= 0 || tol < 0 || tol >= 1) {
            *error = "baseline " + source + ": row '" + br.value("series", "") + "' needs a ratio above 0 and a tolerance in [0, 1)";
            return false;
        }
    }
    doc["baseline"] = {{"file", source}, {"device", dev}, {"driver", drv}, {"recorded", baseline.value("recorded", "")}};
    for (auto &r : doc["rows"]) {
        for (const auto &br : baseline["rows"]) {
            if (br.value("series", "") != r.value("series", r.value("path", "")) || br.value("bytes", 0ull) != r.value("bytes", 0ull) ||
                br.value("unit", "") != r.value("unit", ""))
                continue;
            const double base = br["ratio"].get<double>(), tol = br["tolerance"].get<double>();
            const double floor = base * (1 - tol);
            r["baseline"] = {{"ratio", base}, {"tolerance", tol}, {"floor", floor}};
            const std::string v = r.value("verdict", "");
            if (!r["ratio"].is_number() || (v != "ok" && v != "noisy")) break;
            const Judgement j = judge(ratio_spread(r), floor);
            // A drop measured beyond doubt fails even where the target's side was noisy.
            if (j == Judgement::below) r["verdict"] = "below baseline";
            else if (j == Judgement::noisy) r["verdict"] = "noisy";
            break;
        }
    }
    return true;
}

} // namespace xmc::conformance
