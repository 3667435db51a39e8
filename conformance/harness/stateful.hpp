// Model-vs-backend stateful checking (SPEC 6) on rapidcheck's rc::state: the
// reference model is the model, the backend is the system under test. On a
// failure the report names the backend, the seed and the RC_PARAMS string
// that reproduces it, and replays the minimal sequence against the host
// reference backend: if the host passes it, the backend broke the contract;
// if the host fails it too, the suite or the model is at fault. The host is
// the runner's own (load_reference); where it is not installed beside xmc
// (a runner carried to another machine alone), or cannot run what the
// sequence needs, the report says "no verdict" and why, and never guesses.
// The commands
// of range operations count the boundary classes they reach (boundary.hpp); a
// property run reports them where $XMC_BOUNDARY_REPORT names a file.
#pragma once
#include "boundary.hpp"
#include "loader.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>

namespace xmc::conformance {

// The RC_PARAMS string that reproduces a rapidcheck failure of property `id`.
std::string rc_reproduce_string(const std::string &id, const rc::detail::Reproduce &repro);
uint64_t rc_seed();
constexpr const char *kHostReference = "host";

// `no_replay`: why the host reference cannot replay this property's
// sequences (it lacks a capability they rely on), or "" when it can.
template <class Model, class Sut, class GenFunc>
void check_stateful(const std::string &backend, const Model &initial,
                    const std::function<std::unique_ptr<Sut>(const std::string &)> &make_sut,
                    GenFunc gen, const std::string &no_replay = "") {
    using Cmds = rc::state::Commands<rc::state::Command<Model, Sut>>;
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    rc::detail::TestMetadata meta;
    meta.id = std::string(info->test_suite_name()) + "/" + info->name();
    meta.description = info->name();

    Cmds last_failing;  // rapidcheck shrinks; the last failing run is the minimal one
    boundary_tally().reset();
    auto property = [&] {
        const auto cmds = *rc::state::gen::commands(initial, gen);
        auto sut = make_sut(backend);
        RC_ASSERT(static_cast<bool>(sut));
        boundary_tally().begin_sequence();
        try {
            rc::state::runAll(cmds, initial, *sut);
        } catch (...) {
            last_failing = cmds;
            throw;
        }
        boundary_tally().end_sequence();
    };
    const auto result = rc::detail::checkTestable(property, meta);
    if (result.template is<rc::detail::SuccessResult>()) {
        boundary_tally().report(meta.id, backend);
        return;
    }

    std::ostringstream os;
    os << "stateful property failed on backend '" << backend << "' (seed " << rc_seed() << ")\n";
    rc::detail::printResultMessage(result, os);
    if (result.template is<rc::detail::FailureResult>()) {
        const auto &failure = result.template get<rc::detail::FailureResult>();
        os << "\nreproduce: RC_PARAMS=\"" << rc_reproduce_string(meta.id, failure.reproduce) << "\"\n";
    }
    if (!last_failing.empty()) {
        os << "replay of the minimal sequence (" << last_failing.size() << " commands) on the host reference: ";
        std::string where;
        const LoadedBackend *ref = backend == kHostReference ? nullptr : load_reference(&where);
        if (backend == kHostReference) {
            os << "the failing backend is the host reference itself: a defect of the reference, the suite or the model";
        } else if (!ref) {
            os << "no verdict: reference not found (looked for " << where << ")";
        } else if (!no_replay.empty()) {
            os << "no verdict: " << no_replay;
        } else {
            auto host = make_sut(ref->path);
            bool host_ok = host != nullptr;
            if (host_ok) {
                try {
                    rc::state::runAll(last_failing, initial, *host);
                } catch (...) {
                    host_ok = false;
                }
            }
            if (!host)
                os << "no verdict: the host reference " << ref->path << " did not open";
            else if (host_ok)
                os << "host passes -> verdict: contract violation by backend '" << backend << "'";
            else
                os << "host fails too -> verdict: defect of the suite or the model, not of backend '" << backend << "'";
        }
        os << "\n";
    }
    ADD_FAILURE() << os.str();
}

} // namespace xmc::conformance
