// The harness of the REG-* tests (conformance/tests/test_register.cpp,
// test_register_use.cpp) and of
// PIN-DEVICE's (test_pin_methods.cpp): an arena of pages nothing else uses, and the
// fixtures. Registered memory comes from mmap, so its pages belong to the test
// alone. Where a requirement needs the driver to misbehave, the fault hook
// (driver_control.hpp) injects it; a backend without one skips those tests
// with a declared reason.
#pragma once
#include "boundary.hpp"
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"
#include "reg_model.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace xmc::conformance {

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

// One registration as the driver itself records it (a line of the fake's ledger
// "registration 0x<base>, <n> bytes, flags 0x<f>, ..." (CUDA) or
// "registration 0x<base> size=<n> ... mapped-for=[i,j]" (Level Zero)), never
// as the backend reports it (REG-REUSE, REG-LARGE, REG-PORTABLE).
struct DriverReg {
    uintptr_t base = 0;
    size_t size = 0;
    unsigned flags = 0;     // CUDA: CU_MEMHOSTREGISTER_* (PORTABLE = 1)
    size_t mapped_for = 0;  // Level Zero: devices the range is mapped for
};

inline std::vector<DriverReg> driver_registrations(const DriverControl &c) {
    std::vector<DriverReg> out;
    const std::string text = c.ledger_text();
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(at, end - at);
        at = end + 1;
        if (line.rfind("registration 0x", 0) != 0) continue;
        DriverReg r;
        r.base = static_cast<uintptr_t>(std::strtoull(line.c_str() + 13, nullptr, 16));
        if (size_t b = line.find(" bytes"); b != std::string::npos) {
            size_t s = line.rfind(' ', b - 1);
            r.size = std::strtoull(line.c_str() + s + 1, nullptr, 10);
        } else if (size_t z = line.find(" size="); z != std::string::npos) {
            r.size = std::strtoull(line.c_str() + z + 6, nullptr, 10);
        }
        if (size_t f = line.find("flags 0x"); f != std::string::npos)
            r.flags = static_cast<unsigned>(std::strtoul(line.c_str() + f + 6, nullptr, 16));
        if (size_t m = line.find("mapped-for=["); m != std::string::npos) {
            const size_t close = line.find(']', m);
            const std::string list = line.substr(m + 12, close - (m + 12));
            r.mapped_for = list.empty() ? 0 : 1;
            for (char ch : list) r.mapped_for += ch == ',';
        }
        out.push_back(r);
    }
    return out;
}

// The driver's registrations that overlap [p, p+n).
inline std::vector<DriverReg> driver_registrations_in(const DriverControl &c, const void *p, size_t n) {
    const auto lo = reinterpret_cast<uintptr_t>(p);
    std::vector<DriverReg> out;
    for (const DriverReg &r : driver_registrations(c))
        if (r.base < lo + n && lo < r.base + r.size) out.push_back(r);
    return out;
}

// Skips with the declared reason when the backend has no fault hook.
#define XMC_REQUIRE_FAULTS()                                    \
    do {                                                        \
        if (!this->control_) XMC_SKIP(SkipKind::Unsupported, this->no_control_); \
    } while (0)

// The instance's devices and alignment policy, the fault hook where there is
// one; skips where the backend has no device. TearDown unregisters what the
// test left in the arena and, over a fake driver, checks that closing the
// instance left nothing alive in it.
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

    // REG-REUSE: how much of [p, p+n) the driver maps, from the driver's own
    // records: the fake's ledger, or, where the backend's registration locks
    // the pages itself (the host's mlock), the kernel's lock state. -1 where
    // neither can be seen (a real driver pins without VM_LOCKED). `locks_` is
    // learnt from the first registration observed (observe_locking).
    long long driver_mapped(const void *p, size_t n) {
        if (control_) {
            long long bytes = 0;
            const auto lo = reinterpret_cast<uintptr_t>(p);
            for (const DriverReg &r : driver_registrations_in(*control_, p, n))
                bytes += static_cast<long long>(std::min(lo + n, r.base + r.size) - std::max(lo, r.base));
            return bytes;
        }
        if (locks_ != 1) return -1;
        const LockState st = lock_state(p, n);
        return st.all_locked ? static_cast<long long>(n) : st.any_locked ? 1 : 0;
    }
    // Called right after a successful registration of [p, p+n): whether this
    // backend's registrations show as locked pages.
    void observe_locking(const void *p, size_t n) {
        if (!control_ && locks_ < 0) locks_ = lock_state(p, n).all_locked ? 1 : 0;
    }
    xmc_status reg(void *p, size_t n, int32_t device, xmc_reg_info *out = nullptr) {
        xmc_reg_info info{};
        return api->reg_register(inst, p, n, device, 0, out ? out : &info);
    }
    // A model of this instance (its alignment policy, page size, devices) in `m`, with the ranges
    // `spans` (offsets into the arena) registered in it and in the backend, in order. Fatal where
    // one is refused: call it in ASSERT_NO_FATAL_FAILURE.
    void registered_model(model::RegModel &m, std::initializer_list<Span> spans) {
        m = model::RegModel{};
        m.policy = policy_;
        m.page = page_size();
        m.devices = devices_;
        for (const Span &x : spans) {
            ASSERT_EQ(m.reg(x.base, x.size, 0), XMC_OK);
            XMC_ASSERT_STATUS(XMC_OK, reg(arena_.base + x.base, x.size, 0));
        }
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
    int locks_ = -1;               // registrations lock pages (1), do not (0), unknown (-1)
    Arena arena_{64};
    std::vector<xmc_stream *> streams_;
    std::vector<void *> dev_;
};

// REG-UNAVAILABLE: runs where the backend has no device too.
class RegUnavailable : public RegTest {
protected:
    RegUnavailable() { needs_device_ = false; }
};

// PIN-DEVICE: blocks pinned and registered with a device in one call.
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


} // namespace xmc::conformance
