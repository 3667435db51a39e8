// TEMPLATE: the test body of requirement XXX-NEW-ID (its catalogue row: requirement.tsv).
// Copy the block below into the primitive's test file, conformance/tests/test_<primitive>*.cpp,
// inside its `namespace xmc::conformance { namespace {`. A new file goes into XMC_TEST_SOURCES
// (conformance/CMakeLists.txt); a new fixture is instantiated in conformance/tests/suites.cpp
// (XMC_INSTANTIATE_FOR_BACKENDS).
//
// TEMPLATE: the fixture is the primitive's: PinTest (pin_env.hpp), RegTest (reg_env.hpp, shown
// here: an arena of pages, reg(), query(), page(i), the fake's control_), VmmTest (vmm_env.hpp),
// CopyStrided / CopyOrder / CopyReuse (copy_env.hpp), TransferTest (transfer_env.hpp), all in
// conformance/harness/. The test's name is the ID with '_' for '-', then what it checks: the
// runner finds the catalogue row (capabilities, tiers) from it, so the body never tests for them.

// ---- XXX-NEW-ID -------------------------------------------------------------

// TEMPLATE: one sentence: what the backend must do, and what a wrong one does instead.
TEST_P(RegTest, XXX_NEW_ID_WhatItChecks) {
    // TEMPLATE (optional): a declared skip where this platform cannot show the behaviour; the
    // reason names the backend and what it lacks. Never a bare return: that would pass.
    if (SOMETHING_THE_PLATFORM_LACKS)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' WHAT IT LACKS");
    // TEMPLATE (only if the test makes the driver misbehave): skips, declared, without a fake.
    XMC_REQUIRE_FAULTS();
    char *p = page(4);
    const size_t n = 4 * page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(p, n, 0));
    // TEMPLATE: a fault script in this driver's terms (DriverControl, driver_control.hpp).
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    // A refusal: its own status, and last_error naming the call.
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->reg_unregister(inst, p), "reg_unregister")
        << "TEMPLATE: what a wrong backend did, in the reader's words";
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(query(p).registered, 1) << "TEMPLATE: why this state is wrong:\n" << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    // TearDown unregisters what is left and, over a fake, checks the driver holds nothing after close.
}
