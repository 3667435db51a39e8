// The fixtures of the hostile-input tests (SPEC 3): NULL results, handles and
// descriptors; zero, huge and overflowing sizes; misaligned addresses; handles
// never issued, already destroyed, of another instance or of a closed
// instance; wrong struct_size. Each input must be refused with its own status
// code, the refusal must name the call in last_error, and it must change
// nothing: pin_stats, reg_query, free device memory, slot and request states
// and the bytes of every buffer are compared before and after. The tests are
// in the file of the requirement the input belongs to (test_pin.cpp,
// test_pin_methods.cpp, test_register.cpp, test_copy.cpp, test_vmm.cpp,
// test_vmm_requests.cpp, test_transfer.cpp, test_instance.cpp), one test per
// requirement, in the suites HostileTest,
// HostileRegTest, HostileStreamTest, HostileCopyTest and HostileVmmTest.
//
// A NULL or closed instance has no instance to record the detail on, so those
// refusals are checked by status alone (docs/abi.md, "Instances").
#pragma once
#include "fixture.hpp"
#include "os_facts.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace xmc::conformance {

constexpr int32_t kBadDevice = 1 << 20;  // no backend has this many devices

// Addresses that were never handed out by anything: for handles they are
// only compared, never dereferenced, by a conforming backend.
template <class T> T *never_issued(uintptr_t v) { return reinterpret_cast<T *>(v); }

inline bool operator==(const xmc_pin_stats &a, const xmc_pin_stats &b) {
    return a.bytes_now == b.bytes_now && a.bytes_peak == b.bytes_peak && a.blocks_now == b.blocks_now;
}
inline bool operator==(const xmc_reg_info &a, const xmc_reg_info &b) {
    return a.registered == b.registered && a.base == b.base && a.size == b.size && a.device == b.device;
}
inline bool operator==(const xmc_request_info &a, const xmc_request_info &b) {
    return a.callback_fired == b.callback_fired && a.done == b.done && a.status == b.status &&
           a.native_code == b.native_code && a.slots == b.slots && a.copies_launched == b.copies_launched &&
           a.adopted == b.adopted;
}

// Pinning, the transfer and the instance itself.
class HostileTest : public BackendTest {
protected:
    void TearDown() override;

    int32_t devices() {
        int32_t n = 0;
        EXPECT_EQ(api->device_count(inst, &n), XMC_OK) << last_error();
        return n;
    }

    xmc_pin_stats pins() const {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK) << last_error();
        return s;
    }

    // Page-aligned anonymous memory, unmapped in TearDown.
    char *pages(size_t n);

    // An instance of this backend that was opened and closed again.
    xmc_instance *closed_instance();

    // `call(i)` for a NULL instance and a closed one: invalid_handle, no crash.
    // NULL and closed instances: only the in-tree backends (and the self-test's
    // broken copies of them) define what happens (docs/abi.md, "Instances");
    // for any other backend it is a caller error, so it is not asked.
    bool in_tree() const;
    void expect_dead_instances_refused(const char *what, const std::function<xmc_status(xmc_instance *)> &call);

    std::vector<std::pair<void *, size_t>> maps_;
};

// Skips where the backend reports no device (it has no tests of its own).
class HostileDeviceTest : public HostileTest {
protected:
    void SetUp() override {
        HostileTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        if (devices() == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    }
};

// Registration (test_register.cpp).
class HostileRegTest : public HostileDeviceTest {
protected:
    xmc_reg_info query(const void *addr) {
        xmc_reg_info q{};
        EXPECT_EQ(api->reg_query(inst, addr, &q), XMC_OK) << last_error();
        return q;
    }
};

// Streams, events and device memory (test_copy.cpp).
class HostileStreamTest : public HostileDeviceTest {};

// Copies (test_copy.cpp), on a stream of the test's own.
class HostileCopyTest : public HostileStreamTest {
protected:
    void SetUp() override {
        HostileStreamTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, 0, &stream_));
    }
    void TearDown() override {
        if (stream_) { EXPECT_EQ(api->stream_destroy(inst, stream_), XMC_OK) << last_error(); }
        stream_ = nullptr;
        HostileStreamTest::TearDown();
    }
    xmc_stream *stream_ = nullptr;
};

// Slots (test_vmm.cpp, test_vmm_requests.cpp), on a stream of the test's own: the slots and requests
// a test makes are closed and destroyed in TearDown.
class HostileVmmTest : public HostileCopyTest {
protected:
    void TearDown() override {
        if (stream_) {
            api->stream_synchronize(inst, stream_);
            for (auto *r : requests_) api->request_destroy(inst, r);
            for (auto *s : slots_) api->slot_close(inst, s);
        }
        requests_.clear();
        slots_.clear();
        HostileCopyTest::TearDown();
    }
    xmc_slot *slot(size_t bytes, xmc_slot_info *info) {
        xmc_slot *s = nullptr;
        EXPECT_EQ(api->slot_create(inst, 0, bytes, &s, info), XMC_OK) << last_error();
        if (s) slots_.push_back(s);
        return s;
    }
    uint64_t free_memory() {
        uint64_t f = 0, t = 0;
        EXPECT_EQ(api->device_free_memory(inst, 0, &f, &t), XMC_OK) << last_error();
        return f;
    }
    xmc_request_info info(xmc_request *r) {
        xmc_request_info i{};
        EXPECT_EQ(api->request_query(inst, r, &i), XMC_OK) << last_error();
        return i;
    }
    std::vector<xmc_slot *> slots_;
    std::vector<xmc_request *> requests_;
};

} // namespace xmc::conformance
