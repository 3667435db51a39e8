// The slot oracle (SPEC 5, VMM-*): a pure state machine that says, for any
// operation in any state, the expected status and the next state. It never
// touches memory or a driver. Slots and requests are named by creation order.
//
// A slot moves through
//   Mapped -> ReleasePending -> Released -> RemapPending -> Mapped (adopted)
// and may be closed from any state. The caller cannot see when a worker runs,
// so a state is what the caller's own calls make it: ReleasePending lasts
// until the release is waited for (a release and a remap answer the same in
// ReleasePending and Released), RemapPending until the remap is adopted or its
// request destroyed (the mapping belongs to the request until then: VMM-ADOPT).
// Outcomes never depend on the number of workers (VMM-SERIAL: serial mode is
// the same machine).
//
// Contents are tags: the test owns the bytes behind each tag (random data), the
// model says which tag a slot must hold, or kNoTag when nothing is promised.
#pragma once
#include <xmc/backend.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace xmc::model {

// VMM-STABLE: a slot keeps its creation index, and the address its backend gave it,
// through every transition; only close ends it.
enum class SlotState { Mapped, ReleasePending, Released, RemapPending, Closed };
enum class RequestKind { Release, Remap };

// What a remap source is, relative to the slot (VMM-REMAP-COPY); only Valid is
// accepted: pinned, at a pinned block's base, block and length >= slot size.
enum class Source {
    Valid,
    Null,          // NULL pointer                       -> invalid argument
    Short,         // src_bytes < slot size              -> invalid argument
    NotPinned,     // memory no pinned block holds       -> not a pinned base
    NotBase,       // inside a pinned block, not its base -> not a pinned base
    BlockTooSmall  // pinned base, block < src_bytes      -> not a pinned base
};

constexpr int kNoTag = -1;

struct ModelSlot {
    SlotState state = SlotState::Mapped;
    int request = -1;            // the release or remap pending on it
    int mapped_by = -1;          // remap request whose mapping it holds (-1: create's own)
    int content = kNoTag;        // tag it holds when no copy is in flight
    int incoming = kNoTag;       // tag a copy in flight will leave
    int before = kNoTag;         // tag it held when its last release was asked (kept if that fails)
    bool copy_in_flight = false; // a copy was started and not yet waited for
};

struct ModelRequest {
    RequestKind kind = RequestKind::Release;
    bool defer = false;
    std::vector<int> slots;
    std::vector<int> tags;       // remap: the tag of each slot's source
    std::vector<bool> launched;  // remap: copy started (all at once unless deferred)
    bool worker_done = false;    // known finished: waited, adopted, launched or destroyed
    bool adopted = false;
    bool destroyed = false;
    bool failed = false;         // an asynchronous driver failure (VMM-ASYNC-ERROR)
    int failed_at = -1;          // VMM-BATCH-PARTIAL: the index in the batch of the slot it failed at
};

// A graph captured over one slot (capability graph, VMM-GRAPH): its work either
// reads the whole slot into the test's buffer or writes one tag's bytes into it.
struct ModelGraph {
    int slot = -1;
    bool writes = false;
    int tag = kNoTag;        // what a writing graph leaves
    bool destroyed = false;
};

class SlotModel {
public:
    // VMM-CREATE: bytes > 0 on device 0 (the tests use device 0).
    xmc_status create(size_t bytes);
    // VMM-RELEASE-ORDER / VMM-STATE / VMM-BATCH: one slot or a batch.
    xmc_status release(const std::vector<int> &slots);
    // VMM-REMAP-COPY / VMM-STATE / VMM-BATCH / VMM-DEFERRED.
    xmc_status remap(const std::vector<int> &slots, const std::vector<Source> &sources,
                     const std::vector<int> &tags, uint32_t flags);
    // VMM-DEFERRED: once per slot, into the mapping the request made.
    xmc_status launch(int request, uint32_t index);
    // Waits for the worker and every copy started so far.
    xmc_status wait(int request);
    // VMM-ADOPT: the mapping passes to the slot.
    xmc_status adopt(int request);
    // A mapping never adopted is rolled back; an adopted one stays (VMM-ADOPT).
    xmc_status destroy(int request);
    // VMM-EVENT-WAIT: a stream waits for the request's copies.
    xmc_status stream_wait(int request) const;
    // VMM-CLOSE: waits for the slot's work, then frees it.
    xmc_status close(int slot);

    // VMM-ASYNC-ERROR: the worker's driver call for slot `index` of `request`
    // failed. A failed release leaves that slot mapped (its contents intact)
    // and releases the others; a failed remap rolls back all its mappings; a
    // remap waiting on a failed release fails too and finds the slot mapped.
    // VMM-BATCH-PARTIAL: the request names `index` as the slot it failed at,
    // and every slot of it ends Mapped or Released, never half-way.
    // VMM-ERROR-CLEAR: nothing else remembers the failure: a slot's next
    // request is answered by its state alone, as after any success.
    // VMM-DOUBLE: a released slot is never released again (release needs
    // Mapped: busy), and a closed slot is no slot (invalid handle, close too).
    void fail(int request, uint32_t index);

    // VMM-UNMAPPED-FAULTS: a released slot is never accessible (access faults).
    // The test may read or write a slot's bytes: mapped, nothing in flight.
    bool accessible(int slot) const;
    void write(int slot, int tag);
    // VMM-RELEASE-ORDER: a released slot holds no memory (free memory grows).
    // Physical memory a slot holds once pending work settles (for free-memory checks).
    bool holds_memory(int slot) const;
    // The tag a reader ordered after the request's copies sees in slot `index`
    // (VMM-EVENT-WAIT), or kNoTag when nothing is promised.
    int after_copies(int request, uint32_t index) const;

    // ---- graphs (capability graph; VMM-GRAPH, VMM-GRAPH-ORDER) --------------
    // Streams are numbers the caller chooses. A graph launch is work on its
    // stream, like a copy; a capturing stream refuses release, remap, deferred
    // launches, stream waits and graph launches (capturing, nothing changed),
    // after every other refusal of the call. The *_on forms are the calls
    // above made on `stream`.
    xmc_status begin_capture(int stream);  // capturing when it captures already
    xmc_status end_capture(int stream);    // invalid argument when it does not capture
    bool capturing(int stream) const;
    xmc_status release_on(int stream, const std::vector<int> &slots);
    xmc_status remap_on(int stream, const std::vector<int> &slots, const std::vector<Source> &sources,
                        const std::vector<int> &tags, uint32_t flags);
    xmc_status launch_on(int stream, int request, uint32_t index);
    xmc_status stream_wait_on(int stream, int request) const;
    // A graph over `slot` recorded by a capture (which the caller began and ends):
    // its index. Recording runs nothing, so it changes no slot.
    int add_graph(int slot, bool writes, int tag);
    // VMM-GRAPH: a launch sees the slot's backing of the moment it runs: a
    // reading graph reads what the slot holds (*read: its tag, kNoTag when
    // nothing is promised or the slot is not accessible), a writing one
    // leaves its tag in an accessible slot. Capturing on `stream`: refused.
    xmc_status launch_graph(int graph, int stream, int *read);
    xmc_status destroy_graph(int graph);
    bool live_graph(int g) const;
    const std::vector<ModelGraph> &graphs() const { return graphs_; }

    const std::vector<ModelSlot> &slots() const { return slots_; }
    const std::vector<ModelRequest> &requests() const { return requests_; }
    bool live_slot(int s) const;
    bool live_request(int r) const;

private:
    // Holds `request`'s mapping: remapped by it and not released since.
    bool holds_mapping_of(int slot, int request) const;
    void settle_copies(int request);
    void roll_back_remap(int request, int keep_mapped_slot);
    std::vector<ModelSlot> slots_;
    std::vector<ModelRequest> requests_;
    std::vector<ModelGraph> graphs_;
    std::set<int> capturing_;  // streams that capture now
};

} // namespace xmc::model
