// The requirement catalogue (conformance/requirements.tsv, embedded at build
// time so the runner is self-contained on a GPU machine).
#pragma once
#include <xmc/backend.h>

#include <string>
#include <vector>

namespace xmc::conformance {

struct Requirement {
    std::string id;          // "PIN-FREE"
    std::string capability;  // "pin", ..., or "model"
    std::vector<std::string> tiers;
    std::string summary;

    std::string test_prefix() const;  // "PIN_FREE_"
    bool in_tier(const std::string &t) const;
};

const std::vector<Requirement> &catalogue();
// The capability bit named by a catalogue capability; 0 for "model".
xmc_caps capability_bit(const std::string &name);
// The requirement a test name belongs to ("PIN_FREE_RefusesX/host" -> PIN-FREE),
// or nullptr. The longest matching prefix wins (PIN_AFTER_FREE_ over none).
const Requirement *requirement_of_test(const std::string &test_name);

} // namespace xmc::conformance
