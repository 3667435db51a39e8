// One generic test body per requirement, instantiated for every backend the
// run selects (SPEC 6), the way UCX instantiates one test per transport:
//
//   class PinTest : public BackendTest {};
//   TEST_P(PinTest, PIN_FREE_RefusesInteriorAddress) { ... }
//   XMC_INSTANTIATE_FOR_BACKENDS(PinTest);
//
// The capabilities a test needs come from the catalogue row of the ID its name
// starts with (conformance/requirements.tsv): SetUp skips it, declared
// unsupported, when the backend lacks one. Test bodies never restate them.
#pragma once
#include "loader.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace xmc::conformance {

struct Requirement;

// A declared skip (SPEC 6) is data, not text: its kind and reason are recorded
// as the test's properties, which the runner reads (never the message).
enum class SkipKind {
    Unsupported,  // a capability, driver feature, extension or observation the platform lacks
    NoDevice,     // the backend reports no device the test needs
};
const char *skip_kind_name(SkipKind k);  // "unsupported", "no_device"
// The property keys of a declared skip.
inline constexpr const char *kSkipKindProperty = "xmc_skip";
inline constexpr const char *kSkipReasonProperty = "xmc_skip_reason";
// Records the skip's kind and reason on the running test (call, then GTEST_SKIP).
void record_skip(SkipKind kind, const std::string &reason);
// The catalogue row of the running test, or nullptr when its name carries no ID.
const Requirement *current_requirement();

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

// A declared skip: XMC_SKIP(SkipKind::NoDevice, "backend '" << name << "' reports no device").
// The reason is streamed like a gtest message; the skip's message reads "<kind>: <reason>".
#define XMC_SKIP(kind, reason)                                                              \
    do {                                                                                    \
        std::ostringstream xmc_skip_os_;                                                    \
        xmc_skip_os_ << reason;                                                             \
        ::xmc::conformance::record_skip((kind), xmc_skip_os_.str());                        \
        GTEST_SKIP() << ::xmc::conformance::skip_kind_name(kind) << ": " << xmc_skip_os_.str(); \
    } while (0)

#define XMC_EXPECT_STATUS(expected, expr) EXPECT_TRUE(this->status_is((expected), (expr)))
#define XMC_ASSERT_STATUS(expected, expr) ASSERT_TRUE(this->status_is((expected), (expr)))
#define XMC_EXPECT_REFUSED(expected, expr, call) EXPECT_TRUE(this->refused((expected), (expr), (call)))

#define XMC_INSTANTIATE_FOR_BACKENDS(Suite)                                               \
    INSTANTIATE_TEST_SUITE_P(Backends, Suite,                                             \
                             ::testing::ValuesIn(::xmc::conformance::selected_backends()), \
                             ::xmc::conformance::backend_param_name)
