// Path IPC of the CUDA affine executor (transfer_ipc.hpp; AFF-PATH: two processes of one node).
//
// After the agreement every rank of a group in which any pair takes path IPC gathers one Info
// per rank (even a rank with nothing to share: every rank takes part in every gather):
//  - A source read by a peer on path IPC is shared: cuMemAlloc memory (the pointer attribute
//    IS_LEGACY_CUDA_IPC_CAPABLE) by its legacy handle (cuIpcGetMemHandle names the whole
//    allocation: recorded, an interior pointer gives the allocation's handle, and the opener gets
//    the allocation's base, so the Info carries the source's offset from the allocation's start);
//    VMM memory created for POSIX file descriptors (a slot's, say) by a descriptor of its
//    physical handle (cuMemRetainAllocationHandle, cuMemExportToShareableHandle), passed after the
//    gather over a Unix socket (SCM_RIGHTS) that the reader listens on, in the abstract namespace,
//    named after the call's tag (the same on every rank) and the reader's label.
//  - Each target rank opens the sources it reads from in the current context (cuIpcOpenMemHandle;
//    or imports the descriptor, reserves an address range, maps it, grants its device access) and
//    pulls its segments from there with device copies (the executor's copy_box), no host staging.
// Everything opened is closed by close() once the executor has waited for its streams, before
// the completion vote, also after a failure: the vote then keeps every source alive until its
// readers are done (no rank returns, and frees its source, while another still reads it).
// A rank whose sharing fails says so in its Info (with the driver's code), and its readers fail
// with that code; every wait on a socket is bounded by the group's timeout (AFF-NO-HANG).
#include "transfer_ipc.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace xmc::cuda {
namespace {

constexpr const char *kCall = "transfer_execute";
using std::to_string;
using Clock = std::chrono::steady_clock;


bool on_ipc(const transfer::Work &w, int p) { return p != w.me && w.path[size_t(p)] == XMC_PATH_IPC; }

// The socket rank `label` receives its VMM peers' descriptors on in the call `tag`.
sockaddr_un socket_name(uint64_t tag, int32_t label, socklen_t *len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;  // sun_path[0] == 0: the abstract namespace (nothing on disk to remove)
    const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "xmc-ipc-%016llx-%d",
                                static_cast<unsigned long long>(tag), label);
    *len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + size_t(n));
    return a;
}

int ms_left(Clock::time_point end) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return left > 0 ? int(std::min<long long>(left, 1 << 30)) : 0;
}

// One message: the sender's group position, and its descriptor.
bool send_fd(int sock, int32_t index, int fd) {
    iovec io{&index, sizeof index};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &m, MSG_NOSIGNAL) == ssize_t(sizeof index);
}

bool recv_fd(int sock, int32_t *index, int *fd) {
    *fd = -1;
    iovec io{index, sizeof *index};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    const ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    for (cmsghdr *c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
    return n == ssize_t(sizeof *index) && *fd >= 0;
}

}  // namespace

xmc_status IpcPath::fail(CUresult r, const std::string &what) { return driver_fail(inst_, r, kCall, what.c_str()); }

// How buffer b's memory can be shared, or why it cannot.
std::string IpcPath::classify(const xmc_shard_buffer &b, size_t elem, Share *s) {
    *s = Share{};
    int64_t n = 0;
    transfer::shard_numel(b.ndim, b.shape, &n);
    if (n == 0) return "";  // nothing to share
    const auto ptr = reinterpret_cast<CUdeviceptr>(b.ptr);
    int legacy = 0;  // the driver writes a boolean; zeroed so that any width reads right
    if (CUresult r = d_.cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr);
        r != CUDA_SUCCESS)
        return s->native = r, "the driver does not know this rank's source (cuPointerGetAttribute failed with " +
               std::string(d_.result_name(r)) + ")";
    CUpointer_attribute start_attr = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, size_attr = CU_POINTER_ATTRIBUTE_RANGE_SIZE;
    if (legacy) {
        s->kind = kLegacy;
    } else {
        uint64_t types = 0;
        if (CUresult r = d_.cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, ptr); r != CUDA_SUCCESS)
            return s->native = r, "cuPointerGetAttribute (its handle types) of this rank's source failed with " +
                                      std::string(d_.result_name(r));
        if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
            return "this rank's source is neither cuMemAlloc memory nor VMM memory created for POSIX file descriptors";
        if (!d_.missing_ipc_vmm.empty()) return "the driver " + d_.library + " does not export " + d_.missing_ipc_vmm;
        if (!d_.missing_vmm.empty()) return "the driver " + d_.library + " does not export " + d_.missing_vmm;
        s->kind = kVmm;  // the mapping holds one physical handle: a reader maps all of it
        start_attr = CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, size_attr = CU_POINTER_ATTRIBUTE_MAPPING_SIZE;
    }
    if (CUresult r = d_.cuPointerGetAttribute(&s->start, start_attr, ptr); r != CUDA_SUCCESS)
        return s->native = r, "cuPointerGetAttribute of this rank's source failed with " + std::string(d_.result_name(r));
    if (CUresult r = d_.cuPointerGetAttribute(&s->size, size_attr, ptr); r != CUDA_SUCCESS)
        return s->native = r, "cuPointerGetAttribute of this rank's source failed with " + std::string(d_.result_name(r));
    int64_t lo = 0, hi = 0;
    transfer::reach(b, &lo, &hi);  // checked by the protocol: no overflow
    const uint64_t first = ptr + uint64_t(lo) * elem, end = ptr + uint64_t(hi + 1) * elem;
    if (first < s->start || end > s->start + s->size)
        return "this rank's source reaches beyond the one " + std::string(legacy ? "allocation" : "mapping") +
               " the driver shares";
    return "";
}

std::string IpcPath::why_not(const xmc_transfer_args &a, int64_t *native) {
    if (!d_.usable) return d_.why;
    if (!d_.missing_ipc.empty()) return "the driver " + d_.library + " does not export " + d_.missing_ipc;
    if (!a.source.ptr) return "";
    if (a.source.kind != XMC_MEM_DEVICE) return "path ipc shares device memory, and this rank's source is host memory";
    Share s;
    std::string why = classify(a.source, a.elem_size, &s);
    if (s.native != CUDA_SUCCESS) *native = int64_t(s.native);
    return why;
}

xmc_status IpcPath::open(const xmc_transfer_args &a, const transfer::Work &w, uint64_t call_tag, CUdevice device) {
    const xmc_group &g = *a.group;
    info_.clear();
    if (std::find(w.table.begin(), w.table.end(), XMC_PATH_IPC) == w.table.end()) {
        open_ = true;  // nothing to open
        return XMC_OK;
    }
    const int32_t my_label = g.ranks[w.me];
    bool reads = false, read_by = false;  // this rank reads from a peer; a peer reads from it
    for (int p = 0; p < g.size; ++p)
        if (on_ipc(w, p)) reads = reads || !w.in[size_t(p)].empty(), read_by = read_by || !w.out[size_t(p)].empty();

    Info mine{};
    mine.magic = kMagic;
    mine.index = w.me;
    std::string why, call;  // call: the driver call that failed, for the local error (with its code)
    CUresult native = CUDA_SUCCESS;
    if (reads) {  // before the gather: a peer sends its descriptor only after it
        socklen_t len = 0;
        const sockaddr_un name = socket_name(call_tag, my_label, &len);
        listen_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_ < 0 || bind(listen_, reinterpret_cast<const sockaddr *>(&name), len) != 0 || listen(listen_, g.size) != 0)
            why = std::string("cannot listen on a Unix socket for its peers' descriptors: ") + std::strerror(errno);
    }
    if (read_by && why.empty()) {
        Share s;
        why = classify(a.source, a.elem_size, &s);
        // The driver's failure is this rank's own (driver_error with its code), not a peer's: it
        // said peer_failed with no code (the fault sweep between processes).
        if (s.native != CUDA_SUCCESS) native = s.native, call = "cuPointerGetAttribute of its source";
        const auto ptr = reinterpret_cast<CUdeviceptr>(a.source.ptr);
        if (why.empty() && s.kind != kNone) {
            mine.kind = s.kind, mine.offset = ptr - s.start, mine.size = s.size, mine.source = a.source;
            if (s.kind == kLegacy) {
                native = d_.cuIpcGetMemHandle(&mine.handle, ptr);
                if (native != CUDA_SUCCESS) {
                    call = "cuIpcGetMemHandle of its source";
                    why = call + " failed with " + d_.result_name(native);
                }
            } else {
                CUmemGenericAllocationHandle h = 0;
                native = d_.cuMemRetainAllocationHandle(&h, a.source.ptr);
                if (native == CUDA_SUCCESS) {
                    native = d_.cuMemExportToShareableHandle(&exported_, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
                    release({Leftover::kRelease, 0, 0, h});  // the retain only; the source's owner holds the handle
                    if (native != CUDA_SUCCESS) exported_ = -1;
                }
                if (native != CUDA_SUCCESS) {
                    call = "exporting its source as a POSIX file descriptor";
                    why = call + " failed with " + d_.result_name(native);
                }
            }
        }
    }
    if (!why.empty()) {
        mine.failed = 1, mine.native = native, mine.kind = kNone;
        std::snprintf(mine.reason, sizeof mine.reason, "%s", why.c_str());
    }
    info_.assign(size_t(g.size), mine);
    const xmc_transport &tp = *g.transport;
    if (xmc_status s = transfer::transport_status(tp.all_gather(tp.ctx, &mine, info_.data(), sizeof mine, g.timeout_ms));
        s != XMC_OK)
        return be::fail(inst_, s, 0, kCall, "%s: rank %d: exchanging IPC handles over transport '%s' failed: %s", kCall,
                        my_label, tp.name ? tp.name : "?", xmc_status_string(s));
    if (mine.failed) {
        if (native != CUDA_SUCCESS) return fail(native, call);  // fail() names the driver's code
        return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d: %s", kCall, my_label, why.c_str());
    }
    for (int p = 0; p < g.size; ++p)
        if (info_[size_t(p)].magic != kMagic || info_[size_t(p)].index != p)
            return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d's IPC descriptor is not this executor's",
                            kCall, g.ranks[p]);

    // A VMM source's descriptor to each of its readers (they listen already).
    xmc_status sent = XMC_OK;
    for (int q = 0; q < g.size && mine.kind == kVmm; ++q) {
        if (!on_ipc(w, q) || w.out[size_t(q)].empty()) continue;
        socklen_t len = 0;
        const sockaddr_un name = socket_name(call_tag, g.ranks[q], &len);
        const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool ok = sock >= 0 && connect(sock, reinterpret_cast<const sockaddr *>(&name), len) == 0 &&
                        send_fd(sock, w.me, exported_);
        const int err = errno;
        if (sock >= 0) ::close(sock);
        if (!ok && sent == XMC_OK)
            sent = be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d: passing its source to rank %d failed: %s",
                            kCall, my_label, g.ranks[q], std::strerror(err));
    }
    if (exported_ >= 0) ::close(exported_), exported_ = -1;
    if (sent != XMC_OK) return sent;

    // The sources this rank reads from, opened here.
    for (int p = 0; p < g.size; ++p) {
        if (!on_ipc(w, p) || w.in[size_t(p)].empty()) continue;
        const Info &pi = info_[size_t(p)];
        if (pi.failed)
            return be::fail(inst_, XMC_ERR_PEER_FAILED, pi.native, kCall, "%s: rank %d could not share its source: %.96s",
                            kCall, g.ranks[p], pi.reason);
        if (pi.kind != kLegacy && pi.kind != kVmm)
            return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d shares no source, and this rank reads it",
                            kCall, g.ranks[p]);
    }
    std::vector<int> fds(size_t(g.size), -1);
    xmc_status s = receive_fds(w, g.timeout_ms, fds);
    for (int p = 0; p < g.size && s == XMC_OK; ++p) {
        if (!on_ipc(w, p) || w.in[size_t(p)].empty()) continue;
        const Info &pi = info_[size_t(p)];
        const std::string whose = " of rank " + to_string(g.ranks[p]) + "'s source";
        Opened o;
        o.peer = p, o.kind = Kind(pi.kind), o.size = size_t(pi.size);
        if (pi.kind == kLegacy) {
            // Access from this context to the exporter's device, where the devices allow it.
            if (CUresult r = d_.cuIpcOpenMemHandle(&o.base, pi.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS); r != CUDA_SUCCESS)
                s = fail(r, "cuIpcOpenMemHandle" + whose);
            else
                opened_.push_back(o);
            continue;
        }
        CUmemGenericAllocationHandle h = 0;
        CUresult r = d_.cuMemImportFromShareableHandle(&h, reinterpret_cast<void *>(intptr_t(fds[size_t(p)])),
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        ::close(fds[size_t(p)]), fds[size_t(p)] = -1;
        if (r != CUDA_SUCCESS) {
            s = fail(r, "cuMemImportFromShareableHandle" + whose);
            continue;
        }
        r = d_.cuMemAddressReserve(&o.base, o.size, 0, 0, 0);
        if (r == CUDA_SUCCESS) {
            const CUresult m = d_.cuMemMap(o.base, o.size, 0, h, 0);
            if (m == CUDA_SUCCESS) {
                o.kind = kVmm;
                opened_.push_back(o);  // mapped: close() unmaps and frees the range
                CUmemAccessDesc access;
                std::memset(&access, 0, sizeof access);
                access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                access.location.id = device;
                access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
                r = d_.cuMemSetAccess(o.base, o.size, &access, 1);
                if (r != CUDA_SUCCESS) s = fail(r, "cuMemSetAccess" + whose);
            } else {
                release({Leftover::kFree, o.base, o.size, 0});
                s = fail(m, "cuMemMap" + whose);
            }
        } else {
            s = fail(r, "cuMemAddressReserve for" + whose);
        }
        release({Leftover::kRelease, 0, 0, h});  // the mapping holds the memory from here on
    }
    for (int fd : fds)
        if (fd >= 0) ::close(fd);
    open_ = s == XMC_OK;
    return s;
}

// The descriptors of the VMM sources this rank reads from, one connection each, within the bound.
xmc_status IpcPath::receive_fds(const transfer::Work &w, uint32_t timeout_ms, std::vector<int> &fds) {
    size_t need = 0;
    for (int p = 0; p < int(fds.size()); ++p)
        need += on_ipc(w, p) && !w.in[size_t(p)].empty() && info_[size_t(p)].kind == kVmm ? 1 : 0;
    const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (need > 0) {
        pollfd pl{listen_, POLLIN, 0};
        if (listen_ < 0 || poll(&pl, 1, ms_left(end)) <= 0)
            return be::fail(inst_, XMC_ERR_TIMEOUT, 0, kCall,
                            "%s: %zu peer(s) did not pass their sources' descriptors within %u ms", kCall, need, timeout_ms);
        const int c = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        pollfd pc{c, POLLIN, 0};
        int32_t index = -1;
        int fd = -1;
        const bool ok = poll(&pc, 1, ms_left(end)) > 0 && recv_fd(c, &index, &fd);
        ::close(c);
        const bool expected = ok && index >= 0 && size_t(index) < fds.size() && fds[size_t(index)] < 0 &&
                              on_ipc(w, index) && !w.in[size_t(index)].empty() && info_[size_t(index)].kind == kVmm;
        if (!expected) {
            if (fd >= 0) ::close(fd);
            return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: a descriptor came from no peer this rank reads from",
                            kCall);
        }
        fds[size_t(index)] = fd;
        --need;
    }
    return XMC_OK;
}

xmc_status IpcPath::pull(const xmc_transfer_args &a, const transfer::Work &w, xmc_transfer_stats &st, const Copy &copy) {
    const xmc_group &g = *a.group;
    for (int p = 0; p < g.size && !info_.empty(); ++p) {
        if (!on_ipc(w, p)) continue;
        // AFF-ACCOUNT: a pulled segment is sent by its source rank, received by its target.
        st.bytes_sent += w.out_bytes[size_t(p)];  // the peer pulls them
        if (w.in[size_t(p)].empty()) continue;
        const auto o = std::find_if(opened_.begin(), opened_.end(), [p](const Opened &x) { return x.peer == p; });
        if (o == opened_.end())
            return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d's source is not open here", kCall, g.ranks[p]);
        const Info &pi = info_[size_t(p)];
        char *from = reinterpret_cast<char *>(o->base + pi.offset);
        for (size_t k = 0; k < w.in[size_t(p)].size(); ++k) {
            const xmc_segment &seg = a.plan.segments[w.in_segments[size_t(p)][k]];
            transfer::View sv;
            if (std::string why = transfer::place(seg, seg.src_offset, seg.src_strides, pi.source, &sv); !why.empty())
                return be::fail(inst_, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d's source: segment %s", kCall, g.ranks[p],
                                why.c_str());
            if (xmc_status s = copy(from, sv, w.in[size_t(p)][k]); s != XMC_OK) return s;
            st.chunks += 1;
        }
        st.bytes_received += w.in_bytes[size_t(p)];
    }
    return XMC_OK;
}

CUresult IpcPath::release(const Leftover &l) {
    CUresult r = CUDA_SUCCESS;
    switch (l.what) {
    case Leftover::kCloseLegacy: r = d_.cuIpcCloseMemHandle(l.base); break;
    case Leftover::kUnmap: r = d_.cuMemUnmap(l.base, l.size); break;
    case Leftover::kFree: r = d_.cuMemAddressFree(l.base, l.size); break;
    case Leftover::kRelease: r = d_.cuMemRelease(l.handle); break;
    }
    if (r != CUDA_SUCCESS) leftover_.push_back(l);
    return r;
}

xmc_status IpcPath::close(bool report) {
    xmc_status first = XMC_OK;
    static const char *const kName[] = {"cuIpcCloseMemHandle", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease"};
    // Earlier releases the driver refused first, in their order (an unmap before its free).
    std::vector<Leftover> todo;
    todo.swap(leftover_);
    for (const Opened &o : opened_) {
        if (o.kind == kLegacy) {
            todo.push_back({Leftover::kCloseLegacy, o.base, 0, 0});
        } else {
            todo.push_back({Leftover::kUnmap, o.base, o.size, 0});
            todo.push_back({Leftover::kFree, o.base, o.size, 0});
        }
    }
    for (const Leftover &l : todo)
        if (const CUresult r = release(l); r != CUDA_SUCCESS && first == XMC_OK)
            first = report ? fail(r, std::string(kName[l.what]) + " of a peer's source") : status_of(r);
    opened_.clear();
    info_.clear();
    open_ = false;
    if (listen_ >= 0) ::close(listen_), listen_ = -1;
    if (exported_ >= 0) ::close(exported_), exported_ = -1;
    return first;
}

}  // namespace xmc::cuda
