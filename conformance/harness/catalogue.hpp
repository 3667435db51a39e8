// The requirement catalogue (conformance/requirements.tsv, embedded at build
// time so the runner is self-contained on a GPU machine). It is the one source
// of a requirement's capabilities and tiers (SPEC 6): test bodies never restate
// them; the fixture skips a test whose row's capabilities the backend lacks.
#pragma once
#include <xmc/backend.h>

#include <string>
#include <vector>

namespace xmc::conformance {

struct Requirement {
    std::string id;          // "PIN-FREE"
    std::string capability;  // the primary capability ("pin", ...), or "model"; names the must-pass list
    std::vector<std::string> capabilities;  // every capability its tests need, primary first
    std::vector<std::string> tiers;
    std::string summary;
    // Why the requirement runs alone under `qualify --jobs N` (the fifth
    // column, "alone: <why>"): its tests check state another process changes
    // (a GPU's free memory, a wall-clock bound). "" when it may share the machine.
    std::string alone;
    // "alone on a shared device: <why>": alone only when the backend's device is shared with
    // other processes (qualify finds out, device_shared()).
    bool alone_if_shared = false;
    // Why its tests mostly sleep (the fifth column "waits: <why>"): `qualify --jobs N` runs
    // such rows one at a time in a lane beside the N. "" for the others.
    std::string waits;
    // Why its tests are the concurrency checks (the sixth column, "threads: <why>"): where the
    // ThreadSanitizer twins are built, a plain `qualify` also runs them under it (a race that did
    // not happen to corrupt anything in the plain run is still reported). "" for the others.
    std::string threads;

    std::string test_prefix() const;  // "PIN_FREE_"
    bool in_tier(const std::string &t) const;
    // In the selection of `--filter F --tier T` (either empty: no condition).
    bool selected_by(const std::string &filter, const std::string &tier) const;
    // The first capability of the row that `declared` lacks, or "" when none is missing
    // ("model" rows need none).
    std::string missing_capability(xmc_caps declared) const;
};

// --filter: comma-separated globs, each '-GLOB' an exclusion, as --gtest_filter users expect of
// its ':' and '-' ("VMM-*,GRAPH-*,-VMM-SPEED"): an ID is selected when it matches one of the other
// globs (or there are none: "-*-SPEED" is everything but the speed rows) and no exclusion.
bool filter_matches(const std::string &filter, const std::string &id);
// Why a --filter is malformed (an empty glob: "PIN-*,", ",-", "-"), or "" when it is not.
std::string filter_problem(const std::string &filter);

const std::vector<Requirement> &catalogue();
// Parses catalogue text (the embedded one, or a file for `list-requirements
// --catalogue`); a malformed row is reported in *error and parsing stops.
bool parse_catalogue(const std::string &tsv, std::vector<Requirement> *out, std::string *error);
// Replaces the catalogue this process uses (list-requirements --catalogue).
void use_catalogue(std::vector<Requirement> rows);
// The capability bit named by a catalogue capability; 0 for "model".
xmc_caps capability_bit(const std::string &name);
// The requirement a test name belongs to ("PIN_FREE_RefusesX/host" -> PIN-FREE),
// or nullptr. The longest matching prefix wins (PIN_AFTER_FREE_ over none).
const Requirement *requirement_of_test(const std::string &test_name);

} // namespace xmc::conformance
