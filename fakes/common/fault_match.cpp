// Matching installed fault rules to calls: per-rule call counters, WHEN selection, and
// how the rules that fire combine (fakes/README.md).
#include "fault_script.hpp"

namespace xmc_faults {

Decision decide(std::vector<Rule>& rules, const Call& call) {
    Decision d;
    for (Rule& r : rules) {
        if (r.entry != "*" && r.entry != call.entry) continue;
        ++r.seen;
        if (r.k != 0 && r.seen != r.k && !(r.and_later && r.seen > r.k)) continue;
        bool fires = false;  // a rule that makes the call answer its code
        switch (r.action) {
            case Action::fail: fires = true; break;
            case Action::size_limit: fires = call.has_size && call.size > r.value; break;
            // Counted now, not at installation: a destroy makes room again.
            case Action::exhaust: fires = r.target->live() >= r.value; break;
            case Action::delay: d.delay_us += r.value; break;
            case Action::exec_delay: d.exec_delay_us += r.value; break;
            case Action::nonidentity:
                if (!d.nonidentity) d.offset = r.value;
                d.nonidentity = true;
                break;
        }
        if (fires && !d.fail) {
            d.fail = true;
            d.code = r.code;
        }
    }
    return d;
}

}  // namespace xmc_faults
