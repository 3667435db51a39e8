#include "fixture.hpp"

#include "catalogue.hpp"
#include "driver_control.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace xmc::conformance {

std::vector<std::string> &selected_backends() {
    static std::vector<std::string> list = [] {
        std::vector<std::string> v;
        const char *env = std::getenv("XMC_BACKENDS");
        std::string s = env && *env ? env : "host";
        std::stringstream ss(s);
        for (std::string item; std::getline(ss, item, ',');)
            if (!item.empty()) v.push_back(item);
        return v;
    }();
    return list;
}

std::string backend_param_name(const ::testing::TestParamInfo<std::string> &info) {
    // A path names the test by its file stem; gtest allows [A-Za-z0-9_] only.
    std::string s = info.param;
    if (auto slash = s.find_last_of('/'); slash != std::string::npos) s = s.substr(slash + 1);
    if (s.rfind("libxmc_backend_", 0) == 0) s = s.substr(15);
    if (auto dot = s.find('.'); dot != std::string::npos) s = s.substr(0, dot);
    for (char &c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

const char *skip_kind_name(SkipKind k) {
    switch (k) {
    case SkipKind::Unsupported: return "unsupported";
    case SkipKind::NoDevice: return "no_device";
    }
    return "unsupported";
}

void record_skip(SkipKind kind, const std::string &reason) {
    ::testing::Test::RecordProperty(kSkipKindProperty, skip_kind_name(kind));
    ::testing::Test::RecordProperty(kSkipReasonProperty, reason);
}

const Requirement *current_requirement() {
    const auto *t = ::testing::UnitTest::GetInstance()->current_test_info();
    return t ? requirement_of_test(t->name()) : nullptr;
}

void BackendTest::SetUp() {
    // The catalogue row decides what the test needs; a name without an ID
    // would never run under qualify (the catalogue check refuses it too).
    const Requirement *req = current_requirement();
    ASSERT_NE(req, nullptr) << "the test's name starts with no catalogue ID (conformance/requirements.tsv)";
    std::string error;
    backend_ = load_backend(GetParam(), &error);
    ASSERT_NE(backend_, nullptr) << "cannot load backend '" << GetParam() << "': " << error;
    api = backend_->api;
    if (const std::string cap = req->missing_capability(api->capabilities); !cap.empty())
        XMC_SKIP(SkipKind::Unsupported, "capability '" << cap << "' not declared by backend '" << api->name << "' ("
                                                       << req->id << " needs "
                                                       << [&] { std::string s; for (auto &c : req->capabilities) s += (s.empty() ? "" : "+") + c; return s; }()
                                                       << ")");
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    xmc_status st = api->open(&params, &inst);
    ASSERT_EQ(st, XMC_OK) << "open failed: " << xmc_status_string(st);
    ASSERT_NE(inst, nullptr);
    if (const DriverControl *c = driver_control(api, nullptr); c && c->mark) {
        const auto *t = ::testing::UnitTest::GetInstance()->current_test_info();
        c->mark((std::string(t->test_suite_name()) + "." + t->name()).c_str());
    }
}

void BackendTest::TearDown() {
    for (auto *e : extra_) api->close(e);
    extra_.clear();
    if (inst) {
        EXPECT_EQ(api->close(inst), XMC_OK);
    }
    inst = nullptr;
    // XMC_LEDGER_EVERY_TEST=1 (hardware/run_tier.sh sets it through the interposer): every test,
    // not only those of the files that check the ledger for their requirement, ends with the
    // driver holding nothing once its instances are closed, so a handle left by any path on a
    // real driver fails the test that left it. Not by default: a leak is a failure of the
    // requirement whose tests check it (REG-CLOSE, AFF-PREPARED-RELEASE, ...), and a self-test's
    // leaking bug would otherwise fail every requirement it passes through.
    static const bool every_test = [] {
        const char *e = std::getenv("XMC_LEDGER_EVERY_TEST");
        return e && std::strcmp(e, "1") == 0;
    }();
    const DriverControl *c = api ? driver_control(api, nullptr) : nullptr;
    if (c && c->live_objects && every_test && !::testing::Test::IsSkipped()) {
        EXPECT_EQ(c->live_objects(), 0u) << "the driver still holds objects after every instance closed:\n"
                                         << c->ledger_text();
    }
    if (c && c->mark) c->mark("");  // what the next open answers belongs to no test
}

xmc_instance *BackendTest::open_another() {
    xmc_instance *other = nullptr;
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    if (api->open(&params, &other) != XMC_OK) return nullptr;
    extra_.push_back(other);
    return other;
}

std::string BackendTest::last_error() const {
    xmc_error_info e{};
    api->last_error(inst, &e);
    std::ostringstream os;
    os << "[" << xmc_status_string(e.status) << ", native " << e.native_code << ", call '" << e.call
       << "'] " << e.message;
    return os.str();
}

::testing::AssertionResult BackendTest::status_is(xmc_status expected, xmc_status actual) const {
    if (expected == actual) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "expected status " << xmc_status_string(expected)
                                         << ", got " << xmc_status_string(actual)
                                         << (actual != XMC_OK ? " " + last_error() : std::string());
}

::testing::AssertionResult BackendTest::refused(xmc_status expected, xmc_status actual,
                                                const char *call) const {
    if (expected != actual)
        return ::testing::AssertionFailure() << call << ": expected refusal " << xmc_status_string(expected)
                                             << ", got " << xmc_status_string(actual)
                                             << (actual != XMC_OK ? " " + last_error() : std::string());
    xmc_error_info e{};
    api->last_error(inst, &e);
    if (e.status != expected || std::strcmp(e.call, call) != 0 || e.message[0] == 0)
        return ::testing::AssertionFailure()
               << call << ": refusal detail must carry the status and name the call; got " << last_error();
    return ::testing::AssertionSuccess();
}

} // namespace xmc::conformance
