// xmc verify DIR: checks that a qualification package is complete and
// consistent (SPEC 9). Every problem is printed with its reason; the exit
// status is 0 (no problem), 1 (problems) or 2 (DIR is not there).
//
// The checks, each with its own reason (docs/qualify.md lists them):
//   files      every file of the package is present and its JSON parses
//   suite      the package's format and suite version are this xmc's
//   summary    summary.txt, results.json's summary and the verdicts agree
//   verdicts   each verdict agrees with its tests' outcomes; a log per run requirement
//   mustpass   mustpass.txt is the checked-in union for the declared capabilities
//              of the suite version it names (qualify --mustpass; this xmc holds
//              the lists of every version), and every must-pass requirement has a result
//   waivers    waivers.tsv parses; waivers apply only to must-pass requirements;
//              a waived verdict has its waiver; no waived requirement passed
//   capabilities  capabilities.json, results.json and environment.json name
//              the same backend and capability set; unsupported exactly where
//              a capability is not declared; the library, where present, agrees
//   junit      junit.xml parses (pugixml; else its reason and offset) and holds the
//              same requirements, tests and outcomes, messages exactly (newlines too)
//   environment  suite version and revision, OS, compiler, devices recorded; the
//              CPU model and cores, huge pages, each device's PCI link and NUMA node
//              (or why unknown)
//   fleet      runs, failed runs and flake rates (--repeat) agree; a shard holds its
//              share; a merge's shards are of one backend, suite and environment and
//              cover the selection once; a rerun's marks match its parent's record
//              (and the parent, where it is on this machine)
//   bench      bench.json and bench.csv present exactly when --bench ran; ratios
//              match figures; verdicts follow from ratio, target and peak
//   report     report.html and report.md show the summary; their plots exist
// --qualified also requires every must-pass requirement to have passed, been
// waived, or be unsupported for a declared reason (no device, no driver).
#pragma once
#include <string>

namespace xmc::conformance {

int verify(const std::string &dir, bool require_qualified);

} // namespace xmc::conformance
