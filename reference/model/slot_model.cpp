#include "slot_model.hpp"

#include <set>

namespace xmc::model {

bool SlotModel::live_slot(int s) const {
    return s >= 0 && static_cast<size_t>(s) < slots_.size() && slots_[s].state != SlotState::Closed;
}

bool SlotModel::live_request(int r) const {
    return r >= 0 && static_cast<size_t>(r) < requests_.size() && !requests_[r].destroyed;
}

bool SlotModel::holds_mapping_of(int s, int r) const {
    const ModelSlot &x = slots_[s];
    if (!live_slot(s) || x.mapped_by != r) return false;
    return x.state == SlotState::Mapped || (x.state == SlotState::RemapPending && x.request == r);
}

xmc_status SlotModel::create(size_t bytes) {
    // VMM-CREATE: any size but 0 makes a mapped slot (the backend rounds it).
    if (bytes == 0) return XMC_ERR_INVALID_ARGUMENT;
    slots_.push_back(ModelSlot{});
    return XMC_OK;
}

// Refusals in the order every backend checks them: arguments, handles,
// duplicates, (sources,) states. A refused call changes nothing.
static xmc_status check_batch(const SlotModel &m, const std::vector<int> &slots) {
    if (slots.empty()) return XMC_ERR_INVALID_ARGUMENT;
    for (int s : slots)
        if (!m.live_slot(s)) return XMC_ERR_INVALID_HANDLE;
    // VMM-BATCH: a slot named twice: refused before any slot changes.
    if (std::set<int>(slots.begin(), slots.end()).size() != slots.size()) return XMC_ERR_DUPLICATE_IN_BATCH;
    return XMC_OK;
}

xmc_status SlotModel::release(const std::vector<int> &slots) {
    if (xmc_status st = check_batch(*this, slots); st != XMC_OK) return st;
    for (int s : slots)
        if (slots_[s].state != SlotState::Mapped) return XMC_ERR_BUSY;  // VMM-STATE
    const int r = static_cast<int>(requests_.size());
    // VMM-RELEASE-ORDER: pending until waited for; nothing readable meanwhile.
    requests_.push_back(ModelRequest{RequestKind::Release, false, slots, {}, {}});
    for (int s : slots) {
        ModelSlot &x = slots_[s];
        x.state = SlotState::ReleasePending;
        x.request = r;
        x.mapped_by = -1;
        // A copy in flight lands before the unmap; if the unmap fails, the
        // slot keeps those bytes (VMM-ASYNC-ERROR).
        x.before = x.copy_in_flight ? x.incoming : x.content;
        x.content = x.incoming = kNoTag;
        x.copy_in_flight = false;
    }
    return XMC_OK;
}

xmc_status SlotModel::remap(const std::vector<int> &slots, const std::vector<Source> &sources,
                            const std::vector<int> &tags, uint32_t flags) {
    if (sources.size() != slots.size() || tags.size() != slots.size() || (flags & ~XMC_REMAP_DEFER_COPY))
        return XMC_ERR_INVALID_ARGUMENT;
    if (xmc_status st = check_batch(*this, slots); st != XMC_OK) return st;
    // VMM-REMAP-COPY: a source other than a pinned base of >= the slot's size
    // is refused, nothing changed.
    for (Source src : sources) {
        if (src == Source::Null || src == Source::Short) return XMC_ERR_INVALID_ARGUMENT;
        if (src != Source::Valid) return XMC_ERR_NOT_PINNED_BASE;
    }
    for (int s : slots) {
        const SlotState st = slots_[s].state;
        // Only a released slot, or one whose release is pending (VMM-STATE).
        if (st != SlotState::ReleasePending && st != SlotState::Released) return XMC_ERR_BUSY;
    }
    const bool defer = flags & XMC_REMAP_DEFER_COPY;
    const int r = static_cast<int>(requests_.size());
    requests_.push_back(ModelRequest{RequestKind::Remap, defer, slots, tags,
                                     std::vector<bool>(slots.size(), !defer)});
    for (size_t i = 0; i < slots.size(); ++i) {
        ModelSlot &x = slots_[slots[i]];
        x.state = SlotState::RemapPending;
        x.request = r;
        x.mapped_by = r;
        // VMM-REMAP-COPY: the copy leaves the source's bytes;
        // VMM-DEFERRED: a deferred one only once launched.
        x.incoming = defer ? kNoTag : tags[i];
        x.copy_in_flight = !defer;
        x.content = kNoTag;  // fresh memory: nothing promised until a copy lands
    }
    return XMC_OK;
}

xmc_status SlotModel::launch(int r, uint32_t index) {
    if (!live_request(r)) return XMC_ERR_INVALID_HANDLE;
    ModelRequest &q = requests_[r];
    if (q.kind != RequestKind::Remap || !q.defer || index >= q.slots.size()) return XMC_ERR_INVALID_ARGUMENT;
    if (q.launched[index] || q.failed) return XMC_ERR_BUSY;  // once per slot (VMM-DEFERRED)
    const int s = q.slots[index];
    if (!holds_mapping_of(s, r)) return XMC_ERR_BUSY;  // closed, or released since
    q.launched[index] = true;
    q.worker_done = true;  // a launch waits for the remap
    slots_[s].incoming = q.tags[index];
    slots_[s].copy_in_flight = true;
    return XMC_OK;
}

void SlotModel::settle_copies(int r) {
    for (int s : requests_[r].slots) {
        ModelSlot &x = slots_[s];
        if (live_slot(s) && x.mapped_by == r && x.copy_in_flight) {
            x.content = x.incoming;
            x.copy_in_flight = false;
        }
    }
}

xmc_status SlotModel::wait(int r) {
    if (!live_request(r)) return XMC_ERR_INVALID_HANDLE;
    ModelRequest &q = requests_[r];
    q.worker_done = true;
    // VMM-RELEASE-ORDER: once waited for, a release has taken effect.
    settle_copies(r);
    for (int s : q.slots)
        if (slots_[s].state == SlotState::ReleasePending && slots_[s].request == r) {
            slots_[s].state = SlotState::Released;
            slots_[s].request = -1;
        }
    // VMM-ASYNC-ERROR: a worker's failure surfaces at the wait.
    return q.failed ? XMC_ERR_DRIVER : XMC_OK;
}

xmc_status SlotModel::adopt(int r) {
    if (!live_request(r)) return XMC_ERR_INVALID_HANDLE;
    ModelRequest &q = requests_[r];
    if (q.kind != RequestKind::Remap) return XMC_ERR_INVALID_ARGUMENT;
    if (q.adopted || q.failed) return XMC_ERR_BUSY;
    q.worker_done = true;  // adopt waits for the remap (not for its copies)
    // VMM-ADOPT: the mapping is the slot's now; destroy no longer touches it.
    q.adopted = true;
    for (int s : q.slots)
        if (live_slot(s) && slots_[s].state == SlotState::RemapPending && slots_[s].request == r) {
            slots_[s].state = SlotState::Mapped;
            slots_[s].request = -1;
        }
    return XMC_OK;
}

xmc_status SlotModel::destroy(int r) {
    if (!live_request(r)) return XMC_ERR_INVALID_HANDLE;
    wait(r);  // destroy waits for the request's work first
    ModelRequest &q = requests_[r];
    // VMM-ADOPT: only a mapping never adopted goes with its request.
    if (q.kind == RequestKind::Remap && !q.adopted && !q.failed)
        for (int s : q.slots)
            if (live_slot(s) && slots_[s].state == SlotState::RemapPending && slots_[s].request == r) {
                ModelSlot &x = slots_[s];  // a mapping never adopted is the request's: rolled back
                x.state = SlotState::Released;
                x.request = -1;
                x.mapped_by = -1;
                x.content = kNoTag;
            }
    q.destroyed = true;
    return XMC_OK;
}

xmc_status SlotModel::stream_wait(int r) const {
    if (!live_request(r)) return XMC_ERR_INVALID_HANDLE;
    // VMM-EVENT-WAIT: a stream may wait for a remap's copies at any time;
    // after_copies says what it then reads.
    if (requests_[r].kind != RequestKind::Remap) return XMC_ERR_INVALID_ARGUMENT;  // no copies to wait for
    return XMC_OK;
}

xmc_status SlotModel::close(int s) {
    if (!live_slot(s)) return XMC_ERR_INVALID_HANDLE;
    ModelSlot &x = slots_[s];
    // VMM-CLOSE: closing a live slot succeeds; later calls on it are refused.
    x.state = SlotState::Closed;
    x.request = -1;
    x.mapped_by = -1;
    x.content = x.incoming = kNoTag;
    x.copy_in_flight = false;
    return XMC_OK;
}

void SlotModel::roll_back_remap(int r, int keep_mapped) {
    ModelRequest &q = requests_[r];
    q.failed = true;
    q.worker_done = true;
    // VMM-ASYNC-ERROR: every mapping of a failed remap is rolled back; a slot
    // whose release failed keeps its old one.
    q.launched.assign(q.slots.size(), false);  // copies start only after every slot is mapped
    for (int s : q.slots) {
        ModelSlot &x = slots_[s];
        if (!live_slot(s) || x.state != SlotState::RemapPending || x.request != r) continue;
        const bool kept = s == keep_mapped;  // its release failed: never unmapped
        x.state = kept ? SlotState::Mapped : SlotState::Released;
        x.request = -1;
        x.mapped_by = -1;
        x.content = kept ? x.before : kNoTag;
        x.incoming = kNoTag;
        x.copy_in_flight = false;
    }
}

void SlotModel::fail(int r, uint32_t index) {
    ModelRequest &q = requests_[r];
    q.failed_at = static_cast<int>(index);
    if (q.kind == RequestKind::Remap) {
        roll_back_remap(r, -1);
        return;
    }
    q.failed = true;
    q.worker_done = true;
    for (size_t i = 0; i < q.slots.size(); ++i) {
        ModelSlot &x = slots_[q.slots[i]];
        if (!live_slot(q.slots[i])) continue;
        if (i != index) {
            if (x.state == SlotState::ReleasePending && x.request == r) {
                x.state = SlotState::Released;
                x.request = -1;
            }
            continue;
        }
        if (x.state == SlotState::ReleasePending && x.request == r) {
            // VMM-ASYNC-ERROR: a failed release leaves its slot mapped.
            x.state = SlotState::Mapped;  // the unmap failed: mapping and bytes stay
            x.request = -1;
            x.content = x.before;
        } else if (x.state == SlotState::RemapPending) {
            roll_back_remap(x.request, q.slots[i]);  // a remap waiting on it fails too
        }
    }
}

bool SlotModel::accessible(int s) const {
    if (!live_slot(s) || slots_[s].copy_in_flight) return false;
    const ModelSlot &x = slots_[s];
    if (x.state == SlotState::Mapped) return true;
    if (x.state != SlotState::RemapPending) return false;
    const ModelRequest &q = requests_[x.request];
    return q.worker_done && !q.failed;
}

void SlotModel::write(int s, int tag) { slots_[s].content = tag; }

bool SlotModel::holds_memory(int s) const {
    if (!live_slot(s)) return false;
    const ModelSlot &x = slots_[s];
    return x.state == SlotState::Mapped || (x.state == SlotState::RemapPending && !requests_[x.request].failed);
}

int SlotModel::after_copies(int r, uint32_t index) const {
    if (!live_request(r)) return kNoTag;
    const ModelRequest &q = requests_[r];
    if (q.kind != RequestKind::Remap || index >= q.slots.size() || q.failed || !q.launched[index]) return kNoTag;
    const int s = q.slots[index];
    if (!holds_mapping_of(s, r)) return kNoTag;
    return slots_[s].copy_in_flight ? slots_[s].incoming : slots_[s].content;
}

// ---- graphs -----------------------------------------------------------------

xmc_status SlotModel::begin_capture(int stream) {
    if (!capturing_.insert(stream).second) return XMC_ERR_CAPTURING;
    return XMC_OK;
}

xmc_status SlotModel::end_capture(int stream) {
    return capturing_.erase(stream) ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
}

bool SlotModel::capturing(int stream) const { return capturing_.count(stream) != 0; }

// VMM-GRAPH-ORDER: a call the capture may not join, on a capturing stream:
// refused after the call's own refusals, and nothing changes.
xmc_status SlotModel::release_on(int stream, const std::vector<int> &slots) {
    SlotModel next = *this;
    const xmc_status st = next.release(slots);
    if (st != XMC_OK) return st;
    if (capturing(stream)) return XMC_ERR_CAPTURING;
    *this = std::move(next);
    return XMC_OK;
}

xmc_status SlotModel::remap_on(int stream, const std::vector<int> &slots, const std::vector<Source> &sources,
                               const std::vector<int> &tags, uint32_t flags) {
    SlotModel next = *this;
    const xmc_status st = next.remap(slots, sources, tags, flags);
    if (st != XMC_OK) return st;
    if (capturing(stream)) return XMC_ERR_CAPTURING;
    *this = std::move(next);
    return XMC_OK;
}

xmc_status SlotModel::launch_on(int stream, int request, uint32_t index) {
    SlotModel next = *this;
    const xmc_status st = next.launch(request, index);
    if (st != XMC_OK) return st;
    if (capturing(stream)) return XMC_ERR_CAPTURING;
    *this = std::move(next);
    return XMC_OK;
}

xmc_status SlotModel::stream_wait_on(int stream, int request) const {
    const xmc_status st = stream_wait(request);
    if (st != XMC_OK) return st;
    return capturing(stream) ? XMC_ERR_CAPTURING : XMC_OK;
}

int SlotModel::add_graph(int slot, bool writes, int tag) {
    graphs_.push_back(ModelGraph{slot, writes, writes ? tag : kNoTag, false});
    return static_cast<int>(graphs_.size()) - 1;
}

bool SlotModel::live_graph(int g) const {
    return g >= 0 && static_cast<size_t>(g) < graphs_.size() && !graphs_[g].destroyed;
}

xmc_status SlotModel::launch_graph(int g, int stream, int *read) {
    *read = kNoTag;
    if (!live_graph(g)) return XMC_ERR_INVALID_HANDLE;
    if (capturing(stream)) return XMC_ERR_CAPTURING;
    const ModelGraph &x = graphs_[g];
    // VMM-GRAPH: the addresses it was recorded with, the backing of now.
    if (!accessible(x.slot)) return XMC_OK;  // nothing promised (the test never launches so)
    if (x.writes) write(x.slot, x.tag);
    else *read = slots_[x.slot].content;
    return XMC_OK;
}

xmc_status SlotModel::destroy_graph(int g) {
    if (!live_graph(g)) return XMC_ERR_INVALID_HANDLE;
    graphs_[g].destroyed = true;  // GRAPH-CAPTURE: waits for its launches first
    return XMC_OK;
}

} // namespace xmc::model
