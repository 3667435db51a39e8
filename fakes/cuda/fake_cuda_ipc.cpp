// Sharing device memory with another process (SPEC 7: multi-process transfers over IPC run in
// CI): legacy IPC handles of cuMemAlloc memory, and POSIX file descriptors of VMM handles.
//
//   cuIpcGetMemHandle    the allocation moves onto a memfd (its contents copied, the same address
//                        mapped MAP_SHARED over it) on its first export; the handle names this
//                        process, the memfd's descriptor and the export's id
//   cuIpcOpenMemHandle   opens /proc/<exporter>/fd/<fd>, checks it is that export's memfd (its
//                        name holds the pid and the id), maps it in this process: device memory
//                        of the current context until the last cuIpcCloseMemHandle
//   cuIpcCloseMemHandle  counts one close; the last unmaps (the range stays freed device memory)
//   cuMemExportToShareableHandle   a new descriptor of the handle's memfd (the caller closes it)
//   cuMemImportFromShareableHandle a handle of this process over a descriptor of such a memfd
//   cuMemRetainAllocationHandle    the handle behind a mapped VMM address, held once more
//
// Answers, as recorded on the H200 (hardware/probe/cuda_driver_580_h200_ipc.tsv):
//   get of cuMemAlloc memory, its base or inside it        CUDA_SUCCESS (the allocation's handle)
//   get of VMM memory, host memory, freed memory, NULL out CUDA_ERROR_INVALID_VALUE
//   open in the exporting process                          CUDA_ERROR_INVALID_CONTEXT
//   open of garbage bytes in another process               CUDA_ERROR_INVALID_VALUE
//   close of a pointer never opened, or closed already     CUDA_ERROR_INVALID_VALUE
//   export (POSIX fd) of a handle created without that type CUDA_ERROR_INVALID_VALUE
//   import of the exporter's fd, here or in another process CUDA_SUCCESS
//   import of a closed fd or of an fd of /dev/null         CUDA_ERROR_UNKNOWN
// Deliberately different: export of a released handle crashes the real driver (SIGSEGV); the
// fake answers CUDA_ERROR_INVALID_VALUE. Not recorded (chosen, after the driver's documentation):
// opening a handle already open here gives the same pointer and counts the open; a handle whose
// memory was freed, or whose exporter exited, is CUDA_ERROR_INVALID_VALUE; flags other than 0 and
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS are CUDA_ERROR_INVALID_VALUE; handle types other than the
// POSIX fd are CUDA_ERROR_NOT_SUPPORTED. Freeing exported memory (cuMemFree) takes its contents
// from the processes that opened it too: fake_cuda_memory.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "fake_cuda_internal.h"

namespace xmc_fake {

namespace {

// What a CUipcMemHandle carries (64 bytes).
struct IpcWire {
    char magic[8];     // kMagic
    int32_t pid;       // the exporter
    int32_t fd;        // its descriptor of the memfd
    uint64_t id;       // the export (unique in the exporter)
    uint64_t size;     // bytes mapped
    int32_t physical;  // the exporter's physical device
    char pad[28];
};
static_assert(sizeof(IpcWire) == CU_IPC_HANDLE_SIZE, "a CUipcMemHandle is 64 bytes");
constexpr char kMagic[8] = {'x', 'm', 'c', 'i', 'p', 'c', '1', '\0'};

std::string export_name(int32_t pid, uint64_t id) {
    return "xmc_fake_cuda_ipc." + std::to_string(pid) + "." + std::to_string(id);
}

// The target of a /proc/.../fd/N link ("" when there is none).
std::string fd_target(const std::string& link) {
    char buf[512];
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// True when the link names the memfd `name` ("/memfd:NAME (deleted)").
bool is_memfd(const std::string& target, const std::string& name) {
    const std::string want = "/memfd:" + name;
    return target.compare(0, want.size(), want) == 0 &&
           (target.size() == want.size() || target[want.size()] == ' ');
}

// Moves an allocation onto a memfd that other processes can map: its bytes copied, the same
// address mapped shared over the new file. Lock held (no copy runs meanwhile).
CUresult make_shareable_locked(Allocation& a) {
    if (a.share_fd >= 0) return CUDA_SUCCESS;
    const uint64_t id = new_handle_locked();
    int fd = memfd_create(export_name(getpid(), id).c_str(), MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, static_cast<off_t>(a.mapped)) != 0 ||
        pwrite(fd, reinterpret_cast<const void*>(a.base), a.mapped, 0) != static_cast<ssize_t>(a.mapped)) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void* p = mmap(reinterpret_cast<void*>(a.base), a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {  // the old mapping is still there
        ::close(fd);
        return CUDA_ERROR_MAP_FAILED;
    }
    a.share_fd = fd;
    a.share_id = id;
    return CUDA_SUCCESS;
}

int ordinal_of_physical_locked(int physical, int fallback) {
    State& g = state();
    for (size_t i = 0; i < g.devices.size(); ++i)
        if (g.devices[i].physical == physical) return static_cast<int>(i);
    return fallback;
}

}  // namespace

IpcOpened* find_ipc_opened_locked(uintptr_t addr) {
    State& g = state();
    auto it = g.ipc_opened.upper_bound(addr);
    if (it == g.ipc_opened.begin()) return nullptr;
    --it;
    return addr < it->first + it->second.size ? &it->second : nullptr;
}

void ipc_free_all_locked() {
    State& g = state();
    for (auto& [b, o] : g.ipc_opened) ::munmap(reinterpret_cast<void*>(b), o.size);
    g.ipc_opened.clear();
}

}  // namespace xmc_fake

using namespace xmc_fake;

// ---- legacy IPC handles -------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
    FAKE_ENTER("cuIpcGetMemHandle");
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    // Recorded: any address inside a cuMemAlloc allocation gives the allocation's handle.
    auto it = g.allocations.upper_bound(dptr);
    if (it == g.allocations.begin() || dptr >= std::prev(it)->first + std::prev(it)->second.size)
        return CUDA_ERROR_INVALID_VALUE;
    Allocation& a = std::prev(it)->second;
    if (CUresult r = make_shareable_locked(a); r != CUDA_SUCCESS) return r;
    IpcWire w;
    std::memset(&w, 0, sizeof w);
    std::memcpy(w.magic, kMagic, sizeof w.magic);
    w.pid = getpid();
    w.fd = a.share_fd;
    w.id = a.share_id;
    w.size = a.mapped;
    w.physical = g.devices[static_cast<size_t>(a.ordinal)].physical;
    std::memcpy(handle->reserved, &w, sizeof w);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
    FAKE_ENTER("cuIpcOpenMemHandle_v2");
    if (pdptr == nullptr || (flags & ~unsigned(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    IpcWire w;
    std::memcpy(&w, handle.reserved, sizeof w);
    if (std::memcmp(w.magic, kMagic, sizeof kMagic) != 0 || w.pid <= 0 || w.fd < 0 || w.size == 0)
        return CUDA_ERROR_INVALID_VALUE;  // recorded: garbage bytes
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // recorded: the exporter itself
    for (auto& [b, o] : g.ipc_opened)
        if (o.pid == w.pid && o.id == w.id) {  // open already: the same pointer, counted
            ++o.refs;
            *pdptr = b;
            return CUDA_SUCCESS;
        }
    // The exporter's memfd, if that export is still alive there.
    const std::string link = "/proc/" + std::to_string(w.pid) + "/fd/" + std::to_string(w.fd);
    if (!is_memfd(fd_target(link), export_name(w.pid, w.id))) return CUDA_ERROR_INVALID_VALUE;
    int fd = ::open(link.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < w.size) {
        ::close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    void* p = mmap(nullptr, w.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
    IpcOpened o;
    o.base = reinterpret_cast<uintptr_t>(p);
    o.size = w.size;
    o.ctx = c->handle;
    o.ordinal = ordinal_of_physical_locked(w.physical, c->ordinal);
    o.pid = w.pid;
    o.id = w.id;
    o.buffer_id = new_handle_locked();
    g.ipc_opened[o.base] = o;
    *pdptr = o.base;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    FAKE_ENTER("cuIpcCloseMemHandle");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.ipc_opened.find(dptr);
    if (it == g.ipc_opened.end()) return CUDA_ERROR_INVALID_VALUE;  // recorded: never opened, closed twice
    if (--it->second.refs > 0) return CUDA_SUCCESS;
    const IpcOpened o = it->second;
    g.ipc_opened.erase(it);
    retire_range_locked(o.base, o.size);
    return CUDA_SUCCESS;
}

// ---- shareable handles of VMM memory (POSIX file descriptors) ------------------------------

XMC_FAKE_EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                      CUmemAllocationHandleType type, unsigned long long flags) {
    FAKE_ENTER("cuMemExportToShareableHandle");
    if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto h = g.handles.find(handle);
    if (h == g.handles.end() || h->second.released) return CUDA_ERROR_INVALID_VALUE;
    if (!h->second.shareable) return CUDA_ERROR_INVALID_VALUE;  // recorded: created without the type
    const int fd = fcntl(h->second.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *static_cast<int*>(shareable) = fd;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                                        CUmemAllocationHandleType type) {
    FAKE_ENTER("cuMemImportFromShareableHandle");
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    const int given = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
    // Recorded: a closed fd, or one of anything but such memory, is CUDA_ERROR_UNKNOWN.
    const std::string target = fd_target("/proc/self/fd/" + std::to_string(given));
    const std::string prefix = "/memfd:xmc_fake_cuda_vmm.";
    if (target.compare(0, prefix.size(), prefix) != 0) return CUDA_ERROR_UNKNOWN;
    const int physical = std::atoi(target.c_str() + prefix.size());
    struct stat st {};
    if (fstat(given, &st) != 0 || st.st_size <= 0) return CUDA_ERROR_UNKNOWN;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    const int fd = fcntl(given, F_DUPFD_CLOEXEC, 0);  // the handle's own: the caller may close theirs
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    PhysHandle h;
    h.handle = new_handle_locked();
    h.ordinal = ordinal_of_physical_locked(physical, 0);
    h.size = static_cast<size_t>(st.st_size);
    h.fd = fd;
    h.shareable = true;
    h.imported = true;
    g.handles[h.handle] = h;
    *handle = h.handle;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
    FAKE_ENTER("cuMemRetainAllocationHandle");
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    const auto a = reinterpret_cast<uintptr_t>(addr);
    auto m = g.mappings.upper_bound(a);
    if (m == g.mappings.begin() || a >= std::prev(m)->first + std::prev(m)->second.size)
        return CUDA_ERROR_INVALID_VALUE;  // not VMM memory
    auto h = g.handles.find(std::prev(m)->second.handle);
    if (h == g.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    if (h->second.released) {  // released while mapped: the program holds it again
        h->second.released = false;
        h->second.refs = 0;
        g.released.erase(h->first);
    }
    ++h->second.refs;
    *handle = h->first;
    return CUDA_SUCCESS;
}
