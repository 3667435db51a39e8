// VMM-*: fixed-address slots (SPEC 5; test_vmm.cpp says how the five files divide them): the
// fault sweep of slots, every driver call of a slot scenario failed in turn.
#include "vmm_tests.hpp"

namespace xmc::conformance {
namespace {

// ---- the fault sweep of slots (VMM-CREATE, VMM-ASYNC-ERROR, VMM-DEFERRED, ---------
// ---- VMM-BATCH-PARTIAL, VMM-CLOSE; VMM-ERROR-CLEAR in every run) ---------------------

// One run of the slot scenario (fault_sweep.hpp): three slots, A and B for the single and
// batch requests, C closed with its reload copy in flight; the instance closed with a release
// of A pending. A phase's steps are named "<phase> <call>"; each test sweeps its phases. Calls a
// slot worker makes count in the step the clean run saw them in. After a reported fault every
// slot must be where the slot model puts it (a failed release leaves it mapped with its bytes,
// a failed remap rolls back to released; in a batch, the slot named by "(batch index i)" so,
// each other one mapped or released, never half), and the next requests on the same slots and
// stream must succeed (VMM-ERROR-CLEAR): the run goes on through every later phase.
class SlotSweep {
public:
    explicit SlotSweep(Run &r) : r_(r), api_(r.api) {}

    void run() {
        if (!r_.inst) return;
        if (create() && setup()) {
            phases();
            in_flight();
        }
        // With A's release pending (in_flight), and whatever a failure left. The pinned sources go
        // with the last instance (PIN-CLOSE), after close has waited for the copies that read them.
        r_.close();
    }

private:
    struct Slot {
        xmc_slot *h = nullptr;
        xmc_slot_info info{};
        int tag = kNoTag;  // the bytes it holds while mapped (kNoTag: released)
    };

    bool create() {
        for (int k = 0; k < 3; ++k) {
            r_.step("create slot_create");
            const size_t before = r_.env().control->objects_besides_contexts();
            Slot x;
            if (!r_.ok(api_->slot_create(r_.inst, 0, 1, &x.h, &x.info), "slot_create")) {
                // VMM-CREATE: a failed create leaves nothing: no reservation, no memory, no mapping.
                r_.check(r_.env().control->objects_besides_contexts() == before,
                         "the failed slot_create left driver objects behind:\n" + r_.env().control->ledger_text());
                return false;
            }
            r_.check(x.info.address != nullptr && x.info.size >= 1, "slot_create answered OK with no slot");
            slots_.push_back(x);
        }
        return true;
    }

    // The stream, the sources (one pinned block per tag) and A's and B's first bytes.
    bool setup() {
        r_.step("setup stream_create");
        if (!r_.ok(api_->stream_create(r_.inst, 0, &s_), "stream_create")) return false;
        for (int t = 1; t <= kTags; ++t) {
            r_.step("setup pin_alloc");
            xmc_pin_result pr{};
            if (!r_.ok(api_->pin_alloc(r_.inst, size(), 64, XMC_NO_DEVICE, &pr), "pin_alloc")) return false;
            pinned_.push_back(pr.base);
            fill(static_cast<char *>(pr.base), size(), t);
        }
        xmc_pin_result pr{};
        const int32_t dev = (api_->capabilities & XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
        r_.step("setup pin_alloc");
        if (!r_.ok(api_->pin_alloc(r_.inst, size(), 64, dev, &pr), "pin_alloc")) return false;
        pinned_.push_back(pr.base);
        readback_ = static_cast<char *>(pr.base);
        for (int k = 0; k < 2; ++k)
            if (!write(k, 1 + k)) return false;
        return true;
    }

    void phases() {
        // Each phase leaves every slot it used as it found it: A and B mapped.
        release("release", {0});
        if (stuck()) return;
        remap("remap", {0}, 3, false);
        if (stuck()) return;
        release("deferred", {0});
        if (stuck()) return;
        remap("deferred", {0}, 4, true);
        if (stuck()) return;
        release("batch", {0, 1});
        if (stuck()) return;
        remap("batch", {0, 1}, 5, false);
    }

    // VMM-CLOSE: C is closed with its reload copy in flight, then the instance with A's release
    // pending. Whatever fails, nothing may be left in the driver.
    void in_flight() {
        if (stuck()) return;
        release("close", {2});
        if (stuck()) return;
        xmc_request *q = nullptr;
        r_.step("close slot_remap");
        if (r_.ok(api_->slot_remap(r_.inst, slots_[2].h, s_, source(7), size(), 0, &q), "slot_remap"))
            slots_[2].tag = 7;
        r_.step("close slot_close");
        if (!r_.ok(api_->slot_close(r_.inst, slots_[2].h), "slot_close")) {
            // A failed close changes nothing: the slot is still open, and a second close closes it.
            r_.must_succeed(api_->slot_close(r_.inst, slots_[2].h), "slot_close", "the retry of a failed close");
        }
        if (q) {
            r_.step("close request_destroy");
            r_.ok(api_->request_destroy(r_.inst, q), "request_destroy");
        }
        r_.step("close slot_release");
        xmc_request *rel = nullptr;
        r_.ok(api_->slot_release(r_.inst, slots_[0].h, s_, &rel), "slot_release");
    }

    static constexpr int kTags = 7;  // 1, 2: A's and B's first bytes; 3..7: the remaps'
    size_t size() const { return slots_.front().info.size; }
    void *source(int tag) const { return pinned_[static_cast<size_t>(tag - 1)]; }
    // A check failed: the later phases would only repeat it.
    bool stuck() const { return !r_.problems.empty(); }

    // Slot k gets tag's bytes (a copy on s).
    bool write(int k, int tag) {
        r_.step("setup copy");
        const xmc_copy_desc d = Env::linear(source(tag), XMC_MEM_PINNED, slots_[size_t(k)].info.address,
                                            XMC_MEM_DEVICE, size());
        if (!r_.ok(api_->copy(r_.inst, &d, s_), "copy")) return false;
        r_.step("setup stream_synchronize");
        if (!r_.ok(api_->stream_synchronize(r_.inst, s_), "stream_synchronize")) return false;
        slots_[size_t(k)].tag = tag;
        return true;
    }

    // Reads slot k: XMC_OK and its bytes compared with its tag's; XMC_ERR_BUSY when it has no
    // memory mapped (the copy is refused before anything is enqueued); another status when the
    // fault met the read (reported through ok()).
    xmc_status read(int k, const char *why) {
        Slot &x = slots_[size_t(k)];
        r_.step("check copy");
        std::memset(readback_, kPoison, size());
        const xmc_copy_desc d = Env::linear(x.info.address, XMC_MEM_DEVICE, readback_, XMC_MEM_PINNED, size());
        const xmc_status st = api_->copy(r_.inst, &d, s_);
        if (st == XMC_ERR_BUSY) return st;
        if (!r_.ok(st, "copy")) return st;
        r_.step("check stream_synchronize");
        if (const xmc_status w = api_->stream_synchronize(r_.inst, s_); !r_.ok(w, "stream_synchronize")) return w;
        const std::vector<char> got(readback_, readback_ + size());
        if (x.tag != kNoTag && mismatch(got, x.tag) != SIZE_MAX)
            r_.problem(std::string("slot ") + "ABC"[k] + " does not hold the bytes it must (" + why + "): " +
                       holds(got, x.tag).message());
        return XMC_OK;
    }
    // Slot k is mapped and holds its bytes, as the model says.
    void expect_mapped(int k, const char *why) {
        const xmc_status st = read(k, why);
        if (st == XMC_ERR_BUSY) r_.problem(std::string("slot ") + "ABC"[k] + " has no memory mapped (" + why + ")");
    }

    // Waits for q; true when it succeeded. A failure is the fault, reported by request_wait with
    // the driver's code, and by request_query alike (VMM-ASYNC-ERROR).
    bool wait(const std::string &phase, xmc_request *q, std::string *message = nullptr) {
        r_.step(phase + " request_wait");
        const xmc_status st = api_->request_wait(r_.inst, q, kWaitMs);
        if (st == XMC_OK) return true;
        xmc_error_info e{};
        api_->last_error(r_.inst, &e);
        if (message) *message = e.message;
        r_.ok(st, "request_wait");
        xmc_request_info i{};
        if (api_->request_query(r_.inst, q, &i) != XMC_OK) {
            r_.problem("request_query of the failed request failed");
        } else if (i.done != 1 || i.status != st || i.native_code != r_.code()) {
            r_.problem("request_query says done " + std::to_string(i.done) + ", status " +
                       xmc_status_string(i.status) + ", native " + std::to_string(i.native_code) +
                       " of a request whose wait failed with " + xmc_status_string(st) + " and native " +
                       std::to_string(e.native_code));
        }
        return false;
    }
    void destroy(const std::string &phase, xmc_request *q) {
        r_.step(phase + " request_destroy");
        r_.ok(api_->request_destroy(r_.inst, q), "request_destroy");
    }
    // The slot index a batch's failure names ("(batch index i)"); 0 for one slot.
    size_t failed_at(const std::string &message, size_t n) {
        if (n == 1) return 0;
        const size_t at = message.find("(batch index ");
        if (at == std::string::npos) {
            r_.problem("VMM-BATCH-PARTIAL: the failure does not name the slot it failed at: " + message);
            return n;
        }
        const size_t i = std::strtoul(message.c_str() + at + 13, nullptr, 10);
        if (i >= n) r_.problem("VMM-BATCH-PARTIAL: the failure names batch index " + std::to_string(i) + " of " +
                               std::to_string(n) + ": " + message);
        return i;
    }

    std::vector<xmc_slot *> handles(const std::vector<int> &which) const {
        std::vector<xmc_slot *> h;
        for (int k : which) h.push_back(slots_[size_t(k)].h);
        return h;
    }
    xmc_status submit_release(const std::vector<int> &which, xmc_request **q) {
        if (which.size() == 1) return api_->slot_release(r_.inst, slots_[size_t(which[0])].h, s_, q);
        const std::vector<xmc_slot *> h = handles(which);
        return api_->slot_release_batch(r_.inst, h.data(), h.size(), s_, q);
    }
    xmc_status submit_remap(const std::vector<int> &which, int tag, uint32_t flags, xmc_request **q) {
        if (which.size() == 1)
            return api_->slot_remap(r_.inst, slots_[size_t(which[0])].h, s_, source(tag), size(), flags, q);
        const std::vector<xmc_slot *> h = handles(which);
        std::vector<const void *> src;
        std::vector<size_t> n;
        for (size_t i = 0; i < which.size(); ++i) src.push_back(source(tag + int(i))), n.push_back(size());
        return api_->slot_remap_batch(r_.inst, h.data(), h.size(), s_, src.data(), n.data(), flags, q);
    }

    // After the fault: a request that must succeed (VMM-ERROR-CLEAR), waited for and destroyed.
    void release_again(int k, const char *why) {
        xmc_request *q = nullptr;
        r_.must_succeed(api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &q), "slot_release", why);
        if (!q) return;
        r_.must_succeed(api_->request_wait(r_.inst, q, kWaitMs), "request_wait", why);
        r_.must_succeed(api_->request_destroy(r_.inst, q), "request_destroy", why);
        slots_[size_t(k)].tag = kNoTag;
    }
    void remap_again(int k, int tag, const char *why) {
        xmc_request *q = nullptr;
        r_.must_succeed(api_->slot_remap(r_.inst, slots_[size_t(k)].h, s_, source(tag), size(), 0, &q), "slot_remap",
                        why);
        if (!q) return;
        r_.must_succeed(api_->request_wait(r_.inst, q, kWaitMs), "request_wait", why);
        r_.must_succeed(api_->request_adopt(r_.inst, q), "request_adopt", why);
        r_.must_succeed(api_->request_destroy(r_.inst, q), "request_destroy", why);
        slots_[size_t(k)].tag = tag;
        expect_mapped(k, why);
    }

    // Releases `which` (one slot, or a batch) on s and waits. Every slot of it ends released.
    void release(const std::string &phase, const std::vector<int> &which) {
        const char *call = which.size() == 1 ? "slot_release" : "slot_release_batch";
        const char *again = "VMM-ERROR-CLEAR: the next release on the slot and stream after the failed one";
        xmc_request *q = nullptr;
        r_.step(phase + " " + call);
        if (!r_.ok(submit_release(which, &q), call)) {
            // Refused before any change: every slot still mapped with its bytes.
            for (int k : which) {
                expect_mapped(k, "a refused release changes nothing");
                release_again(k, again);
            }
            return;
        }
        std::string message;
        const bool done = wait(phase, q, &message);
        destroy(phase, q);
        if (done) {
            for (int k : which) slots_[size_t(k)].tag = kNoTag;
            return;
        }
        // VMM-ASYNC-ERROR, VMM-BATCH-PARTIAL: the slot it failed at is mapped with its bytes; each
        // other one is released or mapped with its bytes, never half.
        const size_t at = failed_at(message, which.size());
        for (size_t i = 0; i < which.size(); ++i) {
            const int k = which[i];
            const xmc_status st = read(k, "a failed release leaves the slot mapped with its bytes");
            if (st == XMC_ERR_BUSY && i != at) {
                slots_[size_t(k)].tag = kNoTag;  // released by the batch
                xmc_request *p = nullptr;
                r_.refused_as(XMC_ERR_BUSY, api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &p), "slot_release",
                              "a slot with no memory mapped is released: a second release is refused");
                continue;
            }
            if (st == XMC_ERR_BUSY)
                r_.problem(std::string("slot ") + "ABC"[k] + ", whose release failed, has no memory mapped");
            release_again(k, again);
        }
    }

    // Remaps `which` from the sources of tag, tag + 1, ... (deferred: each copy launched), waits,
    // adopts, destroys. Every slot of it ends mapped with its source's bytes.
    void remap(const std::string &phase, const std::vector<int> &which, int tag, bool defer) {
        const char *call = which.size() == 1 ? "slot_remap" : "slot_remap_batch";
        const char *again = "VMM-ERROR-CLEAR: the next remap on the slot and stream after the failed one";
        xmc_request *q = nullptr;
        r_.step(phase + " " + call);
        if (!r_.ok(submit_remap(which, tag, defer ? XMC_REMAP_DEFER_COPY : 0, &q), call)) {
            for (size_t i = 0; i < which.size(); ++i) remap_again(which[i], tag + int(i), again);
            return;
        }
        bool failed = false;
        for (uint32_t i = 0; defer && !failed && i < which.size(); ++i) {
            r_.step(phase + " request_launch_copy");
            const xmc_status st = api_->request_launch_copy(r_.inst, q, i, s_);
            xmc_request_info info{};
            if (st == XMC_ERR_BUSY && api_->request_query(r_.inst, q, &info) == XMC_OK && info.done &&
                info.status != XMC_OK) {
                failed = true;  // the remap failed: nothing to copy into; request_wait reports it
            } else if (!r_.ok(st, "request_launch_copy")) {
                r_.must_succeed(api_->request_launch_copy(r_.inst, q, i, s_), "request_launch_copy",
                                "VMM-ERROR-CLEAR: the launch after a failed launch of the same copy");
            }
        }
        std::string message;
        if (wait(phase, q, &message)) {
            r_.step(phase + " request_adopt");
            if (r_.ok(api_->request_adopt(r_.inst, q), "request_adopt")) {
                destroy(phase, q);
                for (size_t i = 0; i < which.size(); ++i) {
                    slots_[size_t(which[i])].tag = tag + int(i);
                    expect_mapped(which[i], "after the remap and its copy");
                }
                return;
            }
            // An adopt that failed leaves the mapping with the request: destroying it rolls back.
            destroy(phase, q);
        } else {
            // VMM-ASYNC-ERROR: a failed remap has nothing to adopt, and its mappings are rolled back.
            r_.refused_as(XMC_ERR_BUSY, api_->request_adopt(r_.inst, q), "request_adopt",
                          "a failed remap has nothing to adopt");
            destroy(phase, q);
        }
        failed_at(message, which.size());
        for (size_t i = 0; i < which.size(); ++i) {
            const int k = which[i];
            slots_[size_t(k)].tag = kNoTag;
            xmc_request *p = nullptr;
            const xmc_status st = api_->slot_release(r_.inst, slots_[size_t(k)].h, s_, &p);
            if (st != XMC_ERR_BUSY) {
                r_.problem(std::string("slot ") + "ABC"[k] + ": the failed remap's mapping was not rolled back " +
                           "(a release of it was answered " + xmc_status_string(st) + ", not busy)");
                if (p) {
                    api_->request_wait(r_.inst, p, kWaitMs);
                    api_->request_destroy(r_.inst, p);
                }
            }
            remap_again(k, tag + int(i), again);
        }
    }

    Run &r_;
    const xmc_backend *api_;
    xmc_stream *s_ = nullptr;
    std::vector<Slot> slots_;
    std::vector<void *> pinned_;  // the sources by tag, then the read-back buffer
    char *readback_ = nullptr;
};

void slot_scenario(Run &r) { SlotSweep(r).run(); }
// Serial mode (VMM-SERIAL): every driver call of a request is made by the one worker (with
// more, a request on an idle stream runs on the caller's thread).
const Scenario kSlots{"slots", slot_scenario, "vmm_workers=1"};

// Entry points whose number of calls depends on timing, on each fake (SweepOptions).
SweepOptions slot_sweep_options(const FakeHooks &h) {
    SweepOptions o;
    if (h.cuda) {
        const char *polls = "the watcher thread polls the events of stream points and reload copies until they "
                            "complete, and request_wait polls its request's copies for a while: how often depends on "
                            "when the fake's stream thread finishes them";
        o.timing_dependent = {{"cuEventQuery", polls},
                              {"cuCtxPushCurrent", std::string(polls) + " (each poll in the event's context)"},
                              {"cuCtxPopCurrent", std::string(polls) + " (each poll in the event's context)"}};
        // A request submitted while its stream still runs earlier work takes an event for its
        // stream point (from the spare events or new): whether it still runs depends on timing.
        const char *point = "a request submitted while its stream still runs earlier work records an event for "
                            "its stream point, one kept from an earlier point or a new one: whether the stream "
                            "still runs, and whether a spare event is there, depends on timing";
        for (const char *e : {"cuEventRecord", "cuEventCreate", "cuEventDestroy"}) o.timing_dependent[e] = point;
    } else {
        o.timing_dependent = {{"zeEventQueryStatus",
                               "the completion thread polls the reload copies' events until they complete: how "
                               "often depends on when the fake's command list runs them"}};
    }
    return o;
}

TEST_P(FaultSweep, VMM_CREATE_FaultSweepOfCreateLeavesNothingBehind) {
    sweep(kSlots, {"create"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_ASYNC_ERROR_FaultSweepOfReleaseAndRemapReportsOnTheRequestAndRollsBack) {
    sweep(kSlots, {"release", "remap"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_DEFERRED_FaultSweepOfADeferredRemapAndItsLaunchReportsAndRollsBack) {
    sweep(kSlots, {"deferred"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_BATCH_PARTIAL_FaultSweepOfBatchesLeavesEverySlotMappedOrReleased) {
    sweep(kSlots, {"batch"}, slot_sweep_options(hooks_));
}

TEST_P(FaultSweep, VMM_CLOSE_FaultSweepOfClosesWithWorkInFlightLeavesNothing) {
    sweep(kSlots, {"close"}, slot_sweep_options(hooks_));
}

} // namespace
} // namespace xmc::conformance
