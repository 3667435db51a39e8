// The fault hook for Level Zero backends (driver_control.hpp): the fake Level
// Zero driver (fakes/level_zero) that the loader loaded from
// ZE_ENABLE_ALT_DRIVERS. Kept apart from the CUDA hook; driver_control()
// dispatches here for the backends ze_backend() names.
#pragma once
#include "driver_control.hpp"

#include <string>

namespace xmc::conformance {

// The in-tree Level Zero backend ("level_zero") and its broken variants of
// the self-test ("broken_ze_*").
bool ze_backend(const std::string &name);
// Fills `c` from the fake the loader loaded; false with the reason (a
// reason of an unsupported skip) when there is none.
bool ze_control(DriverControl *c, const std::string &name, std::string *why);

} // namespace xmc::conformance
