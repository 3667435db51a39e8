#include "report.hpp"

#include "package.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

namespace xmc::conformance {
namespace {

const std::vector<std::pair<std::string, std::string>> kPrimitives = {
    {"PIN", "pinning"}, {"REG", "registration"}, {"VMM", "fixed-address slots"},
    {"COPY", "copies"}, {"AFF", "affine transfer"}};

std::string num(double v, const char *f = "%.2f") {
    char s[64];
    std::snprintf(s, sizeof s, f, v);
    return s;
}

std::string num_or_na(const json &v, const char *f = "%.2f") { return v.is_number() ? num(v.get<double>(), f) : "n/a"; }

// Markdown table cells may not hold '|' or newlines.
std::string md_cell(std::string s) {
    for (char &c : s)
        if (c == '\n') c = ' ';
    std::string o;
    for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
    return o;
}

// A file name for a series: lower case letters, digits and '-'.
std::string slug(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c))) o += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        else if (!o.empty() && o.back() != '-') o += '-';
    }
    while (!o.empty() && o.back() == '-') o.pop_back();
    return o.empty() ? "series" : o;
}

// ---- SVG ----------------------------------------------------------------------

struct Point {
    double bytes, figure, peak;  // peak <= 0: not measured
};

// A round step for about five ticks up to `top`.
double tick_step(double top) {
    const double raw = top / 5;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (raw <= m * mag) return m * mag;
    return 10 * mag;
}

// Figure (solid, dots) and peak (dashed, squares) against transfer size on a
// log2 axis. Plain SVG 1.1 text.
std::string svg_plot(const std::string &title, const std::string &unit, std::vector<Point> pts) {
    std::sort(pts.begin(), pts.end(), [](const Point &a, const Point &b) { return a.bytes < b.bytes; });
    const double W = 640, H = 340, L = 72, R = 24, T = 44, B = 58;
    double xmin = std::log2(pts.front().bytes), xmax = std::log2(pts.back().bytes);
    if (xmax - xmin < 1) { xmin -= 1; xmax += 1; }
    double ymax = 0;
    for (const auto &p : pts) ymax = std::max({ymax, p.figure, p.peak});
    if (ymax <= 0) ymax = 1;
    const double step = tick_step(ymax * 1.08);
    const double ytop = std::ceil(ymax * 1.08 / step) * step;
    auto X = [&](double bytes) { return L + (std::log2(bytes) - xmin) / (xmax - xmin) * (W - L - R); };
    auto Y = [&](double v) { return T + (1 - v / ytop) * (H - T - B); };

    std::ostringstream s;
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << W << "\" height=\"" << H
      << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s << "<title>" << xml_escape(title) << ": figure and peak (" << xml_escape(unit) << ") by transfer size</title>\n";
    s << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"#ffffff\"/>\n";
    s << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
      << xml_escape(title) << "</text>\n";
    // y grid and labels
    for (double v = 0; v <= ytop + step / 2; v += step) {
        s << "<line x1=\"" << L << "\" y1=\"" << num(Y(v), "%.1f") << "\" x2=\"" << W - R << "\" y2=\"" << num(Y(v), "%.1f")
          << "\" stroke=\"#dddddd\"/>\n";
        s << "<text x=\"" << L - 6 << "\" y=\"" << num(Y(v) + 4, "%.1f") << "\" text-anchor=\"end\">"
          << num(v, v < 10 ? "%.3g" : "%.0f") << "</text>\n";
    }
    // x ticks at each measured size
    for (const auto &p : pts) {
        s << "<line x1=\"" << num(X(p.bytes), "%.1f") << "\" y1=\"" << H - B << "\" x2=\"" << num(X(p.bytes), "%.1f")
          << "\" y2=\"" << H - B + 5 << "\" stroke=\"#333333\"/>\n";
        s << "<text x=\"" << num(X(p.bytes), "%.1f") << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">"
          << xml_escape(human_bytes(static_cast<unsigned long long>(p.bytes))) << "</text>\n";
    }
    s << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
      << "\" stroke=\"#333333\"/>\n";
    s << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"#333333\"/>\n";
    s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 14 << "\" text-anchor=\"middle\">transfer size</text>\n";
    s << "<text x=\"16\" y=\"" << (T + H - B) / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
      << (T + H - B) / 2 << ")\">" << xml_escape(unit) << "</text>\n";
    // the peak, dashed
    std::string peak_line, fig_line;
    for (const auto &p : pts) {
        if (p.peak > 0) peak_line += num(X(p.bytes), "%.1f") + "," + num(Y(p.peak), "%.1f") + " ";
        fig_line += num(X(p.bytes), "%.1f") + "," + num(Y(p.figure), "%.1f") + " ";
    }
    if (!peak_line.empty())
        s << "<polyline points=\"" << peak_line << "\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" "
          << "stroke-dasharray=\"6 4\"/>\n";
    s << "<polyline points=\"" << fig_line << "\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"2\"/>\n";
    for (const auto &p : pts) {
        if (p.peak > 0)
            s << "<rect x=\"" << num(X(p.bytes) - 3.5, "%.1f") << "\" y=\"" << num(Y(p.peak) - 3.5, "%.1f")
              << "\" width=\"7\" height=\"7\" fill=\"#c0392b\"><title>peak " << num(p.peak) << " " << xml_escape(unit)
              << " at " << xml_escape(human_bytes(static_cast<unsigned long long>(p.bytes))) << "</title></rect>\n";
        s << "<circle cx=\"" << num(X(p.bytes), "%.1f") << "\" cy=\"" << num(Y(p.figure), "%.1f")
          << "\" r=\"4\" fill=\"#1f5fa8\"><title>" << num(p.figure) << " " << xml_escape(unit) << " at "
          << xml_escape(human_bytes(static_cast<unsigned long long>(p.bytes)))
          << (p.peak > 0 && unit == "GB/s" ? ", ratio " + num(p.figure / p.peak, "%.3f") : std::string()) << "</title></circle>\n";
    }
    // legend
    s << "<line x1=\"" << L + 10 << "\" y1=\"" << T - 8 << "\" x2=\"" << L + 40 << "\" y2=\"" << T - 8
      << "\" stroke=\"#1f5fa8\" stroke-width=\"2\"/><text x=\"" << L + 46 << "\" y=\"" << T - 4
      << "\">backend (xmc)</text>\n";
    s << "<line x1=\"" << L + 160 << "\" y1=\"" << T - 8 << "\" x2=\"" << L + 190 << "\" y2=\"" << T - 8
      << "\" stroke=\"#c0392b\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/><text x=\"" << L + 196 << "\" y=\""
      << T - 4 << "\">platform peak, same run</text>\n";
    s << "</svg>\n";
    return s.str();
}

// ---- report -------------------------------------------------------------------

struct Plot {
    std::string file, title;
};

// One plot per series (a path across sizes: one curve, the peak's beside
// it), whatever its unit (GB/s, ms, us, ns).
std::vector<Plot> write_plots(const std::string &dir, const json &bench, std::string *error) {
    std::vector<Plot> plots;
    if (!bench.is_object() || !bench.contains("rows")) return plots;
    std::map<std::string, std::vector<Point>> series;
    std::map<std::string, std::string> unit_of;
    std::vector<std::string> order;
    for (const auto &r : bench["rows"]) {
        if (r.value("unit", "").empty() || !r["figure"].is_number() || r.value("bytes", 0ull) == 0) continue;
        // A 2-D copy's figure is plotted once, against the raw 2-D copy; its
        // ratio to the 1-D copy is in the table.
        if (r.value("path", "").find(" vs 1-D copy") != std::string::npos) continue;
        const std::string name = r.value("series", r.value("path", ""));
        if (!series.count(name)) order.push_back(name);
        unit_of[name] = r.value("unit", "");
        series[name].push_back({static_cast<double>(r["bytes"].get<unsigned long long>()), r["figure"].get<double>(),
                                r["peak"].is_number() ? r["peak"].get<double>() : 0});
    }
    std::filesystem::create_directories(dir + "/plots");
    for (const auto &name : order) {
        std::string file = "plots/" + slug(name) + ".svg";
        for (int k = 2; std::any_of(plots.begin(), plots.end(), [&](const Plot &p) { return p.file == file; }); ++k)
            file = "plots/" + slug(name) + "-" + std::to_string(k) + ".svg";
        if (!write_text(dir + "/" + file, svg_plot(name, unit_of[name], series[name]), error)) return {};
        plots.push_back({file, name});
    }
    return plots;
}

struct Counts {
    int passed = 0, failed = 0, unsupported = 0, waived = 0;
};

} // namespace

std::vector<std::string> plots_named_in(const std::string &report_md) {
    std::vector<std::string> v;
    size_t pos = 0;
    while ((pos = report_md.find("](plots/", pos)) != std::string::npos) {
        const size_t end = report_md.find(')', pos);
        if (end == std::string::npos) break;
        v.push_back(report_md.substr(pos + 2, end - pos - 2));
        pos = end;
    }
    return v;
}

bool write_report(const std::string &dir, std::string *error) {
    error->clear();
    std::string text;
    auto load = [&](const std::string &name, json *out) {
        if (!read_text(dir + "/" + name, &text)) return false;
        *out = json::parse(text, nullptr, false);
        return !out->is_discarded();
    };
    json results, env, caps, bench;
    if (!load("results.json", &results) || !load("environment.json", &env) || !load("capabilities.json", &caps)) {
        *error = "the report needs results.json, environment.json and capabilities.json in " + dir;
        return false;
    }
    const bool have_bench = load("bench.json", &bench);
    std::string mustpass_txt, waivers_txt;
    read_text(dir + "/mustpass.txt", &mustpass_txt);
    read_text(dir + "/waivers.tsv", &waivers_txt);
    MustPass mp;
    std::string ignored;
    parse_mustpass(mustpass_txt, &mp, &ignored);
    std::vector<Waiver> waivers;
    parse_waivers(waivers_txt, "waivers.tsv", &waivers, &ignored);

    const json &sum = results["summary"];
    const std::string summary = summary_line(sum.value("tests", 0), sum.value("passed", 0), sum.value("failed", 0),
                                             sum.value("unsupported", 0), sum.value("waived", 0));
    const std::string backend = results["backend"].value("name", "?");
    const std::string title = "xmc qualification: " + backend + " " + results["backend"].value("version", "");
    // The backend qualifies when every must-pass requirement has a result and
    // none failed; "unsupported" counts only where its tests ran and skipped
    // for a declared reason (no device, no driver), as `xmc verify --qualified`.
    int present = 0, passed = 0, waived = 0, declared_skip = 0, not_ok = 0;
    for (const auto &r : results["requirements"]) {
        if (!mp.contains(r.value("id", ""))) continue;
        ++present;
        const std::string v = r.value("verdict", "");
        if (v == "passed") ++passed;
        else if (v == "waived") ++waived;
        else if (v == "unsupported" && !r["tests"].empty()) ++declared_skip;
        else ++not_ok;
    }
    const int missing = static_cast<int>(mp.ids.size()) - present;
    const bool qualified = missing == 0 && not_ok == 0;
    const std::string verdict_text =
        "Must-pass requirements (" + std::to_string(mp.ids.size()) + "): " + std::to_string(passed) + " passed, " +
        std::to_string(waived) + " waived, " + std::to_string(declared_skip) +
        " unsupported for a declared reason (no device, driver or fault injection), " + std::to_string(not_ok) +
        " failed or not run, " + std::to_string(missing) + " without a result: " +
        (qualified ? "the backend qualifies." : "the backend does NOT qualify.");
    const std::vector<Plot> plots = have_bench ? write_plots(dir, bench, error) : std::vector<Plot>{};
    if (!error->empty()) return false;

    // Environment rows shared by both formats.
    std::vector<std::pair<std::string, std::string>> envrows = {
        {"suite", env["suite"].value("version", "?") + " (git " + env["suite"].value("git_revision", "?") + ")"},
        {"date", env.value("date", "")},
        {"OS", env["os"]["os_release"].value("PRETTY_NAME", "?") + "; " + env["os"].value("sysname", "") + " " +
                   env["os"].value("release", "") + " " + env["os"].value("machine", "")},
        {"CPU", env["cpu"].value("model", "?") + " (" + std::to_string(env["cpu"].value("cores", 0)) + " cores, " +
                    std::to_string(env["cpu"].value("online", 0)) + " online), memory " + env["cpu"].value("memory", "?")},
        {"compiler", env.value("compiler", "?")},
        {"backend library", env["backend"].value("path", "?")}};
    if (env.contains("drivers"))
        for (const auto &d : env["drivers"])
            envrows.push_back({"driver (" + d.value("api", "?") + ")",
                               d.value("library", "") + (d.contains("version") ? " version " + d.value("version", "") : "")});
    for (const auto &d : env["devices"])
        envrows.push_back({"device " + std::to_string(d.value("index", 0)),
                           d.value("name", d.value("error", "?")) + (d.contains("uuid") ? ", UUID " + d.value("uuid", "") : "") +
                               (d.value("total_memory", 0ull) ? ", " + human_bytes(d["total_memory"].get<unsigned long long>()) : "")});
    for (const auto &d : env["devices"]) {
        if (!d.contains("pci") || !d["pci"].is_object()) continue;
        const json &pci = d["pci"];
        envrows.push_back({"device " + std::to_string(d.value("index", 0)) + " PCIe",
                           pci.contains("error") ? pci.value("error", "")
                                                 : pci.value("bus_id", "") + ": link " + pci.value("current_link_speed", "?") + " x" +
                                                       pci.value("current_link_width", "?") + " (max " + pci.value("max_link_speed", "?") +
                                                       " x" + pci.value("max_link_width", "?") + "), NUMA node " + pci.value("numa_node", "?")});
    }
    if (env.contains("devices_error")) envrows.push_back({"devices", env.value("devices_error", "")});
    if (env.contains("hugepages")) {
        const json &h = env["hugepages"];
        envrows.push_back({"transparent huge pages", "enabled: " + h["transparent"].value("enabled", "?") + "; defrag: " +
                                                         h["transparent"].value("defrag", "?")});
        std::string expl;
        for (auto &[k, v] : h["explicit"].items()) expl += (expl.empty() ? "" : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
        envrows.push_back({"explicit huge pages", expl});
    }
    if (env.contains("variables"))
        for (auto &[k, v] : env["variables"].items()) envrows.push_back({k, v.get<std::string>()});

    std::ostringstream md, html;
    // ---- report.md ----
    md << "# " << title << "\n\n`" << summary << "`\n\n" << verdict_text << "\n\n";
    md << "Backend `" << backend << "` " << results["backend"].value("version", "") << ", capabilities: `"
       << results["backend"].value("capabilities", "") << "`. Filter: `"
       << (results.value("filter", "").empty() ? "none" : results.value("filter", "")) << "`. Tier: `"
       << (results.value("tier", "").empty() ? "every" : results.value("tier", "")) << "`.\n\n";
    md << "## Environment\n\n| | |\n|---|---|\n";
    for (const auto &[k, v] : envrows) md << "| " << md_cell(k) << " | " << md_cell(v) << " |\n";
    // ---- report.html ----
    html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << xml_escape(title)
         << "</title>\n<style>\n"
         << "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\n"
         << "table{border-collapse:collapse;margin:0.5em 0 1.5em 0}\n"
         << "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:13px}\n"
         << "th{background:#f0f0f0}\n.passed{background:#e3f4e3}.failed{background:#f9d6d5}\n"
         << ".unsupported{background:#eeeeee}.waived{background:#fcf0cf}\n"
         << ".bench-ok{background:#e3f4e3}.bench-missed{background:#f9d6d5}.bench-broken{background:#e8d5f5}"
         << ".bench-noisy{background:#fdf1c7}"
         << ".bench-below-baseline{background:#fcdcb8}\n"
         << "#summary{font-size:16px;font-weight:bold}.ok{color:#1e7b1e}.bad{color:#b0201a}\n"
         << "pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}\nfigure{margin:1em 0}\n"
         << "</style>\n</head>\n<body>\n";
    html << "<h1>" << xml_escape(title) << "</h1>\n";
    html << "<p id=\"summary\"><code>" << xml_escape(summary) << "</code></p>\n";
    html << "<p id=\"verdict\" class=\"" << (qualified ? "ok" : "bad") << "\">" << xml_escape(verdict_text) << "</p>\n";
    html << "<p>Backend <b>" << xml_escape(backend) << "</b> " << xml_escape(results["backend"].value("version", ""))
         << ", capabilities: <code>" << xml_escape(results["backend"].value("capabilities", "")) << "</code>. Filter: <code>"
         << xml_escape(results.value("filter", "").empty() ? "none" : results.value("filter", "")) << "</code>. Tier: <code>"
         << xml_escape(results.value("tier", "").empty() ? "every" : results.value("tier", "")) << "</code>.</p>\n";
    html << "<h2>Environment</h2>\n<table>\n";
    for (const auto &[k, v] : envrows) html << "<tr><th>" << xml_escape(k) << "</th><td>" << xml_escape(v) << "</td></tr>\n";
    html << "</table>\n";

    // ---- how the package was made: jobs, shards, merges, reruns, repeats ----
    std::vector<std::string> made;
    if (results.value("jobs", 1) > 1)
        made.push_back("Requirements ran " + std::to_string(results.value("jobs", 1)) +
                       " at a time (--jobs); the catalogue's alone rows by themselves, its waiting rows one at a "
                       "time beside the others.");
    if (results["shard"].is_object())
        made.push_back("Shard " + std::to_string(results["shard"].value("index", 0)) + "/" +
                       std::to_string(results["shard"].value("count", 0)) +
                       " (--shard): every N-th row of the selection only; `xmc merge` joins the shards into one package.");
    if (results.contains("shards")) {
        std::string list;
        for (const auto &sh : results["shards"])
            list += (list.empty() ? "" : "; ") + std::string("shard ") + std::to_string(sh.value("index", 0)) + "/" +
                    std::to_string(sh.value("count", 0)) + " from " + sh.value("path", "") + " (results sha256 " +
                    sh.value("results_sha256", "").substr(0, 12) + "..., " + std::to_string(sh["requirements"].size()) +
                    " requirements" + (sh.contains("parent") ? ", itself a rerun" : "") + ")";
        made.push_back("A merge (xmc merge) of " + std::to_string(results["shards"].size()) + " shards: " + list + ".");
    }
    if (results.contains("parent")) {
        const json &pa = results["parent"];
        std::string rerun;
        for (const auto &id : pa["rerun"]) rerun += (rerun.empty() ? "" : ", ") + id.get<std::string>();
        made.push_back("A rerun (--rerun-failed) of the parent package " + pa.value("path", "") + " (results sha256 " +
                       pa.value("results_sha256", "") + "): rerun " + (rerun.empty() ? "none (nothing had failed)" : rerun) +
                       "; the other " + std::to_string(pa["taken_over"].size()) + " requirements are taken over from it as they were.");
    }
    if (results.value("repeat", 1) > 1) {
        std::string flaky;
        for (const auto &r : results["requirements"])
            if (r.value("failed_runs", 0) > 0)
                flaky += (flaky.empty() ? "" : ", ") + r.value("id", "") + " " + num(r.value("flake_rate", 0.0), "%.2f");
        made.push_back("Each requirement ran " + std::to_string(results.value("repeat", 1)) +
                       " times (--repeat); any failing run fails it. Flake rates (failed runs / runs) above 0: " +
                       (flaky.empty() ? "none" : flaky) + ".");
    }
    if (!made.empty()) {
        md << "\n## How this package was made\n\n";
        html << "<h2>How this package was made</h2>\n<ul id=\"made\">\n";
        for (const auto &m : made) {
            md << "- " << md_cell(m) << "\n";
            html << "<li>" << xml_escape(m) << "</li>\n";
        }
        html << "</ul>\n";
    }

    // ---- requirements by primitive ----
    md << "\n## Requirements\n";
    html << "<h2>Requirements</h2>\n";
    for (const auto &[prefix, name] : kPrimitives) {
        Counts c;
        std::vector<const json *> rows;
        for (const auto &r : results["requirements"])
            if (primitive_of(r.value("id", "")) == prefix) {
                rows.push_back(&r);
                const std::string v = r.value("verdict", "");
                c.passed += v == "passed"; c.failed += v == "failed"; c.unsupported += v == "unsupported"; c.waived += v == "waived";
            }
        if (rows.empty()) continue;
        char head[256];
        std::snprintf(head, sizeof head, "%s: %s (passed %d, failed %d, unsupported %d, waived %d)", prefix.c_str(),
                      name.c_str(), c.passed, c.failed, c.unsupported, c.waived);
        md << "\n### " << head << "\n\n| requirement | capability | must pass | verdict | reason | tests | runs | seconds |\n"
           << "|---|---|---|---|---|---|---|---|\n";
        html << "<h3>" << xml_escape(head) << "</h3>\n<table>\n<tr><th>requirement</th><th>capability</th>"
             << "<th>must pass</th><th>verdict</th><th>reason</th><th>tests</th><th>runs</th><th>seconds</th></tr>\n";
        for (const json *r : rows) {
            int passed = 0;
            for (const auto &t : (*r)["tests"]) passed += t.value("status", "") == "passed";
            const std::string tests = std::to_string(passed) + "/" + std::to_string((*r)["tests"].size());
            const std::string v = r->value("verdict", "");
            const std::string id = r->value("id", "");
            const bool has_repro = v == "failed" || v == "waived";
            // Runs (--repeat: failed runs and the flake rate) and where the result comes from (--rerun-failed).
            std::string runs = std::to_string(r->value("runs", 0));
            if (r->value("failed_runs", 0) > 0)
                runs += ", " + std::to_string(r->value("failed_runs", 0)) + " failed (flake rate " +
                        num(r->value("flake_rate", 0.0), "%.2f") + ")";
            if (r->value("taken_over", false)) runs += "; taken over from the parent";
            if (r->value("rerun", false)) runs += "; rerun";
            md << "| " << (has_repro ? "[" + id + "](#" + slug(id) + ")" : id) << " | " << r->value("capability", "") << " | "
               << (r->value("mustpass", false) ? "yes" : "no") << " | **" << v << "** | " << md_cell(r->value("reason", ""))
               << " | " << tests << " | " << md_cell(runs) << " | " << num(r->value("seconds", 0.0)) << " |\n";
            html << "<tr class=\"" << xml_escape(v) << "\"><td>"
                 << (has_repro ? "<a href=\"#" + slug(id) + "\">" + xml_escape(id) + "</a>" : xml_escape(id)) << "</td><td>"
                 << xml_escape(r->value("capability", "")) << "</td><td>" << (r->value("mustpass", false) ? "yes" : "no")
                 << "</td><td><b>" << xml_escape(v) << "</b></td><td>" << xml_escape(r->value("reason", "")) << "</td><td>"
                 << tests << "</td><td>" << xml_escape(runs) << "</td><td>" << num(r->value("seconds", 0.0)) << "</td></tr>\n";
        }
        html << "</table>\n";
    }

    // ---- failures and their reproducers ----
    md << "\n## Failures and reproducers\n";
    html << "<h2>Failures and reproducers</h2>\n";
    int nfail = 0;
    for (const auto &r : results["requirements"]) {
        const std::string v = r.value("verdict", "");
        if (v != "failed" && v != "waived") continue;
        ++nfail;
        const std::string id = r.value("id", "");
        md << "\n### " << id << " (" << v << ")\n\n" << md_cell(r.value("reason", "")) << "\n\n";
        html << "<h3 id=\"" << slug(id) << "\">" << xml_escape(id) << " (" << xml_escape(v) << ")</h3>\n<p>"
             << xml_escape(r.value("reason", "")) << "</p>\n";
        std::string detail;
        for (const auto &t : r["tests"]) {
            const std::string st = t.value("status", "");
            if (st == "passed" || st == "skipped") continue;
            detail += t.value("name", "") + " [" + st + "]\n" + t.value("message", "").substr(0, 4000) + "\n\n";
        }
        const std::string repro = r.value("reproduce", "");
        if (!repro.empty()) {
            md << "Reproduce:\n\n```sh\n" << repro << "\n```\n\n";
            html << "<p>Reproduce:</p>\n<pre>" << xml_escape(repro) << "</pre>\n";
        }
        if (!detail.empty()) {
            md << "```\n" << detail << "```\n";
            html << "<pre>" << xml_escape(detail) << "</pre>\n";
        }
        md << "Log: `logs/" << id << ".log`\n";
        html << "<p>Log: <a href=\"logs/" << xml_escape(id) << ".log\">logs/" << xml_escape(id) << ".log</a></p>\n";
    }
    if (nfail == 0) {
        md << "\nNone.\n";
        html << "<p>None.</p>\n";
    }

    // ---- waivers ----
    md << "\n## Waivers\n\n";
    html << "<h2>Waivers</h2>\n";
    if (waivers.empty()) {
        md << "None (`waivers.tsv` holds no waiver).\n";
        html << "<p>None (<code>waivers.tsv</code> holds no waiver).</p>\n";
    } else {
        md << "| requirement | backend | device | reason | link |\n|---|---|---|---|---|\n";
        html << "<table>\n<tr><th>requirement</th><th>backend</th><th>device</th><th>reason</th><th>link</th></tr>\n";
        for (const auto &w : waivers) {
            md << "| " << w.id << " | " << md_cell(w.backend) << " | " << md_cell(w.device) << " | " << md_cell(w.reason)
               << " | " << md_cell(w.link) << " |\n";
            html << "<tr><td>" << xml_escape(w.id) << "</td><td>" << xml_escape(w.backend) << "</td><td>"
                 << xml_escape(w.device) << "</td><td>" << xml_escape(w.reason) << "</td><td>" << xml_escape(w.link)
                 << "</td></tr>\n";
        }
        html << "</table>\n";
    }

    // ---- benchmarks ----
    md << "\n## Benchmarks\n\n";
    html << "<h2>Benchmarks</h2>\n";
    if (!have_bench) {
        md << "Not run (`xmc qualify --bench` runs them).\n";
        html << "<p>Not run (<code>xmc qualify --bench</code> runs them).</p>\n";
    } else {
        if (bench.contains("skipped")) {
            md << "Skipped: " << bench.value("skipped", "") << "\n\n";
            html << "<p>Skipped: " << xml_escape(bench.value("skipped", "")) << "</p>\n";
        }
        if (bench.contains("error")) {
            md << "**Error**: " << bench.value("error", "") << "\n\n";
            html << "<p class=\"bad\">Error: " << xml_escape(bench.value("error", "")) << "</p>\n";
        }
        if (!bench["rows"].empty()) {
            const std::string note = "Each figure beside the platform peak measured in the same run; the ratio is 1.0 at the "
                                     "peak (for paired rows, the median of the per-pair ratios). A row is ok, missed (below its target), "
                                     "broken (above " + num(1.05) + " of its peak: a broken measurement), noisy (the median's "
                                     "95% interval straddles its target, baseline floor or " + num(1.05) + ": rerun it) or below baseline" +
                                     (bench.contains("baseline") ? " (" + bench["baseline"].value("file", "") + ")" : "") +
                                     ". The same rows: bench.csv.";
            md << note << "\n\n| path | size | figure | peak (same run) | ratio | target | baseline | verdict |\n"
               << "|---|---|---|---|---|---|---|---|\n";
            html << "<p>" << xml_escape(note) << "</p>\n<table id=\"bench\">\n<tr><th>path</th><th>size</th><th>figure</th>"
                 << "<th>peak (same run)</th><th>ratio</th><th>target</th><th>baseline</th><th>verdict</th></tr>\n";
            for (const auto &r : bench["rows"]) {
                const std::string unit = r.value("unit", "");
                const std::string size = r.value("bytes", 0ull) ? human_bytes(r["bytes"].get<unsigned long long>()) : "";
                std::string target;
                if (r.value("target", 0.0) > 0)
                    target = (r.value("requirement", "").empty() ? "" : r.value("requirement", "") + " ") + ">= " +
                             num(r["target"].get<double>());
                const std::string fig = num_or_na(r["figure"]) + " " + unit, peak = num_or_na(r["peak"]) + " " + unit;
                const std::string verdict = r.value("verdict", "");
                const std::string base = r.contains("baseline") ? "ratio " + num_or_na(r["baseline"].value("ratio", json()), "%.3f") + " (-" +
                                                                      num(100 * r["baseline"].value("tolerance", 0.0), "%.0f") + "%)"
                                                                : "";
                md << "| " << md_cell(r.value("path", "")) << " | " << size << " | " << fig << " | " << peak << " | "
                   << num_or_na(r["ratio"], "%.3f") << " | " << target << " | " << base << " | **" << verdict << "** |\n";
                html << "<tr class=\"bench-" << slug(verdict) << "\"><td>" << xml_escape(r.value("path", "")) << "</td><td>"
                     << size << "</td><td>" << xml_escape(fig) << "</td><td>" << xml_escape(peak) << "</td><td>"
                     << num_or_na(r["ratio"], "%.3f") << "</td><td>" << xml_escape(target) << "</td><td>" << xml_escape(base)
                     << "</td><td><b>" << xml_escape(verdict) << "</b></td></tr>\n";
            }
            html << "</table>\n";
        }
        for (const auto &p : plots) {
            md << "\n![" << md_cell(p.title) << "](" << p.file << ")\n";
            html << "<figure><img src=\"" << p.file << "\" alt=\"" << xml_escape(p.title) << "\" width=\"640\" height=\"340\">"
                 << "<figcaption>" << xml_escape(p.title) << ": figure against transfer size across the sizes measured, the peak dashed</figcaption></figure>\n";
        }
    }

    // ---- must-pass list and package contents ----
    std::string lists;
    for (const auto &l : mp.lists) lists += (lists.empty() ? "" : ", ") + mp.suite + "/" + l + ".txt";
    md << "\n## Must-pass list\n\nThe union of " << lists << " (`mustpass.txt`): ";
    html << "<h2>Must-pass list</h2>\n<p>The union of " << xml_escape(lists) << " (<code>mustpass.txt</code>): ";
    for (size_t i = 0; i < mp.ids.size(); ++i) {
        md << (i ? ", " : "") << mp.ids[i];
        html << (i ? ", " : "") << xml_escape(mp.ids[i]);
    }
    md << ".\n\n## Files\n\n`results.json`, `junit.xml`, `summary.txt`, `mustpass.txt`, `waivers.tsv`, "
       << "`capabilities.json`, `environment.json`" << (have_bench ? ", `bench.json`, `bench.csv`" : "")
       << ", `logs/`. Check the package with `xmc verify <dir>`.\n";
    html << ".</p>\n<h2>Files</h2>\n<p><code>results.json</code>, <code>junit.xml</code>, <code>summary.txt</code>, "
         << "<code>mustpass.txt</code>, <code>waivers.tsv</code>, <code>capabilities.json</code>, "
         << "<code>environment.json</code>" << (have_bench ? ", <code>bench.json</code>, <code>bench.csv</code>" : "")
         << ", <code>logs/</code>. Check the package with <code>xmc verify &lt;dir&gt;</code>.</p>\n</body>\n</html>\n";

    return write_text(dir + "/report.md", md.str(), error) && write_text(dir + "/report.html", html.str(), error);
}

} // namespace xmc::conformance
