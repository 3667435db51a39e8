#include "stateful.hpp"

#include <rapidcheck/detail/Configuration.h>

namespace xmc::conformance {

std::string rc_reproduce_string(const std::string &id, const rc::detail::Reproduce &repro) {
    rc::detail::Configuration config = rc::detail::configuration();
    config.reproduce.clear();
    config.reproduce[id] = repro;
    return rc::detail::configToString(config);
}

uint64_t rc_seed() { return rc::detail::configuration().testParams.seed; }

} // namespace xmc::conformance
