// Prepared transfers (transfer_prepared, AFF-PREPARED-*): execute()'s agreement made once at
// prepare, then runs of steps 5 to 7, each behind a run vote, until release.
//
// One run, in order:
//  1. The handle must be a live prepared transfer of this instance (else XMC_ERR_INVALID_HANDLE on
//     this rank alone: its group may be gone; its peers' run votes time out, AFF-NO-HANG).
//  2. This rank's buffers against the memory book (AFF-PREPARED-STALE, -FOLLOW): a buffer whose
//     allocation was freed, replaced (also at the same address) or whose slot is released makes
//     this rank refuse as stale, without touching the memory. Otherwise the backend's executor
//     prepares over the run's stream: staging, and a wait for the caller's earlier work on the
//     stream (AFF-PREPARED-EXACT).
//  3. The run vote: every rank says which prepared transfer it runs, which run of it, and whether
//     it refuses. Any stale rank makes every rank return XMC_ERR_STALE, any other refusal
//     XMC_ERR_REFUSED, and so do votes naming different prepared transfers or runs
//     (AFF-PREPARED-AGREE), all before any write. Where every rank is on one node, a run goes
//     over the group's board in shared memory (board.hpp: votes are flags, staged bytes cross by
//     memory copies) once every rank said, in a run over the group's transport, that it holds
//     the same board: the first run makes the board, the next confirms it, the later ones run on
//     it. A rank whose board broke says so in its next vote, and the group makes a new one.
//  4. execute()'s steps 5 to 7 over the agreed paths (finish()), by the executor made at prepare.
//     It keeps its connections (path IPC's opened peer sources) from one good run to the next;
//     every rank drops and remakes them together when any rank had none, when a run failed, or
//     when a rank's source moved (a slot remapped: a peer's mapping would keep the old memory).
// Errors name transfer_prepare or transfer_run, whichever the caller called.
#include "transfer_protocol.hpp"

#include "board.hpp"

#include <cstring>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace xmc::transfer {
namespace {

using std::to_string;
constexpr const char *kPrepare = "transfer_prepare";
constexpr const char *kRun = "transfer_run";
constexpr const char *kRelease = "transfer_release";

// The live prepared transfers of the library: a handle is looked up here before it is touched, so
// a released, never-prepared or foreign one is refused, never dereferenced.
struct Live {
    std::mutex mu;
    std::set<Prepared *> all;
};
Live &live() {
    static Live *l = new Live;  // never destroyed: a close at exit may still look
    return *l;
}

// The shared protocol reports as transfer_execute; a prepared transfer's caller called `call`.
xmc_status renamed(xmc_instance *inst, xmc_status s, const char *call) {
    if (s == XMC_OK) return s;
    xmc_error_info e{};
    be::last_error(inst, &e);
    std::string msg = e.message;
    if (msg.rfind("transfer_execute", 0) == 0) msg = call + msg.substr(std::strlen("transfer_execute"));
    return be::fail(inst, s, e.native_code, call, "%s", msg.c_str());
}

void set_reason(RunVote &v, const std::string &why) {
    std::snprintf(v.reason, sizeof v.reason, "%s", why.c_str());
}

// The memory under a buffer: the book's stamp, or for memory the book does not know, the driver's
// identity of its allocation (`then`: the stamp at prepare, which says which of the two to ask).
be::MemoryStamp stamp_of(Executor &ex, const xmc_shard_buffer &b, const be::MemoryStamp *then) {
    if (!b.ptr) return {};
    if (then && then->kind != be::MemKind::Driver) return be::book_find(b.ptr);
    be::MemoryStamp s = then ? *then : be::book_find(b.ptr);
    if (!then && s.serial != 0) return s;  // the backend's own memory: the book knows it
    const uint64_t id = ex.buffer_identity(b);
    if (!then && (id == 0 || id == Executor::kNoBuffer)) return s;  // untracked: the caller's to keep
    s.kind = be::MemKind::Driver;
    s.base = reinterpret_cast<uintptr_t>(b.ptr);
    s.serial = id == Executor::kNoBuffer ? 0 : id;  // 0: freed (the driver answers for nothing there)
    return s;
}

}  // namespace

// ---- the reference's steps (Steps: stale, run_agree, run_stream, release) ----

std::string prepared_stale(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side) {
    if (then.serial == 0) return "";  // plain memory: the caller's to keep alive (SPEC 5)
    if (now.serial != then.serial)
        return std::string("its ") + side + " buffer's " + be::mem_kind_name(then.kind) +
               (now.serial ? " was freed and another allocation now holds the address" : " was freed");
    if (now.released) return std::string("its ") + side + " buffer's slot is released";
    return "";
}

bool prepared_source_moved(const be::MemoryStamp &last, const be::MemoryStamp &now) {
    return now.serial != last.serial || now.backing != last.backing;
}

std::string prepared_run_agree(const std::vector<RunVote> &votes, int me) {
    const RunVote &mine = votes[size_t(me)];
    for (size_t k = 0; k < votes.size(); ++k) {
        const RunVote &v = votes[k];
        if (v.index != int32_t(k))
            return "the rank at group position " + to_string(k) + " believes it is at position " + to_string(v.index);
        if (v.id != mine.id) return "rank " + to_string(v.label) + " runs another prepared transfer";
        if (v.generation != mine.generation)
            return "rank " + to_string(v.label) + " is at run " + to_string(v.generation) + " of the prepared "
                   "transfer, rank " + to_string(mine.label) + " at run " + to_string(mine.generation);
    }
    return "";
}

xmc_stream *prepared_run_stream(xmc_stream *caller) { return caller; }

bool prepared_live(xmc_instance *inst, Prepared *p) { return p && prepared_owner(p) == inst; }

xmc_instance *prepared_owner(Prepared *p) {
    std::lock_guard<std::mutex> lk(live().mu);
    return live().all.count(p) && p->magic == kPreparedMagic ? p->inst : nullptr;
}

bool prepared_release(xmc_instance *inst, Prepared *p) {
    {
        std::lock_guard<std::mutex> lk(live().mu);
        if (!live().all.count(p) || p->magic != kPreparedMagic || p->inst != inst) return false;
        live().all.erase(p);
        p->magic = 0;
    }
    delete p;
    return true;
}

// ---- the entry points ----

xmc_status prepare(xmc_instance *inst, const xmc_transfer_args *args, xmc_prepared **out, MakeExecutor make) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kPrepare, "%s: result pointer is NULL", kPrepare);
    try {
        std::unique_ptr<Executor> ex = make(inst);
        auto p = std::make_unique<Prepared>();
        xmc_transfer_stats unused{};
        Agreed agreed{};
        if (xmc_status s = agree(inst, args, &unused, *ex, p->args, p->work, agreed); s != XMC_OK)
            return renamed(inst, s, kPrepare);
        // The plan and layouts are the caller's until prepare returns: copied.
        xmc_transfer_args &a = p->args;
        p->segments.assign(a.plan.segments, a.plan.segments + a.plan.segment_count);
        a.plan.segments = p->segments.data();
        if (a.layouts) p->layouts.assign(a.layouts, a.layouts + a.layout_count);
        a.layouts = a.layouts ? p->layouts.data() : nullptr;
        a.peer_paths = nullptr;
        a.stream = nullptr;
        p->source = stamp_of(*ex, a.source, nullptr);
        p->source_last = p->source;
        p->target = stamp_of(*ex, a.target, nullptr);
        p->digest = agreed.digest;
        p->paths = agreed.paths;
        p->id = agreed.call;
        p->one_node = agreed.one_node;
        p->inst = inst;
        p->ex = std::move(ex);
        p->magic = kPreparedMagic;
        {
            std::lock_guard<std::mutex> lk(live().mu);
            live().all.insert(p.get());
        }
        *out = reinterpret_cast<xmc_prepared *>(p.release());
        return be::ok();
    } catch (const std::bad_alloc &) {
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, kPrepare, "%s: out of host memory", kPrepare);
    }
}

xmc_status run(xmc_instance *inst, xmc_prepared *handle, xmc_stream *s, xmc_transfer_stats *stats,
               xmc_path *peer_paths) {
    auto *p = reinterpret_cast<Prepared *>(handle);
    if (!stats) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kRun, "%s: stats is NULL", kRun);
    *stats = xmc_transfer_stats{};
    // Step 1.
    if (!p || !prepared_live(inst, p))
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, kRun,
                        "%s: %p is no prepared transfer of this instance (never prepared, or released)", kRun,
                        static_cast<void *>(handle));
    const xmc_group *g = p->args.group;
    const int32_t my_label = g->ranks[g->my_index];
    try {
        xmc_transfer_args a = p->args;
        a.peer_paths = peer_paths;
        Work w = p->work;
        w.native = 0;
        if (peer_paths) std::copy(w.path.begin(), w.path.end(), peer_paths);
        // Step 2.
        const Steps &st = steps();
        std::string why;
        bool stale = false;
        Executor &ex = *p->ex;
        const be::MemoryStamp source_now = stamp_of(ex, a.source, &p->source);
        if (a.source.ptr) why = st.stale(p->source, source_now, "source");
        if (why.empty() && a.target.ptr) why = st.stale(p->target, stamp_of(ex, a.target, &p->target), "target");
        stale = !why.empty();
        // AFF-PREPARED-FOLLOW: a peer that mapped this rank's source slot keeps the backing it
        // mapped (the real driver: a remap at the exporter leaves an importer's mapping on the old
        // memory, with no error), so after a remap this rank drops its connections and votes so:
        // every rank connects again, to the new backing.
        if (st.source_moved(p->source_last, source_now)) ex.disconnect();
        p->source_last = source_now;
        if (!stale) {
            a.stream = st.run_stream(s);
            why = ex.prepare(a, w);
        }
        // Step 3. Over the board, when every rank confirmed holding this one in an earlier run:
        // then the whole run (votes, staged bytes, what the executor exchanges) goes over it.
        const std::shared_ptr<Board> held = p->one_node ? group_board(g) : nullptr;
        const bool on_board = held && held == p->board && p->board_confirmed;
        xmc_group board_group = *g;
        if (on_board) board_group.transport = held->transport(g->timeout_ms);
        const xmc_transport &vt = *board_group.transport;
        const std::string medium = std::string("transport '") + (vt.name ? vt.name : "?") + "'";
        RunVote mine{};
        mine.id = p->id;
        mine.generation = ++p->generation;
        mine.nonce = random_nonce();
        mine.board = held ? held->name() : 0;
        mine.index = g->my_index;
        mine.label = my_label;
        mine.refused = why.empty() ? 0 : 1;
        mine.stale = stale ? 1 : 0;
        mine.connected = ex.connected() ? 1 : 0;
        set_reason(mine, why);
        std::vector<RunVote> votes(size_t(g->size));
        xmc_status vs = transport_status(vt.all_gather(vt.ctx, &mine, votes.data(), sizeof mine, g->timeout_ms));
        auto failed = [&](xmc_status code, int64_t native, const std::string &msg) {
            ++p->failed_runs;
            return be::fail(inst, code, native, kRun, "%s: %s", kRun, msg.c_str());
        };
        if (vs != XMC_OK)
            return failed(vs, 0, "rank " + to_string(my_label) + ": the run vote over " + medium + " failed: " +
                                     xmc_status_string(vs) + " within " + to_string(g->timeout_ms) + " ms");
        if (stale) return failed(XMC_ERR_STALE, 0, "rank " + to_string(my_label) + ": " + why);
        if (!why.empty() && w.native)
            return failed(XMC_ERR_DRIVER, w.native, "rank " + to_string(my_label) + ": " + why);
        if (!why.empty()) return failed(XMC_ERR_REFUSED, 0, "rank " + to_string(my_label) + " refused: " + why);
        for (const RunVote &v : votes)
            if (v.refused && v.stale)
                return failed(XMC_ERR_STALE, 0, "stale because rank " + to_string(v.label) + " found " + v.reason);
        for (const RunVote &v : votes)
            if (v.refused) return failed(XMC_ERR_REFUSED, 0, "refused because rank " + to_string(v.label) +
                                                               " refused: " + v.reason);
        if (std::string d = st.run_agree(votes, g->my_index); !d.empty()) return failed(XMC_ERR_REFUSED, 0, "refused: " + d);
        uint64_t call = 0xcbf29ce484222325ull;
        bool all_connected = true, one_board = mine.board != 0;
        for (const RunVote &v : votes) {
            call = (call ^ v.nonce) * 0x100000001b3ull;
            all_connected = all_connected && v.connected;
            one_board = one_board && v.board == mine.board;
        }
        // Every rank saw the same votes over the transport, so every rank confirms the board, or
        // makes a new one (named by this run: the same name on every rank), alike. A rank that
        // cannot have one votes 0 next time, and the runs keep voting over the transport.
        if (p->one_node && !on_board) {
            std::string unused;
            if (one_board) {
                p->board = held;
                p->board_confirmed = true;
                held->unlink();  // every rank has it open
            } else {
                p->board = new_group_board(g, call, &unused);
                p->board_confirmed = false;
            }
        }
        a.group = &board_group;  // (the transport this run started on, to its end)
        // Step 4. Connections are kept from run to run only while every rank kept its own: else
        // every rank connects again in this run's move (a rank that reconnected alone would wait
        // for peers that do not, AFF-NO-HANG).
        if (!all_connected) ex.disconnect();
        ex.keep(true);
        const Agreed agreed{p->digest, p->paths, call};
        const xmc_status r = finish(inst, a, w, ex, call, agreed, stats);
        if (r != XMC_OK) {
            ++p->failed_runs;
            ex.disconnect();  // the next run connects again, on every rank (the vote above)
            if (on_board) held->retire();  // and makes a new board (its rings may hold a message)
        }
        return renamed(inst, r, kRun);
    } catch (const std::bad_alloc &) {
        ++p->failed_runs;
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, kRun, "%s: rank %d: out of host memory", kRun, my_label);
    }
}

xmc_status release(xmc_instance *inst, xmc_prepared *handle) {
    auto *p = reinterpret_cast<Prepared *>(handle);
    if (!p || !steps().release(inst, p))
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, kRelease,
                        "%s: %p is no prepared transfer of this instance (never prepared, or released already)",
                        kRelease, static_cast<void *>(handle));
    return be::ok();
}

uint32_t release_all_prepared(xmc_instance *inst) {
    std::vector<Prepared *> mine;
    {
        std::lock_guard<std::mutex> lk(live().mu);
        for (Prepared *p : live().all)
            if (p->inst == inst) mine.push_back(p);
    }
    uint32_t n = 0;
    for (Prepared *p : mine) n += prepared_release(inst, p) ? 1 : 0;
    return n;
}

}  // namespace xmc::transfer
