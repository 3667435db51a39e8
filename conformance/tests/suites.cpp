// The parameterized suites, instantiated for every selected backend (SPEC 6),
// in the order they run. A test file holds every test of its requirements
// (a primitive's are split among a few files), whatever the fixture, so several
// files name one suite; gtest runs suites in
// the order they are first named, which is fixed here, in the first test file
// linked. The order is the one the suites had before their tests moved: the
// tests of a requirement run together in one process (xmc qualify), and what
// an earlier one leaves (the pinned-bytes peak, the first pin_stats of the
// process) is what a later one starts from, so a new order can change a
// self-test's verdict.
// TransferTest runs last; test_transfer.cpp instantiates it, as
// xmc_multirank links the transfer files (test_transfer*.cpp) without this one.
#include "absent_platform.hpp"
#include "copy_env.hpp"
#include "fault_sweep.hpp"
#include "hostile.hpp"
#include "pin_env.hpp"
#include "reg_env.hpp"
#include "vmm_env.hpp"

namespace xmc::conformance {
namespace {

XMC_INSTANTIATE_FOR_BACKENDS(PinTest);
XMC_INSTANTIATE_FOR_BACKENDS(RegTest);
XMC_INSTANTIATE_FOR_BACKENDS(RegUnavailable);
XMC_INSTANTIATE_FOR_BACKENDS(PinDeviceTest);
XMC_INSTANTIATE_FOR_BACKENDS(CopyStrided);
XMC_INSTANTIATE_FOR_BACKENDS(CopyRefusal);
XMC_INSTANTIATE_FOR_BACKENDS(CopyOrder);
XMC_INSTANTIATE_FOR_BACKENDS(CopyReuse);
XMC_INSTANTIATE_FOR_BACKENDS(VmmTest);
XMC_INSTANTIATE_FOR_BACKENDS(FaultSweep);
XMC_INSTANTIATE_FOR_BACKENDS(HostileTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileRegTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileStreamTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileCopyTest);
XMC_INSTANTIATE_FOR_BACKENDS(HostileVmmTest);
XMC_INSTANTIATE_FOR_BACKENDS(AbsentPlatform);

} // namespace
} // namespace xmc::conformance
