// The package's human-readable report: report.html and report.md, written from
// the package's own files (results.json, environment.json, capabilities.json,
// bench.json, mustpass.txt, waivers.tsv), with the bandwidth plots as SVG
// files in plots/ (hand-written SVG text: figure against transfer size, the
// peak measured in the same run drawn beside it).
#pragma once
#include <string>
#include <vector>

namespace xmc::conformance {

// Writes report.html, report.md and plots/*.svg into the package `dir`.
bool write_report(const std::string &dir, std::string *error);

// The plot files a report names (relative to the package, "plots/x.svg"),
// read back from report.md; verify checks each exists and is SVG.
std::vector<std::string> plots_named_in(const std::string &report_md);

} // namespace xmc::conformance
