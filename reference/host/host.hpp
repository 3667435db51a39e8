// The host backend's instance and the entry points of each primitive.
#pragma once
#include "backend_table.hpp"
#include "copy_desc.hpp"
#include "errors.hpp"
#include "pin_registry.hpp"
#include "lifecycle.hpp"
#include "registration.hpp"
#include "streams.hpp"
#include "transfer_protocol.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xmc::host {

struct Stream;  // stream.cpp
struct Event;   // stream.cpp
struct Vmm;     // vmm.cpp
struct Graph;   // graph.cpp

// Per-instance objects: streams, events and device allocations belong to the
// instance that made them and go with it (registrations and pinned blocks are
// process-wide, see register.cpp and pin_registry.hpp).
struct Instance : xmc_instance {
    Instance();
    ~Instance() override;  // stream.cpp: drains and joins streams, frees the rest
    void stop_streams();   // stream.cpp: drains and joins the streams (the close, before the registries)
    std::mutex mu;
    std::map<xmc_stream *, std::unique_ptr<Stream>> streams;
    std::map<xmc_event *, std::shared_ptr<Event>> events;
    std::map<uintptr_t, size_t> dev_allocs;  // base -> bytes
    std::shared_ptr<Vmm> vmm;  // slots, requests and their workers (vmm.cpp)
    std::map<xmc_graph *, std::shared_ptr<Graph>> graphs;  // graph.cpp
};

// Fills the table with every entry point this library implements.
void fill_table(xmc_backend &table);

// The entry points, one group per primitive, each in its file: backend.cpp
// (INSTANCE, and ALWAYS_0_2's close_report), pin.cpp (PIN, PIN_REFS, and
// ALWAYS_0_2's pin_min_alignment), register.cpp, stream.cpp, copy.cpp,
// vmm.cpp, transfer.cpp. Declared from the one list in <xmc/backend.h>.
#define XMC_HOST_GROUPS(G) \
    G(INSTANCE) G(PIN) G(PIN_REFS) G(REGISTER) G(STREAM) G(COPY) G(VMM) G(TRANSFER) G(GRAPH) G(ALWAYS_0_2) G(REGISTER_LARGE) \
    G(TRANSFER_PREPARED)
XMC_HOST_GROUPS(XMC_DECLARE_GROUP)

// register.cpp: the host's registrations (mlock steps over reference/common/registration.hpp), and
// REG-CLOSE's release of every one still held (the last instance's close).
be::Registrations &registrations();
xmc_status reg_release_all(xmc_instance *inst, uint64_t *released);

// stream.cpp: appends `op` to stream `s` of `inst`; refuses an unknown stream with
// XMC_ERR_INVALID_HANDLE and a capturing one with XMC_ERR_CAPTURING (GRAPH-CAPTURE: only
// copies and host callbacks join a capture), recorded under `call`.
xmc_status enqueue(xmc_instance *inst, xmc_stream *s, const char *call, std::function<void()> op);
// stream.cpp: the work of a copy or a host callback: recorded into the stream's capture while it
// captures (GRAPH-CAPTURE), appended to the stream otherwise. A recorded op may run many times.
xmc_status enqueue_or_record(xmc_instance *inst, xmc_stream *s, const char *call, std::function<void()> op);
// stream.cpp, for graph.cpp: a capture is the list of ops recorded on a stream, in order.
using Recording = std::vector<std::function<void()>>;
// Starts recording `s` (XMC_ERR_CAPTURING if it already records); ends it, giving what was
// recorded (XMC_ERR_INVALID_ARGUMENT if it does not record).
xmc_status begin_capture(xmc_instance *inst, xmc_stream *s, const char *call);
xmc_status end_capture(xmc_instance *inst, xmc_stream *s, const char *call, Recording *out);
// The steps of streams, copies and graphs (reference/common/streams.hpp); copy.cpp's step.
be::StreamOps &stream_ops();
be::GraphOps &graph_ops();
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &d, xmc_stream *s);


// vmm.cpp
std::shared_ptr<Vmm> vmm_create();
// Open options of slots: vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL),
// and for VMM-ASYNC-ERROR only, vmm_fail_map=K / vmm_fail_unmap=K (the K-th
// map / unmap a worker makes fails with ENOMEM). False if `key` is none of them.
bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st);
// Before the instance goes: waits for every slot's work, frees the slots, joins the workers;
// returns how many slots it closed (close_report).
size_t vmm_close(Instance *in);
// graph_begin's guard (graph.cpp): XMC_ERR_BUSY while a remap still has reload copies to enqueue
// on `s` (they would be recorded into the graph instead of reloading the slot); otherwise runs
// `begin` under the slots' lock, so that no such remap is submitted meanwhile.
xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s, const std::function<xmc_status()> &begin);
// graph.cpp: before the instance goes, waits for every graph's launches and frees the graphs.
void graph_close(Instance *in);
// VMM-UNMAPPED-FAULTS: copy's refusal of bytes in a slot that is not mapped (slot_book.hpp's
// check_copy_slots over this instance's slots); XMC_OK when no described byte lies in one.
xmc_status vmm_copy_check(xmc_instance *inst, const be::CopySpan (&spans)[2]);

} // namespace xmc::host
