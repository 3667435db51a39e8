// The host slots' types and the four steps of their work that a variant of the
// host backend may replace (vmm.cpp holds the reference's own steps, the
// defaults): mapping a slot's fresh memory, a worker thread's loop, the
// stream's hand-off of a request to the workers, and close's wait before it
// unmaps. The reference never changes the table; the self-test's broken
// backends (conformance/broken/vmm/) each put one buggy step of their own
// in it before their first open, so the bugs live with them, not here.
#pragma once
#include "host.hpp"
#include "slot_book.hpp"

#include <memory>
#include <mutex>

namespace xmc::host {

using be::CopyState;

struct Request;

struct Slot : be::SlotBase<Request> {
    uintptr_t addr = 0;
    int fd = -1;  // the memfd mapped now, or -1 while released
};

struct Request : be::RequestBase<Slot> {};

// Slots, requests and workers: the shared book (slot_book.hpp), and the
// host's fault injection.
struct Vmm : be::SlotBook<Slot, Request> {
    uint64_t fail_map = 0, fail_unmap = 0;  // test only: the K-th worker map / unmap fails (VMM-ASYNC-ERROR)
    uint64_t maps = 0, unmaps = 0;          // worker maps and unmaps so far
};

// The host's one "device": the bytes its slots' backing draws from.
bool take_device_memory(size_t n);
void give_device_memory(size_t n);
// A worker's run of request r (release or remap), under v.mu; marks it done.
void run(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r);

struct VmmSteps {
    // Fresh memory for slot s at s.addr: slot_create's first mapping, and a worker's
    // remap (`counted`: the one the test-only fault injection may fail). 0 or an errno.
    int (*map_backing)(Vmm &v, Slot &s, bool counted);
    // A worker thread: runs each request once it is ready, until stopped (VMM-SERIAL).
    void (*worker)(xmc_instance *inst, Vmm *v);
    // On the stream's callback thread once the stream reaches r: hands r to the
    // workers and does nothing else (VMM-CALLBACK).
    void (*stream_point)(xmc_instance *inst, const std::shared_ptr<Vmm> &v, const std::shared_ptr<Request> &r);
    // Before close unmaps s (lock held): waits for its requests and the copies into it (VMM-CLOSE).
    void (*close_wait)(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s);
};
// The reference's own steps.
int map_backing(Vmm &v, Slot &s, bool counted);
void worker(xmc_instance *inst, Vmm *v);
void stream_point(xmc_instance *inst, const std::shared_ptr<Vmm> &v, const std::shared_ptr<Request> &r);
void close_wait(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s);
// The steps every host instance uses, process-wide: the reference's unless a variant replaced one.
VmmSteps &vmm_steps();

} // namespace xmc::host
