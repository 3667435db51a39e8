#include "catalogue.hpp"

#include <sstream>

namespace xmc::conformance {

extern const char *const kCatalogueTsv;  // generated from requirements.tsv

std::string Requirement::test_prefix() const {
    std::string p = id;
    for (char &c : p)
        if (c == '-') c = '_';
    return p + "_";
}

bool Requirement::in_tier(const std::string &t) const {
    for (const auto &x : tiers)
        if (x == t) return true;
    return false;
}

const std::vector<Requirement> &catalogue() {
    static const std::vector<Requirement> rows = [] {
        std::vector<Requirement> v;
        std::istringstream in(kCatalogueTsv);
        for (std::string line; std::getline(in, line);) {
            if (line.empty() || line[0] == '#') continue;
            std::istringstream fields(line);
            Requirement r;
            std::string tiers;
            std::getline(fields, r.id, '\t');
            std::getline(fields, r.capability, '\t');
            std::getline(fields, tiers, '\t');
            std::getline(fields, r.summary);
            std::istringstream ts(tiers);
            for (std::string t; std::getline(ts, t, ',');) r.tiers.push_back(t);
            v.push_back(r);
        }
        return v;
    }();
    return rows;
}

xmc_caps capability_bit(const std::string &name) {
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (name == xmc_cap_string(1ull << i)) return 1ull << i;
    return 0;
}

const Requirement *requirement_of_test(const std::string &test_name) {
    const Requirement *best = nullptr;
    for (const auto &r : catalogue()) {
        const std::string p = r.test_prefix();
        if (test_name.rfind(p, 0) == 0 && (!best || p.size() > best->test_prefix().size())) best = &r;
    }
    return best;
}

} // namespace xmc::conformance
