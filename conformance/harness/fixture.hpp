// One generic test body per requirement, instantiated for every backend the
// run selects (SPEC 6), the way UCX instantiates one test per transport:
//
//   class PinTest : public BackendTest {};
//   TEST_P(PinTest, PIN_FREE_RefusesInteriorAddress) { XMC_REQUIRE_CAP(XMC_CAP_PIN); ... }
//   XMC_INSTANTIATE_FOR_BACKENDS(PinTest);
#pragma once
#include "loader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace xmc::conformance {

// The backends this run selects (set by the runner before tests register;
// default: $XMC_BACKENDS, comma separated, else "host").
std::vector<std::string> &selected_backends();
std::string backend_param_name(const ::testing::TestParamInfo<std::string> &info);

class BackendTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override;
    void TearDown() override;

    bool has(xmc_caps cap) const { return backend_->has(cap); }
    // The last error on this thread, as one line: status, native code, call, message.
    std::string last_error() const;
    // Status equality that prints both names and the backend's error detail.
    ::testing::AssertionResult status_is(xmc_status expected, xmc_status actual) const;
    // A refusal must carry its own status, and detail naming the call (SPEC 3).
    ::testing::AssertionResult refused(xmc_status expected, xmc_status actual, const char *call) const;
    // Opens a second instance of the same backend (closed in TearDown).
    xmc_instance *open_another();

    const LoadedBackend *backend_ = nullptr;
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    std::vector<xmc_instance *> extra_;
};

} // namespace xmc::conformance

// Skip with a declared reason when the backend does not declare a capability.
#define XMC_REQUIRE_CAP(cap)                                                              \
    do {                                                                                  \
        if (!this->has(cap))                                                              \
            GTEST_SKIP() << "unsupported: capability '" << xmc_cap_string(cap)           \
                         << "' not declared by backend '" << this->api->name << "'";     \
    } while (0)

#define XMC_EXPECT_STATUS(expected, expr) EXPECT_TRUE(this->status_is((expected), (expr)))
#define XMC_ASSERT_STATUS(expected, expr) ASSERT_TRUE(this->status_is((expected), (expr)))
#define XMC_EXPECT_REFUSED(expected, expr, call) EXPECT_TRUE(this->refused((expected), (expr), (call)))

#define XMC_INSTANTIATE_FOR_BACKENDS(Suite)                                               \
    INSTANTIATE_TEST_SUITE_P(Backends, Suite,                                             \
                             ::testing::ValuesIn(::xmc::conformance::selected_backends()), \
                             ::xmc::conformance::backend_param_name)
