// The host backend's instance and the entry points of each primitive.
#pragma once
#include "backend_table.hpp"
#include "errors.hpp"
#include "pin_registry.hpp"
#include "transfer_protocol.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace xmc::host {

struct Stream;  // stream.cpp
struct Event;   // stream.cpp
struct Vmm;     // vmm.cpp

// Per-instance objects: streams, events and device allocations belong to the
// instance that made them and go with it (registrations and pinned blocks are
// process-wide, see register.cpp and pin_registry.hpp).
struct Instance : xmc_instance {
    Instance();
    ~Instance() override;  // stream.cpp: drains and joins streams, frees the rest
    std::mutex mu;
    std::map<xmc_stream *, std::unique_ptr<Stream>> streams;
    std::map<xmc_event *, std::shared_ptr<Event>> events;
    std::map<uintptr_t, size_t> dev_allocs;  // base -> bytes
    std::shared_ptr<Vmm> vmm;  // slots, requests and their workers (vmm.cpp)
};

// Fills the table with every entry point this library implements.
void fill_table(xmc_backend &table);

// The entry points, one group per primitive, each in its file: backend.cpp
// (INSTANCE), pin.cpp (PIN, PIN_REFS), register.cpp, stream.cpp, copy.cpp,
// vmm.cpp, transfer.cpp. Declared from the one list in <xmc/backend.h>.
#define XMC_HOST_GROUPS(G) G(INSTANCE) G(PIN) G(PIN_REFS) G(REGISTER) G(STREAM) G(COPY) G(VMM) G(TRANSFER) G(REGISTER_LARGE)
XMC_HOST_GROUPS(XMC_DECLARE_GROUP)

// stream.cpp: appends `op` to stream `s` of `inst` (copy.cpp); refuses an unknown stream
// with XMC_ERR_INVALID_HANDLE recorded under `call`.
xmc_status enqueue(xmc_instance *inst, xmc_stream *s, const char *call, std::function<void()> op);

// transfer.cpp: what each rank contributes to a transfer's agreement (AFF-AGREE) and to its completion vote
// (reference/common/transfer_protocol.hpp). Named here so that a broken backend of the self-test
// can plant a bug in it.
using TransferVote = transfer::TransferVote;
// A digest of the plan's segments and digest, the element size, the staging budget and the group's labels.
uint64_t transfer_digest(const xmc_transfer_args &args);

// vmm.cpp
std::shared_ptr<Vmm> vmm_create();
// Open options of slots: vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL),
// and for VMM-ASYNC-ERROR only, vmm_fail_map=K / vmm_fail_unmap=K (the K-th
// map / unmap a worker makes fails with ENOMEM). False if `key` is none of them.
bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st);
// Before the instance goes: waits for every slot's work, frees the slots, joins the workers.
void vmm_close(Instance *in);

} // namespace xmc::host
