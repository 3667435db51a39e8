// The host backend's instance and the entry points of each primitive.
#pragma once
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

// pin.cpp
xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device,
                     xmc_pin_result *out);
xmc_status pin_free(xmc_instance *inst, void *base);
xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out);
xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out);
xmc_status pin_ref(xmc_instance *inst, const void *addr);
xmc_status pin_unref(xmc_instance *inst, const void *addr);

// register.cpp
xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                        xmc_reg_info *out);
xmc_status reg_unregister(xmc_instance *inst, void *base);
xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out);
xmc_reg_align_policy reg_align_policy(xmc_instance *inst);

// stream.cpp
xmc_status stream_create(xmc_instance *inst, int32_t device, xmc_stream **out);
xmc_status stream_destroy(xmc_instance *inst, xmc_stream *s);
xmc_status stream_synchronize(xmc_instance *inst, xmc_stream *s);
xmc_status event_create(xmc_instance *inst, int32_t device, xmc_event **out);
xmc_status event_destroy(xmc_instance *inst, xmc_event *e);
xmc_status event_record(xmc_instance *inst, xmc_event *e, xmc_stream *s);
xmc_status event_synchronize(xmc_instance *inst, xmc_event *e);
xmc_status stream_wait_event(xmc_instance *inst, xmc_stream *s, xmc_event *e);
xmc_status host_callback(xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user);
xmc_status dev_alloc(xmc_instance *inst, int32_t device, size_t bytes, void **out);
xmc_status dev_free(xmc_instance *inst, void *ptr);
// Appends `op` to stream `s` of `inst` (copy.cpp); refuses an unknown stream
// with XMC_ERR_INVALID_HANDLE recorded under `call`.
xmc_status enqueue(xmc_instance *inst, xmc_stream *s, const char *call, std::function<void()> op);

// copy.cpp
xmc_status copy(xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s);

// transfer.cpp
xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats);
// What each rank contributes to a transfer's agreement (AFF-AGREE) and to its completion vote
// (reference/common/transfer_protocol.hpp). Named here so that a broken backend of the self-test
// can plant a bug in it.
using TransferVote = transfer::TransferVote;
// A digest of the plan's segments and digest, the element size, the staging budget and the group's labels.
uint64_t transfer_digest(const xmc_transfer_args &args);

// vmm.cpp
xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info);
xmc_status slot_release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out);
xmc_status slot_remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *host_src, size_t src_bytes,
                      uint32_t flags, xmc_request **out);
xmc_status slot_release_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s, xmc_request **out);
xmc_status slot_remap_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,
                            const void *const *host_srcs, const size_t *src_bytes, uint32_t flags, xmc_request **out);
xmc_status request_launch_copy(xmc_instance *inst, xmc_request *r, uint32_t index, xmc_stream *s);
xmc_status request_wait(xmc_instance *inst, xmc_request *r, uint32_t timeout_ms);
xmc_status request_adopt(xmc_instance *inst, xmc_request *r);
xmc_status request_query(xmc_instance *inst, xmc_request *r, xmc_request_info *out);
xmc_status request_stream_wait(xmc_instance *inst, xmc_request *r, xmc_stream *s);
xmc_status request_destroy(xmc_instance *inst, xmc_request *r);
xmc_status slot_close(xmc_instance *inst, xmc_slot *slot);
xmc_status device_free_memory(xmc_instance *inst, int32_t device, uint64_t *free_bytes, uint64_t *total_bytes);
std::shared_ptr<Vmm> vmm_create();
// Open options of slots: vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL),
// and for VMM-ASYNC-ERROR only, vmm_fail_map=K / vmm_fail_unmap=K (the K-th
// map / unmap a worker makes fails with ENOMEM). False if `key` is none of them.
bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st);
// Before the instance goes: waits for every slot's work, frees the slots, joins the workers.
void vmm_close(Instance *in);
// Self-test only (conformance/broken/vmm_*.cpp): three decisions inside the
// slot code that the seed's bugs got wrong, for a broken backend to plant one.
// The reference never sets them.
struct VmmSeams {
    bool serial_remap_blocks_worker = false;  // the serial worker waits on a remap's release instead of passing over it
    bool close_skips_copy_wait = false;       // close unmaps while copies into the slot still run
    bool work_on_callback_thread = false;     // the stream callback does the driver work itself
    bool remap_moves_slot = false;            // a remap maps its fresh memory wherever mmap puts it
};
VmmSeams &vmm_seams();

} // namespace xmc::host
