// Cases: sharing device memory with another process. Legacy IPC handles
// (cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle) of what the
// backends allocate (cuMemAlloc memory, VMM memory, host memory), opened in
// the same process, garbage, closed twice; and VMM shareable handles
// (cuMemExportToShareableHandle / cuMemImportFromShareableHandle with POSIX
// file descriptors), with and without the requested handle type, of a
// released handle, of a closed or foreign fd. The cross-process cases fork a
// peer before either process initialises the driver (Setup::none), pass the
// handle (or the fd, SCM_RIGHTS) over a socket, and read the peer's answers
// back.
//
// The fake answers them too (fakes/cuda/fake_cuda_ipc.cpp), replayed by the PR
// test cuda_probe_replay_fake_ipc.
#include "probe_support.h"

#include <fcntl.h>

namespace xmc::probe {
namespace {

void need_ipc(P& p) {
    NEED(cuIpcGetMemHandle);
    NEED(cuIpcOpenMemHandle);
    NEED(cuIpcCloseMemHandle);
}
void need_shareable(P& p) {
    NEED(cuMemExportToShareableHandle);
    NEED(cuMemImportFromShareableHandle);
}

// -- legacy IPC handles in this process
Outcome c_ipc_get(P& p, int which) {
    need_ipc(p);
    Cleanup cl;
    CUipcMemHandle h;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    switch (which) {
        case 0: return res(p, p.d.cuIpcGetMemHandle(&h, a), "cuMemAlloc memory, its base");
        case 1: return res(p, p.d.cuIpcGetMemHandle(&h, a + 4096), "cuMemAlloc memory, base + 4096");
        case 2: {
            CUdeviceptr va = mapped_range(p, cl, granularity(p));
            return res(p, p.d.cuIpcGetMemHandle(&h, va), "a mapped VMM range (cuMemCreate)");
        }
        case 3: {
            char* b = host_pages(cl, 4);
            return res(p, p.d.cuIpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(b)), "unregistered host memory");
        }
        case 4: {
            CUdeviceptr gone = 0;
            TRY(p.d.cuMemAlloc(&gone, 1 << 20));
            TRY(p.d.cuMemFree(gone));
            return res(p, p.d.cuIpcGetMemHandle(&h, gone), "freed cuMemAlloc memory");
        }
        default: return res(p, p.d.cuIpcGetMemHandle(nullptr, a), "NULL result");
    }
}

Outcome c_ipc_open_same_process(P& p) {
    need_ipc(p);
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    CUipcMemHandle h;
    TRY(p.d.cuIpcGetMemHandle(&h, a));
    CUdeviceptr d = 0;
    CUresult r = p.d.cuIpcOpenMemHandle(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r == CUDA_SUCCESS) p.d.cuIpcCloseMemHandle(d);
    return res(p, r, "a handle of this process's own cuMemAlloc memory");
}
Outcome c_ipc_close_not_opened(P& p) {
    need_ipc(p);
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    return res(p, p.d.cuIpcCloseMemHandle(a), "a cuMemAlloc pointer never opened by IPC");
}

// -- legacy IPC with a second process: the exporter allocates 1 MiB, fills it
// with 0x5a and sends the handle; the peer opens it, reads 64 bytes, closes
// it twice, then opens a handle of garbage bytes.
struct IpcReply {
    int32_t open = -1, reads = 0, close = -1, close_again = -1, garbage = -1;
};

void ipc_peer(P& q, const Peer::Link& link) {
    Cleanup cl;
    own_context(q, cl);
    CUipcMemHandle h;
    if (!link.recv(&h, sizeof h)) return;
    IpcReply rep;
    CUdeviceptr d = 0;
    rep.open = q.d.cuIpcOpenMemHandle(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (rep.open == CUDA_SUCCESS) {
        unsigned char buf[64] = {0};
        bool ok = q.d.cuMemcpyDtoH(buf, d, sizeof buf) == CUDA_SUCCESS;
        for (unsigned char c : buf) ok = ok && c == 0x5a;
        rep.reads = ok ? 1 : 0;
        rep.close = q.d.cuIpcCloseMemHandle(d);
        rep.close_again = q.d.cuIpcCloseMemHandle(d);
    }
    CUipcMemHandle junk;
    std::memset(&junk, 0xa5, sizeof junk);
    CUdeviceptr d2 = 0;
    rep.garbage = q.d.cuIpcOpenMemHandle(&d2, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (rep.garbage == CUDA_SUCCESS) q.d.cuIpcCloseMemHandle(d2);
    link.send(&rep, sizeof rep);
}

Outcome c_ipc_other_process(P& p, int which) {
    need_ipc(p);
    Peer peer(p, ipc_peer);  // before this process's cuInit
    Cleanup cl;
    own_context(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    std::vector<unsigned char> fill(1 << 20, 0x5a);
    TRY(p.d.cuMemcpyHtoD(a, fill.data(), fill.size()));
    CUipcMemHandle h;
    TRY(p.d.cuIpcGetMemHandle(&h, a));
    IpcReply rep;
    if (!peer.link().send(&h, sizeof h) || !peer.link().recv(&rep, sizeof rep, nullptr, 8000))
        throw SetupFailed{CUDA_ERROR_UNKNOWN, "no reply from the peer process"};
    std::string note = "peer: open " + result_name(p.d, static_cast<CUresult>(rep.open)) + ", read " +
                       (rep.reads ? "the data" : "not the data") + ", close " +
                       result_name(p.d, static_cast<CUresult>(rep.close)) + ", close again " +
                       result_name(p.d, static_cast<CUresult>(rep.close_again)) + ", open garbage " +
                       result_name(p.d, static_cast<CUresult>(rep.garbage));
    switch (which) {
        case 0: return res(p, static_cast<CUresult>(rep.open), note);
        case 1:
            if (rep.open != CUDA_SUCCESS) return word("skipped", 0, note);
            return yes_no(rep.reads == 1, note);
        case 2:
            if (rep.open != CUDA_SUCCESS) return word("skipped", 0, note);
            return res(p, static_cast<CUresult>(rep.close_again), note);
        default: return res(p, static_cast<CUresult>(rep.garbage), note);
    }
}

// -- VMM shareable handles (POSIX file descriptors) in this process
Outcome c_shareable(P& p, int which) {
    need_shareable(p);
    Cleanup cl;
    size_t g = granularity(p);
    int fd = -1;
    auto export_fd = [&](CUmemGenericAllocationHandle h) {
        CUresult r = p.d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r == CUDA_SUCCESS) {
            int f = fd;
            cl.add([f] { close(f); });
        }
        return r;
    };
    CUmemGenericAllocationHandle imported = 0;
    auto import_fd = [&](int f) {
        CUresult r = p.d.cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(f)),
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r == CUDA_SUCCESS) p.d.cuMemRelease(imported);
        return r;
    };
    switch (which) {
        case 0: return res(p, export_fd(create(p, cl, g)), "a handle created without requested handle types");
        case 1:
            return res(p, export_fd(create(p, cl, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)),
                       "a handle created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
        case 2: {
            CUmemAllocationProp prop = vmm_prop(p.dev[0]);
            prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
            CUmemGenericAllocationHandle h = 0;
            TRY(p.d.cuMemCreate(&h, g, &prop, 0));
            TRY(p.d.cuMemRelease(h));
            return res(p, export_fd(h), "a released handle: may crash a real driver");
        }
        case 3: {
            TRY(export_fd(create(p, cl, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)));
            return res(p, import_fd(fd), "the fd exported by this process");
        }
        case 4: {
            TRY(p.d.cuMemExportToShareableHandle(&fd, create(p, cl, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
            close(fd);
            return res(p, import_fd(fd), "an exported fd, closed before the import");
        }
        default: {
            int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (f < 0) throw SetupFailed{CUDA_ERROR_OPERATING_SYSTEM, "open /dev/null"};
            cl.add([f] { close(f); });
            return res(p, import_fd(f), "an fd of /dev/null");
        }
    }
}

// -- a shareable fd in a second process: the exporter maps its handle, fills
// it with 0x6b and sends the fd; the peer imports, maps and reads 64 bytes.
struct FdReply {
    int32_t import = -1, reads = 0;
};

void fd_peer(P& q, const Peer::Link& link) {
    Cleanup cl;
    own_context(q, cl);
    char dummy = 0;
    int fd = -1;
    if (!link.recv(&dummy, 1, &fd) || fd < 0) return;
    FdReply rep;
    CUmemGenericAllocationHandle h = 0;
    rep.import = q.d.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (rep.import == CUDA_SUCCESS) {
        size_t g = granularity(q);
        CUdeviceptr va = 0;
        if (q.d.cuMemAddressReserve(&va, g, 0, 0, 0) == CUDA_SUCCESS) {
            if (q.d.cuMemMap(va, g, 0, h, 0) == CUDA_SUCCESS) {
                CUmemAccessDesc a = access_desc(q.dev[0], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
                unsigned char buf[64] = {0};
                bool ok = q.d.cuMemSetAccess(va, g, &a, 1) == CUDA_SUCCESS &&
                          q.d.cuMemcpyDtoH(buf, va, sizeof buf) == CUDA_SUCCESS;
                for (unsigned char c : buf) ok = ok && c == 0x6b;
                rep.reads = ok ? 1 : 0;
                q.d.cuMemUnmap(va, g);
            }
            q.d.cuMemAddressFree(va, g);
        }
        q.d.cuMemRelease(h);
    }
    link.send(&rep, sizeof rep);
}

Outcome c_fd_other_process(P& p, int which) {
    need_shareable(p);
    Peer peer(p, fd_peer);  // before this process's cuInit
    Cleanup cl;
    own_context(p, cl);
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    map(p, cl, va, g, h);
    grant(p, va, g);
    std::vector<unsigned char> fill(4096, 0x6b);
    TRY(p.d.cuMemcpyHtoD(va, fill.data(), fill.size()));
    int fd = -1;
    TRY(p.d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    char dummy = 1;
    bool sent = peer.link().send(&dummy, 1, fd);
    close(fd);
    FdReply rep;
    if (!sent || !peer.link().recv(&rep, sizeof rep, nullptr, 8000))
        throw SetupFailed{CUDA_ERROR_UNKNOWN, "no reply from the peer process"};
    std::string note = "peer: import " + result_name(p.d, static_cast<CUresult>(rep.import)) + ", map and read " +
                       (rep.reads ? "the data" : "not the data");
    if (which == 0) return res(p, static_cast<CUresult>(rep.import), note);
    if (rep.import != CUDA_SUCCESS) return word("skipped", 0, note);
    return yes_no(rep.reads == 1, note);
}

}  // namespace

std::vector<Case> ipc_cases() {
    return {
        {"ipc_get_mem_handle_mem_alloc", Setup::ctx, with<c_ipc_get, 0>,
         "cuIpcGetMemHandle of cuMemAlloc memory", nullptr},
        {"ipc_get_mem_handle_interior", Setup::ctx, with<c_ipc_get, 1>,
         "cuIpcGetMemHandle of an interior pointer", nullptr},
        {"ipc_get_mem_handle_vmm", Setup::ctx, with<c_ipc_get, 2>, "cuIpcGetMemHandle of VMM memory",
         nullptr},
        {"ipc_get_mem_handle_host_pointer", Setup::ctx, with<c_ipc_get, 3>,
         "cuIpcGetMemHandle of a host pointer", nullptr},
        {"ipc_get_mem_handle_freed", Setup::ctx, with<c_ipc_get, 4>,
         "cuIpcGetMemHandle of freed device memory", nullptr},
        {"ipc_get_mem_handle_null_out", Setup::ctx, with<c_ipc_get, 5>,
         "cuIpcGetMemHandle with a NULL result", nullptr},
        {"ipc_open_same_process", Setup::ctx, c_ipc_open_same_process,
         "cuIpcOpenMemHandle of a handle exported by the same process", nullptr},
        {"ipc_close_not_opened", Setup::ctx, c_ipc_close_not_opened,
         "cuIpcCloseMemHandle of memory never opened by IPC", nullptr},
        {"ipc_open_other_process", Setup::none, with<c_ipc_other_process, 0>,
         "cuIpcOpenMemHandle in a second process", nullptr, true},
        {"ipc_open_other_process_reads", Setup::none, with<c_ipc_other_process, 1>,
         "does the second process read the exporter's data", nullptr, true},
        {"ipc_close_twice_other_process", Setup::none, with<c_ipc_other_process, 2>,
         "cuIpcCloseMemHandle twice in the second process", nullptr, true},
        {"ipc_open_garbage_other_process", Setup::none, with<c_ipc_other_process, 3>,
         "cuIpcOpenMemHandle of garbage bytes in a second process", nullptr, true},
        {"vmm_export_fd_without_requested_type", Setup::ctx, with<c_shareable, 0>,
         "cuMemExportToShareableHandle(POSIX fd) of a handle created without that type", nullptr},
        {"vmm_export_fd_with_requested_type", Setup::ctx, with<c_shareable, 1>,
         "cuMemExportToShareableHandle(POSIX fd) of a handle created with it", nullptr},
        {"vmm_export_released_handle", Setup::ctx, with<c_shareable, 2>,
         "cuMemExportToShareableHandle of a released handle", kRefusedNotCrashed},
        {"vmm_import_fd_same_process", Setup::ctx, with<c_shareable, 3>,
         "cuMemImportFromShareableHandle of an fd exported by the same process", nullptr},
        {"vmm_import_closed_fd", Setup::ctx, with<c_shareable, 4>,
         "cuMemImportFromShareableHandle of a closed fd", nullptr},
        {"vmm_import_foreign_fd", Setup::ctx, with<c_shareable, 5>,
         "cuMemImportFromShareableHandle of an fd of /dev/null", nullptr},
        {"vmm_import_fd_other_process", Setup::none, with<c_fd_other_process, 0>,
         "cuMemImportFromShareableHandle in a second process", nullptr, true},
        {"vmm_import_fd_other_process_reads", Setup::none, with<c_fd_other_process, 1>,
         "does the second process map and read the exporter's data", nullptr, true},
    };
}

}  // namespace xmc::probe
