// The host slots' types and their driver steps (be::VmmOps, reference/common/slots.hpp), which
// vmm.cpp supplies; the slot entry points themselves are the shared ones. The reference never
// changes its table; a broken backend of the self-test (conformance/broken/vmm/) replaces one step
// of vmm_ops() before its first open, so the bug lives with it, not here.
#pragma once
#include "host.hpp"
#include "slots.hpp"

#include <memory>

namespace xmc::host {

using be::CopyState;

struct Request;

struct Slot : be::SlotBase<Request> {
    uintptr_t addr = 0;
    int32_t device = 0;
    int fd = -1;  // the memfd mapped now, or -1 while released
};

struct Request : be::RequestBase<Slot> {};

// Slots, requests and workers: the shared book (slot_book.hpp), the steps, and the host
// "driver"'s fault injection (the harness's VMM-ASYNC-ERROR hook, conformance/harness/vmm_env.cpp).
struct Vmm : be::SlotBook<Slot, Request> {
    using SlotType = Slot;
    using RequestType = Request;
    be::VmmOps<Vmm> ops;
    uint64_t fail_map = 0, fail_unmap = 0;  // open options: the K-th worker map / unmap fails (ENOMEM)
    uint64_t maps = 0, unmaps = 0;          // worker maps and unmaps so far
};

// The host's one "device": the bytes its slots' backing draws from.
bool take_device_memory(size_t n);
void give_device_memory(size_t n);

// The steps every host instance takes at open, process-wide: the reference's unless a variant
// replaced one.
be::VmmOps<Vmm> &vmm_ops();
// The reference's map step (a broken step may wrap it).
int64_t map_backing(Vmm &v, Slot &s, bool worker);

} // namespace xmc::host
