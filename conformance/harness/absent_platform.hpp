// The absent-platform paths in every qualification of a driver backend (SPEC 6): a test
// of REG-UNAVAILABLE or PIN-DEVICE runs this backend again in child processes of this
// binary (`xmc run` on that one test), each with the platform hidden one way: no
// driver library, a driver that loads but lists no device, devices whose driver lacks
// the registration extension. The parent fails a child that crashed, hung, found the
// platform not hidden as intended (a fake that refused its configuration, devices
// where there must be none, none where there must be some), or whose checks failed:
// the backend pretended (a registration, a registered block, a device) or refused
// without saying why. The hidings of each backend are listed once, in
// absent_platform.cpp; on a real driver only those that need no fake are run (the
// others are listed on stdout as not checkable there).
#pragma once
#include "driver_control.hpp"
#include "fixture.hpp"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace xmc::conformance {

struct Hiding {
    const char *name;  // no_driver, no_loader_driver, no_device, no_extension
    std::vector<std::pair<std::string, std::string>> env;  // set in the child
    enum What { NoDriver, NoDevice, NoExtension } what;
    const char *how;   // one line for the report
    // Removed from the child's environment: settings of the run that no longer fit the
    // hidden platform (a device order for devices that are gone).
    std::vector<std::string> unset = {};
};

// The hidings of this backend that this machine can run, and in *not_here those it
// cannot (with why). Empty for a backend that loads no driver the suite knows.
std::vector<Hiding> hidings_of(const xmc_backend *api, std::vector<std::string> *not_here);

class AbsentPlatform : public BackendTest {
protected:
    // In the parent: skips (unsupported) a backend with no driver to hide.
    void SetUp() override;
    // In the parent: runs this test in one child per hiding and fails for each child
    // that did not pass. In a child: checks the hiding happened as intended (the
    // driver library loaded or not, its configuration taken, the devices there or
    // not), then runs `checks`.
    void each_hiding(const std::function<void(Hiding::What what)> &checks);

    int32_t devices_ = 0;      // in a child: what the backend reports under the hiding
    const char *hiding_ = nullptr;  // in a child: the hiding's name
};

} // namespace xmc::conformance
