// What the VMM test files (test_vmm*.cpp, one part of the VMM-* requirements each) share: the
// environment and gates (vmm_env.hpp), the slot model and the stateful commands, the harness's
// hostile inputs, boundaries and fault sweep, and the names the bodies use from them.
#pragma once
#include "boundary.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "os_facts.hpp"
#include "slot_model.hpp"
#include "spin_barrier.hpp"
#include "vmm_commands.hpp"
#include "vmm_env.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xmc::conformance {
namespace {
using model::kNoTag;
using model::SlotModel;
using model::SlotState;
using model::Source;
using namespace std::chrono_literals;
using namespace vmm_commands;
} // namespace
} // namespace xmc::conformance
