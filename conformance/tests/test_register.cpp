// REG-*: registration of existing host memory, and PIN-DEVICE (SPEC 5). One
// body per requirement, run on every selected backend. Registered memory comes
// from mmap, so its pages belong to the test alone. Where a requirement needs
// the driver to misbehave, the fault hook (driver_control.hpp) injects it; a
// backend without one skips those tests with a declared reason.
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"
#include "reg_model.hpp"
#include "stateful.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace xmc::conformance {
namespace {

// The registration oracle lives in reference/model/reg_model.hpp.
using model::RegModel;

// An mmap'ed arena of whole pages: memory nothing else in the process uses.
struct Arena {
    char *base = nullptr;
    size_t bytes = 0;
    explicit Arena(size_t pages) : bytes(pages * page_size()) {
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        base = p == MAP_FAILED ? nullptr : static_cast<char *>(p);
        if (base) std::memset(base, 0x11, bytes);
    }
    ~Arena() {
        if (base) munmap(base, bytes);
    }
    // Unregisters whatever registration is still recorded inside the arena.
    void unregister_all(const xmc_backend *api, xmc_instance *inst) const {
        for (size_t off = 0; base && off < bytes; off += page_size()) {
            xmc_reg_info q{};
            if (api->reg_query(inst, base + off, &q) == XMC_OK && q.registered) api->reg_unregister(inst, q.base);
        }
    }
};

// Skips with the declared reason when the backend has no fault hook.
#define XMC_REQUIRE_FAULTS()                                    \
    do {                                                        \
        if (!this->control_) XMC_SKIP(SkipKind::Unsupported, this->no_control_); \
    } while (0)

class RegTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
        policy_ = api->reg_align_policy(inst);
        control_ = driver_control(api, &no_control_);
        if (control_) baseline_objects_ = control_->objects_besides_contexts();
        if (needs_device_ && devices_ == 0)
            XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
        ASSERT_NE(arena_.base, nullptr);
    }
    void TearDown() override {
        if (control_) control_->set_faults("");
        if (inst) arena_.unregister_all(api, inst);
        for (auto *s : streams_) api->stream_destroy(inst, s);
        for (void *p : dev_) api->dev_free(inst, p);
        BackendTest::TearDown();
        // Over a fake driver: closing the instance left nothing alive in it.
        if (control_) {
            EXPECT_EQ(control_->live_objects(), 0u) << "the backend left driver objects behind:\n"
                                                    << control_->ledger_text();
        }
    }

    xmc_reg_info query(const void *p) {
        xmc_reg_info q{};
        EXPECT_EQ(api->reg_query(inst, p, &q), XMC_OK) << last_error();
        return q;
    }
    char *page(size_t i) { return arena_.base + i * page_size(); }
    xmc_status reg(void *p, size_t n, int32_t device, xmc_reg_info *out = nullptr) {
        xmc_reg_info info{};
        return api->reg_register(inst, p, n, device, 0, out ? out : &info);
    }

    // A copy, on a stream of `device`, from registered memory at `p` to device
    // memory and back into host memory: the range is usable by that device.
    void check_device_reads(char *p, size_t n, int32_t device) {
        // The rows that read through a registration need stream+copy (the catalogue); a caller
        // without them must not pass by doing nothing.
        ASSERT_TRUE(has(XMC_CAP_STREAM | XMC_CAP_COPY)) << "device reads need the stream and copy capabilities";
        for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(1 + (i + device) % 253);
        xmc_stream *s = nullptr;
        ASSERT_TRUE(status_is(XMC_OK, api->stream_create(inst, device, &s)));
        streams_.push_back(s);
        void *d = nullptr;
        ASSERT_TRUE(status_is(XMC_OK, api->dev_alloc(inst, device, n, &d)));
        dev_.push_back(d);
        std::vector<char> back(n, 0);
        xmc_copy_desc in{}, out{};
        in.src = {p, XMC_MEM_REGISTERED, device, 0, 0, 0, n, n};
        in.dst = {d, XMC_MEM_DEVICE, device, 0, 0, 0, n, n};
        out.src = in.dst;
        out.dst = {back.data(), XMC_MEM_HOST, device, 0, 0, 0, n, n};
        in.width_bytes = out.width_bytes = n;
        in.height = in.depth = out.height = out.depth = 1;
        ASSERT_TRUE(status_is(XMC_OK, api->copy(inst, &in, s)));
        ASSERT_TRUE(status_is(XMC_OK, api->copy(inst, &out, s)));
        ASSERT_TRUE(status_is(XMC_OK, api->stream_synchronize(inst, s)));
        EXPECT_EQ(std::memcmp(back.data(), p, n), 0)
            << "device " << device << " did not read the registered range's contents";
    }

    bool needs_device_ = true;
    int32_t devices_ = 0;
    xmc_reg_align_policy policy_ = XMC_REG_ALIGN_REFUSE;
    const DriverControl *control_ = nullptr;
    std::string no_control_;
    size_t baseline_objects_ = 0;  // driver objects other than contexts at SetUp
    Arena arena_{64};
    std::vector<xmc_stream *> streams_;
    std::vector<void *> dev_;
};

// ---- REG-IDENTITY ------------------------------------------------------------

TEST_P(RegTest, REG_IDENTITY_RangeIsRecordedAtTheSameAddress) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        const size_t n = 4 * page_size();
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p, n, d, &info));
        EXPECT_EQ(info.registered, 1);
        EXPECT_EQ(info.base, p) << "registration recorded at another address";
        EXPECT_EQ(info.size, n);
        EXPECT_EQ(info.device, d);
        for (size_t off : {size_t{0}, size_t{1}, n / 2, n - 1}) {
            xmc_reg_info q = query(p + off);
            EXPECT_EQ(q.registered, 1) << "offset " << off;
            EXPECT_EQ(q.base, p);
            EXPECT_EQ(q.size, n);
            EXPECT_EQ(q.device, d);
        }
        EXPECT_EQ(query(p + n).registered, 0) << "base+size is outside the registration";
        EXPECT_EQ(query(p - 1).registered, 0);
        check_device_reads(p, n, d);  // accessible at the same address
    }
}

TEST_P(RegTest, REG_IDENTITY_NonIdentityMappingIsRefusedAndNothingStays) {
    XMC_REQUIRE_FAULTS();
    char *p = page(0);
    const size_t n = 4 * page_size();
    ASSERT_EQ(control_->set_faults(control_->nonidentity_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_NON_IDENTITY, reg(p, n, 0), "reg_register");
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(query(p).registered, 0) << "a refused registration is still tracked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the driver still holds something:\n"
                                                        << control_->ledger_text();
    // The driver kept nothing: the same range registers again.
    XMC_EXPECT_STATUS(XMC_OK, reg(p, n, 0));
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
}

// ---- REG-DEVICE --------------------------------------------------------------

TEST_P(RegTest, REG_DEVICE_EveryDeviceCopiesFromItsOwnRegistration) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 4 * page_size(), d));
        check_device_reads(p, 4 * page_size(), d);
        check_device_reads(p + page_size() + 100, 1000, d);  // an interior part, unaligned
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
}

TEST_P(RegTest, REG_DEVICE_RefusesDeviceOutOfRange) {
    for (int32_t d : {devices_, devices_ + 5, int32_t{-1}}) {
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, reg(page(0), page_size(), d), "reg_register") << "device " << d;
        EXPECT_EQ(query(page(0)).registered, 0);
    }
}

// "A registration lives in a context of device d only": the driver's own
// records (never the backend's) say which device's context holds each
// registration. The registrations for the n devices must be held by n
// different devices, each by one device only (which device has which UUID is
// REG-UUID's check). A copy cannot show this where the driver maps a
// registration for every context (CUDA's unified addressing).
TEST_P(RegTest, REG_DEVICE_EachDevicesRegistrationLivesInAContextOfItsOwn) {
    XMC_REQUIRE_FAULTS();  // the driver's records come through the same hook
    std::vector<std::vector<uint8_t>> holders;
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * page_size(), d));
        uint8_t uuid[16];
        std::string why;
        ASSERT_TRUE(control_->registration_uuid(*control_, p, uuid, &why)) << "device " << d << ": " << why;
        std::vector<uint8_t> u(uuid, uuid + 16);
        for (size_t other = 0; other < holders.size(); ++other)
            EXPECT_NE(u, holders[other]) << "the registrations for devices " << other << " and " << d
                                         << " live in the context of the same device";
        holders.push_back(u);
    }
    for (int32_t d = 0; d < devices_; ++d) XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, page(8 * d)));
}

// ---- REG-UUID ----------------------------------------------------------------

TEST_P(RegTest, REG_UUID_DevicesAreNamedByIndexAndDistinctUuid) {
    std::vector<std::vector<uint8_t>> seen;
    for (int32_t d = 0; d < devices_; ++d) {
        xmc_device_info info{};
        XMC_ASSERT_STATUS(XMC_OK, api->device_info(inst, d, &info));
        EXPECT_EQ(info.index, d);
        std::vector<uint8_t> u(info.uuid, info.uuid + 16);
        EXPECT_NE(u, std::vector<uint8_t>(16, 0)) << "device " << d << " has an all-zero UUID";
        for (const auto &o : seen) EXPECT_NE(u, o) << "two devices share a UUID";
        seen.push_back(u);
    }
    xmc_device_info info{};
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_info(inst, devices_, &info), "device_info");
}

TEST_P(RegTest, REG_UUID_RegistrationIsServedByTheDeviceWithItsUuid) {
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * page_size(), d));
        EXPECT_EQ(query(p).device, d);
        xmc_device_info info{};
        XMC_ASSERT_STATUS(XMC_OK, api->device_info(inst, d, &info));
        if (control_) {
            // The driver's own record: the context holding the registration is
            // the one of the device whose UUID device_info(d) reports.
            uint8_t uuid[16];
            std::string why;
            ASSERT_TRUE(control_->registration_uuid(*control_, p, uuid, &why)) << why;
            EXPECT_EQ(std::memcmp(uuid, info.uuid, 16), 0)
                << "the registration for device " << d << " lives in another device's context";
        }
        check_device_reads(p, 2 * page_size(), d);
    }
}

// ---- REG-DOUBLE --------------------------------------------------------------

TEST_P(RegTest, REG_DOUBLE_RefusesOverlappingRange) {
    const size_t pg = page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(page(8), 8 * pg, 0));
    struct Case { size_t first, pages; const char *what; };
    for (const Case &c : {Case{8, 8, "the same range"}, Case{12, 8, "overlapping its end"},
                          Case{4, 8, "overlapping its start"}, Case{10, 2, "contained in it"},
                          Case{4, 16, "containing it"}, Case{15, 1, "its last page"}}) {
        for (int32_t d = 0; d < devices_; ++d)
            XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(page(c.first), c.pages * pg, d), "reg_register")
                << c.what << ", device " << d;
    }
    xmc_reg_info q = query(page(9));
    EXPECT_EQ(q.base, page(8)) << "a refused registration changed the recorded one";
    EXPECT_EQ(q.size, 8 * pg);
    EXPECT_EQ(query(page(4)).registered, 0) << "a refused registration left a range behind";
    EXPECT_EQ(query(page(16)).registered, 0);
    // Adjacent ranges do not overlap.
    XMC_EXPECT_STATUS(XMC_OK, reg(page(16), 2 * pg, 0));
    XMC_EXPECT_STATUS(XMC_OK, reg(page(6), 2 * pg, 0));
}

TEST_P(RegTest, REG_DOUBLE_RefusesRangeInsideAPinnedBlockRegisteredWithADevice) {
    // Beyond the row's capability: a block pinned and registered in one call.
    if (!has(XMC_CAP_PIN_REGISTER))
        XMC_SKIP(SkipKind::Unsupported, "capability 'pin_register' not declared by backend '" << api->name
                                            << "': no pinned block is registered with a device");
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 4 * page_size(), page_size(), 0, &r));
    if (r.registered)
        XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(r.base, 2 * page_size(), 0), "reg_register")
            << "a pinned block registered with device 0 was registered again";
    else
        ADD_FAILURE() << "pin_alloc with device 0 did not register: " << xmc_status_string(r.reg_status);
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

// ---- REG-UNREG-BASE ----------------------------------------------------------

TEST_P(RegTest, REG_UNREG_BASE_RefusesAnythingButTheRecordedBase) {
    const size_t pg = page_size();
    char *p = page(4);
    XMC_ASSERT_STATUS(XMC_OK, reg(p, 4 * pg, 0));
    char unknown[64];
    for (void *bad : {static_cast<void *>(p + pg), static_cast<void *>(p + 1), static_cast<void *>(p + 4 * pg - 1),
                      static_cast<void *>(p - pg), static_cast<void *>(unknown), static_cast<void *>(nullptr)}) {
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, bad), "reg_unregister") << bad;
        xmc_reg_info q = query(p + 2 * pg);
        EXPECT_EQ(q.registered, 1) << "a refused unregister changed the registration";
        EXPECT_EQ(q.base, p);
        EXPECT_EQ(q.size, 4 * pg);
    }
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    EXPECT_EQ(query(p).registered, 0);
    XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, p), "reg_unregister")
        << "a second unregister";
    // Released: the range registers again.
    XMC_EXPECT_STATUS(XMC_OK, reg(p, 4 * pg, 0));
}

// ---- stateful sequences against the model (REG-DOUBLE, REG-UNREG-BASE, REG-ALIGN)

struct RegSut {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    Arena arena{64};
    ~RegSut() {
        if (inst) {
            arena.unregister_all(api, inst);
            api->close(inst);
        }
    }
};

using RegCmd = rc::state::Command<RegModel, RegSut>;

struct Register : RegCmd {
    size_t off, n;
    int32_t device;
    explicit Register(const RegModel &m)
        : off(*rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(0, 56), [p = m.page](size_t i) { return i * p; })},
                                               {1, rc::gen::inRange<size_t>(0, 56 * m.page)}})),
          n(*rc::gen::weightedOneOf<size_t>({{6, rc::gen::map(rc::gen::inRange<size_t>(1, 7), [p = m.page](size_t i) { return i * p; })},
                                             {1, rc::gen::inRange<size_t>(1, 6 * m.page)}})),
          device(*rc::gen::inRange<int32_t>(0, m.devices)) {}
    void apply(RegModel &m) const override { m.reg(off, n, device); }
    void run(const RegModel &m, RegSut &s) const override {
        RegModel next = m;
        const xmc_status want = next.reg(off, n, device);
        xmc_reg_info info{};
        const xmc_status got = s.api->reg_register(s.inst, s.arena.base + off, n, device, 0, &info);
        RC_ASSERT(got == want);
        if (got != XMC_OK) return;
        size_t base = 0, size = 0;
        m.recorded(off, n, &base, &size);
        RC_ASSERT(reinterpret_cast<uintptr_t>(info.base) == reinterpret_cast<uintptr_t>(s.arena.base + base));
        RC_ASSERT(info.size == size);
        RC_ASSERT(info.device == device);
    }
    void show(std::ostream &os) const override { os << "register(+" << off << ", " << n << ", device " << device << ")"; }
};

struct Unregister : RegCmd {
    size_t off;
    explicit Unregister(const RegModel &m) {
        std::vector<size_t> bases;
        for (const auto &[b, r] : m.live) bases.push_back(b);
        const size_t any = *rc::gen::inRange<size_t>(0, 64 * m.page);
        off = bases.empty() || *rc::gen::inRange(0, 4) == 0 ? any
              : bases[*rc::gen::inRange<size_t>(0, bases.size())] + (*rc::gen::inRange(0, 3) == 0 ? m.page : 0);
    }
    void apply(RegModel &m) const override { m.unreg(off); }
    void run(const RegModel &m, RegSut &s) const override {
        RegModel next = m;
        RC_ASSERT(s.api->reg_unregister(s.inst, s.arena.base + off) == next.unreg(off));
    }
    void show(std::ostream &os) const override { os << "unregister(+" << off << ")"; }
};

struct Query : RegCmd {
    size_t off;
    explicit Query(const RegModel &m) : off(*rc::gen::inRange<size_t>(0, 64 * m.page)) {}
    void apply(RegModel &) const override {}
    void run(const RegModel &m, RegSut &s) const override {
        xmc_reg_info q{};
        RC_ASSERT(s.api->reg_query(s.inst, s.arena.base + off, &q) == XMC_OK);
        const long long b = m.holder(off);
        RC_ASSERT(q.registered == (b >= 0 ? 1 : 0));
        if (b < 0) return;
        RC_ASSERT(reinterpret_cast<uintptr_t>(q.base) == reinterpret_cast<uintptr_t>(s.arena.base + b));
        RC_ASSERT(q.size == m.live.at(static_cast<size_t>(b)).size);
        RC_ASSERT(q.device == m.live.at(static_cast<size_t>(b)).device);
    }
    void show(std::ostream &os) const override { os << "query(+" << off << ")"; }
};

void check_reg_sequences(const std::string &backend, const xmc_backend *api, xmc_instance *inst, int32_t devices,
                         bool with_unregister) {
    RegModel initial;
    initial.policy = api->reg_align_policy(inst);
    initial.page = page_size();
    initial.devices = devices;
    auto factory = [](const std::string &name) -> std::unique_ptr<RegSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<RegSut>();
        s->api = b->api;
        xmc_open_params p{sizeof p, nullptr};
        if (b->api->open(&p, &s->inst) != XMC_OK || !s->arena.base) return nullptr;
        return s;
    };
    (void)backend;
    if (with_unregister)
        check_stateful<RegModel, RegSut>(backend, initial, factory, [](const RegModel &m) {
            return rc::state::gen::execOneOfWithArgs<Register, Unregister, Unregister, Query>()(m);
        });
    else
        check_stateful<RegModel, RegSut>(backend, initial, factory, [](const RegModel &m) {
            return rc::state::gen::execOneOfWithArgs<Register, Register, Query>()(m);
        });
}

TEST_P(RegTest, REG_DOUBLE_StatefulSequencesAgreeWithModel) {
    check_reg_sequences(GetParam(), api, inst, devices_, false);
}

TEST_P(RegTest, REG_UNREG_BASE_StatefulSequencesAgreeWithModel) {
    check_reg_sequences(GetParam(), api, inst, devices_, true);
}

// ---- REG-UNREG-FAIL ----------------------------------------------------------

TEST_P(RegTest, REG_UNREG_FAIL_FailedReleaseIsReportedAndRegistrationKept) {
    XMC_REQUIRE_FAULTS();
    char *p = page(4);
    const size_t n = 4 * page_size();
    XMC_ASSERT_STATUS(XMC_OK, reg(p, n, 0));
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->reg_unregister(inst, p), "reg_unregister")
        << "success reported over a driver failure";
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->fail_unregister_code) << "the driver's code is not carried";
    xmc_reg_info q = query(p + 1);
    EXPECT_EQ(q.registered, 1) << "a registration the driver still holds is no longer tracked";
    EXPECT_EQ(q.base, p);
    EXPECT_EQ(q.size, n);
    XMC_EXPECT_REFUSED(XMC_ERR_ALREADY_REGISTERED, reg(p, n, 0), "reg_register");
    // The fault was for one call: the retry succeeds and removes it.
    XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    EXPECT_EQ(query(p).registered, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

// ---- REG-FAIL ----------------------------------------------------------------

TEST_P(RegTest, REG_FAIL_DriverRejectionGivesItsCodeAndLeavesNothing) {
    XMC_REQUIRE_FAULTS();
    char *p = page(4);
    ASSERT_EQ(control_->set_faults(control_->reject_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, reg(p, 4 * page_size(), 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->reject_register_code) << "the driver's code is not carried";
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(query(p).registered, 0) << "a rejected registration is tracked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the rejection left driver objects behind:\n"
                                                        << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, reg(p, 4 * page_size(), 0));
}

TEST_P(RegTest, REG_FAIL_UnmappedRangeIsRejectedAndLeavesNothing) {
    const size_t n = 4 * page_size();
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(munmap(p, n), 0);  // now memory that nothing maps
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, reg(p, n, 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_NE(e.native_code, 0) << "the native code of the rejection is missing";
    EXPECT_EQ(query(p).registered, 0);
    if (control_) {
        EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    }
}

// ---- REG-SAME-CONTEXT --------------------------------------------------------

TEST_P(RegTest, REG_SAME_CONTEXT_UnregisterFromAnotherThreadAndInstanceReleasesIt) {
    xmc_instance *other = open_another();
    ASSERT_NE(other, nullptr);
    for (int32_t d = 0; d < devices_; ++d) {
        char *p = page(8 * d);
        const size_t n = 4 * page_size();
        XMC_ASSERT_STATUS(XMC_OK, reg(p, n, d));
        // Work on another device in between: whatever context that makes
        // current must not be the one the release uses.
        if (has(XMC_CAP_STREAM)) {
            xmc_stream *s = nullptr;
            XMC_ASSERT_STATUS(XMC_OK, api->stream_create(inst, (d + 1) % devices_, &s));
            XMC_EXPECT_STATUS(XMC_OK, api->stream_destroy(inst, s));
        }
        xmc_status st = XMC_ERR_DRIVER;
        std::thread([&] { st = api->reg_unregister(other, p); }).join();
        EXPECT_EQ(st, XMC_OK) << "unregister from another thread and instance: " << xmc_status_string(st);
        EXPECT_EQ(query(p).registered, 0);
        // The driver released it: the range registers again, on another device.
        XMC_EXPECT_STATUS(XMC_OK, reg(p, n, (d + 1) % devices_));
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
    if (control_) {
        EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    }
}

// ---- REG-ALIGN ---------------------------------------------------------------

TEST_P(RegTest, REG_ALIGN_DeclaredPolicyHoldsAndUnregisterTakesTheRecordedBase) {
    const size_t pg = page_size();
    ASSERT_TRUE(policy_ == XMC_REG_ALIGN_REFUSE || policy_ == XMC_REG_ALIGN_ROUND)
        << "reg_align_policy answered " << static_cast<int>(policy_) << ", not a declared policy";
    char *p = page(4);
    if (policy_ == XMC_REG_ALIGN_REFUSE) {
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p + 8, pg, 0), "reg_register") << "unaligned address";
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p, pg + 100, 0), "reg_register") << "unaligned size";
        XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(p + 100, 200, 0), "reg_register") << "both";
        EXPECT_EQ(query(p).registered, 0);
        EXPECT_EQ(query(p + pg).registered, 0);
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p, 2 * pg, 0, &info));
        EXPECT_EQ(info.base, p);
        EXPECT_EQ(info.size, 2 * pg);
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    } else {
        xmc_reg_info info{};
        XMC_ASSERT_STATUS(XMC_OK, reg(p + 8, pg + 100, 0, &info));
        EXPECT_EQ(info.base, p) << "the recorded base is not the address rounded down to its page";
        EXPECT_EQ(info.size, 2 * pg) << "the recorded size is not rounded out to whole pages";
        xmc_reg_info q = query(p);
        EXPECT_EQ(q.registered, 1) << "the rounded-out first page is not recorded";
        EXPECT_EQ(q.base, p);
        EXPECT_EQ(query(p + 2 * pg - 1).registered, 1) << "the rounded-out last page is not recorded";
        XMC_EXPECT_REFUSED(XMC_ERR_NOT_REGISTERED, api->reg_unregister(inst, p + 8), "reg_unregister")
            << "unregister must take the recorded base, not the address asked for";
        XMC_EXPECT_STATUS(XMC_OK, api->reg_unregister(inst, p));
    }
    EXPECT_EQ(query(p).registered, 0);
}

TEST_P(RegTest, REG_ALIGN_RefusesNullZeroSizeUnknownFlagsAndWrap) {
    xmc_reg_info info{};
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(nullptr, page_size(), 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0), 0, 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, page(0), page_size(), 0, 0x80, &info),
                       "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_register(inst, page(0), page_size(), 0, 0, nullptr),
                       "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, reg(page(0), SIZE_MAX - page_size() + 1, 0), "reg_register");
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->reg_query(inst, page(0), nullptr), "reg_query");
    EXPECT_EQ(query(page(0)).registered, 0);
}

// ---- REG-UNAVAILABLE ---------------------------------------------------------

class RegUnavailable : public RegTest {
protected:
    RegUnavailable() { needs_device_ = false; }
};

TEST_P(RegUnavailable, REG_UNAVAILABLE_WithoutDeviceRegistrationIsUnsupported) {
    if (devices_ > 0)
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name << "' has " << devices_
                     << " device(s); registration without a driver or device is checked where there is none");
    XMC_EXPECT_REFUSED(XMC_ERR_UNSUPPORTED, reg(page(0), page_size(), 0), "reg_register");
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_GT(std::strlen(e.message), 20u) << "the refusal does not say why registration is unavailable";
    EXPECT_EQ(query(page(0)).registered, 0) << "pretended: a registration is recorded without a driver";
    if (has(XMC_CAP_PIN_REGISTER)) {
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, page_size(), 64, 0, &r));
        EXPECT_EQ(r.registered, 0) << "pretended: a pinned block registered without a driver";
        EXPECT_NE(r.reg_status, XMC_OK) << "lock-only without saying why";
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    }
}

TEST_P(RegUnavailable, REG_UNAVAILABLE_UnsupportedByTheDeviceIsReportedNeverPretended) {
    if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    XMC_REQUIRE_FAULTS();
    ASSERT_EQ(control_->set_faults(control_->unsupported_register), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_UNSUPPORTED, reg(page(0), page_size(), 0), "reg_register");
    EXPECT_EQ(query(page(0)).registered, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

// ---- REG-THREADS -------------------------------------------------------------

TEST_P(RegTest, REG_THREADS_ConcurrentRegisterUnregisterOfDisjointRangesAgreeWithModel) {
    constexpr int kThreads = 8, kOps = 400, kPages = 8;  // each thread owns kPages of the arena
    Arena arena(kThreads * kPages);
    ASSERT_NE(arena.base, nullptr);
    std::mutex mu;
    std::vector<std::string> failures;
    auto worker = [&](int tid) {
        std::mt19937_64 rng(tid * 104729 + 7);
        RegModel model;
        model.policy = policy_;
        model.page = page_size();
        model.devices = devices_;
        char *mine = arena.base + tid * kPages * page_size();
        auto fail = [&](const std::string &what) {
            std::lock_guard<std::mutex> l(mu);
            if (failures.size() < 20) failures.push_back("thread " + std::to_string(tid) + ": " + what);
        };
        for (int op = 0; op < kOps; ++op) {
            const int kind = rng() % 3;
            if (kind == 0) {
                const size_t first = rng() % kPages, n = 1 + rng() % (kPages - first);
                const int32_t d = static_cast<int32_t>(rng() % devices_);
                xmc_reg_info info{};
                const xmc_status got = api->reg_register(inst, mine + first * page_size(), n * page_size(), d, 0, &info);
                const xmc_status want = model.reg(first * page_size(), n * page_size(), d);
                if (got != want)
                    fail(std::string("register: ") + xmc_status_string(got) + ", model " + xmc_status_string(want));
            } else if (kind == 1) {
                const size_t off = (rng() % kPages) * page_size() + ((rng() % 4) == 0 ? 64 : 0);
                const xmc_status got = api->reg_unregister(inst, mine + off);
                const xmc_status want = model.unreg(off);
                if (got != want)
                    fail(std::string("unregister: ") + xmc_status_string(got) + ", model " + xmc_status_string(want));
            } else {
                const size_t off = rng() % (kPages * page_size());
                xmc_reg_info q{};
                api->reg_query(inst, mine + off, &q);
                const long long b = model.holder(off);
                if (q.registered != (b >= 0) || (b >= 0 && q.base != mine + b))
                    fail("query disagrees with the model at +" + std::to_string(off));
            }
        }
        for (const auto &[b, r] : model.live)
            if (api->reg_unregister(inst, mine + b) != XMC_OK) fail("final unregister");
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    for (auto &t : threads) t.join();
    for (const auto &f : failures) ADD_FAILURE() << f;
    for (size_t off = 0; off < arena.bytes; off += page_size())
        EXPECT_EQ(query(arena.base + off).registered, 0) << "left registered at +" << off;
}

// ---- PIN-DEVICE --------------------------------------------------------------

class PinDeviceTest : public RegTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
        control_ = driver_control(api, &no_control_);
        if (control_) baseline_objects_ = control_->objects_besides_contexts();
        if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    }
    xmc_pin_stats stats() {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK);
        return s;
    }
};

TEST_P(PinDeviceTest, PIN_DEVICE_EveryDeviceRegistersItsBlockOrSaysWhy) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks the block stays locked, which sanitizers hide
    for (int32_t d = 0; d < devices_; ++d) {
        xmc_pin_result r{};
        XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 3 * page_size(), 64, d, &r));
        EXPECT_TRUE(lock_state(r.base, r.size).all_locked);
        if (r.registered) {
            EXPECT_EQ(r.reg_status, XMC_OK);
            if (has(XMC_CAP_STREAM | XMC_CAP_COPY)) {
                // Pinned memory registered with d is read by d.
                std::memset(r.base, 0, r.size);
                check_device_reads(static_cast<char *>(r.base), r.size, d);
            }
        } else {
            EXPECT_NE(r.reg_status, XMC_OK) << "lock-only without saying why: a silent degradation";
        }
        if (control_) {
            EXPECT_TRUE(r.registered) << "the fake driver registers every block; got "
                                      << xmc_status_string(r.reg_status);
        }
        XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    }
}

TEST_P(PinDeviceTest, PIN_DEVICE_DriverRejectionDegradesToLockOnlyWithItsCode) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks the block stays locked, which sanitizers hide
    XMC_REQUIRE_FAULTS();
    const xmc_pin_stats before = stats();
    ASSERT_EQ(control_->set_faults(control_->reject_register), 0);
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 64, 0, &r));
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(r.registered, 0);
    EXPECT_EQ(r.reg_status, XMC_ERR_DRIVER) << "the degradation does not say the driver refused";
    EXPECT_EQ(r.reg_native_code, control_->reject_register_code) << "the driver's code is not carried";
    EXPECT_TRUE(lock_state(r.base, r.size).all_locked) << "a lock-only block must still be locked";
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
    EXPECT_EQ(stats().bytes_now, before.bytes_now);
}

TEST_P(PinDeviceTest, PIN_DEVICE_NonIdentityRegistrationDegradesToLockOnly) {
    XMC_REQUIRE_FAULTS();
    ASSERT_EQ(control_->set_faults(control_->nonidentity_register), 0);
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 64, 0, &r));
    ASSERT_EQ(control_->set_faults(""), 0);
    EXPECT_EQ(r.registered, 0);
    EXPECT_EQ(r.reg_status, XMC_ERR_NON_IDENTITY);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << "the non-identity registration was not undone:\n"
                                                        << control_->ledger_text();
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));
}

TEST_P(PinDeviceTest, PIN_DEVICE_FailedDriverReleaseKeepsTheBlock) {
    XMC_SKIP_IF_MLOCK_IGNORED();  // checks the block stays locked, which sanitizers hide
    XMC_REQUIRE_FAULTS();
    xmc_pin_result r{};
    XMC_ASSERT_STATUS(XMC_OK, api->pin_alloc(inst, 2 * page_size(), 64, 0, &r));
    ASSERT_EQ(r.registered, 1) << "device 0 did not register the block";
    const xmc_pin_stats before = stats();
    ASSERT_EQ(control_->set_faults(control_->fail_next_unregister), 0);
    XMC_EXPECT_REFUSED(XMC_ERR_DRIVER, api->pin_free(inst, r.base), "pin_free");
    ASSERT_EQ(control_->set_faults(""), 0);
    xmc_error_info e{};
    api->last_error(inst, &e);
    EXPECT_EQ(e.native_code, control_->fail_unregister_code) << "the driver's code is not carried";
    xmc_pin_info q{};
    api->pin_query(inst, r.base, r.size, &q);
    EXPECT_EQ(q.pinned, 1) << "success reported over a failed release: the block is gone while the device maps it";
    EXPECT_TRUE(lock_state(r.base, r.size).all_locked);
    EXPECT_EQ(stats().bytes_now, before.bytes_now);
    XMC_EXPECT_STATUS(XMC_OK, api->pin_free(inst, r.base));  // the retry releases it
    api->pin_query(inst, r.base, 1, &q);
    EXPECT_EQ(q.pinned, 0);
    EXPECT_EQ(control_->objects_besides_contexts(), baseline_objects_) << control_->ledger_text();
}

TEST_P(PinDeviceTest, PIN_DEVICE_RefusesDeviceOutOfRangeAndChangesNothing) {
    const xmc_pin_stats before = stats();
    xmc_pin_result r{};
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->pin_alloc(inst, page_size(), 64, devices_, &r), "pin_alloc");
    XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->pin_alloc(inst, page_size(), 64, -7, &r), "pin_alloc");
    EXPECT_EQ(stats().bytes_now, before.bytes_now);
    EXPECT_EQ(stats().blocks_now, before.blocks_now);
}

XMC_INSTANTIATE_FOR_BACKENDS(RegTest);
XMC_INSTANTIATE_FOR_BACKENDS(RegUnavailable);
XMC_INSTANTIATE_FOR_BACKENDS(PinDeviceTest);

} // namespace
} // namespace xmc::conformance
