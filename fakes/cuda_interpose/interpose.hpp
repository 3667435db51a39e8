// The interposer's shared parts (interpose.cpp: the forwarders and their entry guard;
// control.cpp: the ledger's listing and the control API of fake_cuda_control.h): the list of
// entry points, their ids and the state behind the one lock.
#pragma once

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda.hpp"  // reference/cuda: XMC_CU_* (the backend's entry points), nothing else is used
#include "fake_cuda_control.h"
#include "fault_script.hpp"

// Every group the backend resolves. tests: cuda_interpose.covers_every_group (covers.sh) checks that no
// XMC_CU_* group of cuda.hpp is missing here.
// Besides them, what xmc_gpu_bench resolves for its raw peaks (hardware/gpu_bench.hpp), so that
// `xmc bench` runs through the interposer too and its overhead is measured there (issue 28), and
// what the conformance harness asks the driver itself (PIN-KINDS's lock state).
// tests: cuda_interpose.covers_entries (covers.sh) checks that every entry point they load is here.
#define XMC_IP_BENCH(X)                                                                                      \
    X(cuDriverGetVersion) X(cuCtxSetCurrent) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyDtoHAsync)     \
    X(cuMemcpyDtoDAsync) X(cuEventElapsedTime)
#define XMC_IP_HARNESS(X) X(cuMemHostGetFlags)
#define XMC_IP_ALL(X)                                                                                         \
    XMC_CU_CORE(X) XMC_CU_REGISTER(X) XMC_CU_STREAM(X) XMC_CU_COPY(X) XMC_CU_VMM(X) XMC_CU_TRANSFER(X)    \
    XMC_CU_IPC(X) XMC_CU_IPC_VMM(X) XMC_CU_GRAPH(X) XMC_CU_OPTIONAL(X) XMC_IP_BENCH(X) XMC_IP_HARNESS(X)

#define XMC_IP_STR2(x) #x
#define XMC_IP_STR(x) XMC_IP_STR2(x)  // expands cuda.h's version macro first: "cuMemAlloc_v2"
namespace xmc_ip {

// id_<cuda.h name>: the index of each entry point.
enum Id : int {
#define XMC_IP_ID(name) id_##name,
    XMC_IP_ALL(XMC_IP_ID)
#undef XMC_IP_ID
    kEntries
};

inline const char* const kSymbols[kEntries] = {
#define XMC_IP_SYM(name) XMC_IP_STR(name),
    XMC_IP_ALL(XMC_IP_SYM)
#undef XMC_IP_SYM
};

// ---- state ----------------------------------------------------------------------------------

struct Reg {
    size_t size = 0;
    unsigned flags = 0;
    int dev = -1;
    CUcontext ctx = nullptr;
    uint64_t offset = 0;  // nonidentity: the device address the queries report is base + offset
};
struct Alloc {
    size_t size = 0;
    int dev = -1;
    CUcontext ctx = nullptr;
};
struct Handle {
    size_t size = 0;  // 0: imported (its size is the exporter's)
    int dev = -1;
    int refs = 1;       // cuMemRetainAllocationHandle holds it once more
    int map_count = 0;
    bool released = false;  // released while mapped: gone for the program, freed with its last mapping
};
struct Mapping {
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    size_t offset = 0;
};
struct InCtx {
    CUcontext ctx = nullptr;
    int dev = -1;
};
struct Primary {
    CUcontext ctx = nullptr;
    int refs = 0;
};

struct State {
    std::mutex mu;
    // Set up when this library loads; a non-empty error makes every entry point answer
    // error_code (the fake answers a malformed configuration the same way, at cuInit).
    std::string real_path;
    void* real_lib = nullptr;
    void* real[kEntries] = {};
    CUresult (*ctx_get_current)(CUcontext*) = nullptr;  // the interposer's own questions
    CUresult (*ctx_get_device)(CUdevice*) = nullptr;
    std::string init_error;
    CUresult error_code = CUDA_SUCCESS;
    bool script_error = false;  // the error is XMC_FAKE_CUDA_FAULTS's (a reset re-reads it)
    std::string last_error;
    bool trace = false;
    // The fake's configuration where the driver beneath is real (over the fake, the fake reads it):
    // the hidings the conformance harness asks for (absent_platform.cpp), emulated.
    bool no_devices = false;      // XMC_FAKE_CUDA_DEVICES=0: cuInit answers CUDA_ERROR_NO_DEVICE
    bool hide_register = false;   // XMC_FAKE_CUDA_ATTRS=host_register_supported=0
    bool hide_vmm = false;        // XMC_FAKE_CUDA_ATTRS=virtual_memory_management_supported=0

    std::vector<xmc_faults::Rule> rules;
    // No rule, no trace, no load error: a call takes no lock unless the ledger has something to
    // note (see enter()). Set under mu wherever one of the three changes (requiet_locked).
    std::atomic<bool> quiet{true};
    std::atomic<uint64_t> calls[kEntries] = {};
    // The call records, claimed without the lock: cursor is (generation << 32) | calls since the
    // reset of the records; a slot's stamp is 2*generation+1 while its record is being written and
    // 2*generation+2 once it is whole (record_call, read_records).
    struct Slot {
        xmc_fake_cuda_call_record rec;
        std::atomic<uint64_t> stamp{0};
    };
    std::unique_ptr<Slot[]> slots{new Slot[XMC_FAKE_CUDA_CALL_RECORDS]};
    std::atomic<uint64_t> cursor{0};

    std::map<uintptr_t, Reg> regs;
    std::map<CUdeviceptr, Alloc> allocs;
    std::map<CUdeviceptr, size_t> reservations;
    std::map<CUmemGenericAllocationHandle, Handle> handles;
    std::set<CUmemGenericAllocationHandle> gone_handles;  // released and freed (VMM-DOUBLE)
    std::map<CUdeviceptr, Mapping> mappings;
    std::set<CUdeviceptr> unmapped;  // addresses of mappings unmapped since, nothing mapped there again
    std::map<CUdeviceptr, int> ipc_opened;
    std::map<CUdevice, Primary> primaries;
    std::map<CUstream, InCtx> streams;
    std::map<CUevent, InCtx> events;
    std::map<CUgraph, InCtx> graphs;
    std::map<CUgraphExec, InCtx> execs;
    size_t reclaimed = 0;
    size_t second_releases = 0;

    // XMC_CUDA_INTERPOSE_ANSWERS: every answer other than success the driver beneath gave (not one
    // the script injected), once per (test, entry point, code), so that a recording on the real
    // driver can be set beside one over the fake (hardware/compare_answers.sh, issue 28).
    FILE* answers = nullptr;
    std::string mark;  // the running test (xmc_cuda_interpose_mark)
    std::set<std::string> answered;

    // cuLaunchHostFunc's wrapped callbacks, kept for good: a captured one runs at every launch.
    std::map<std::pair<CUhostFn, void*>, std::pair<CUhostFn, void*>*> cookies;
};

inline State& state() {
    static State* g = new State;  // never destroyed: driver threads may still call in at exit
    return *g;
}

const char* result_name(CUresult r);
std::string_view base_name(std::string_view name);  // strips "_v<digits>"
const xmc_faults::Dialect& dialect();
void requiet_locked(State& g);
size_t read_records(State& g, xmc_fake_cuda_call_record* out, size_t n);
void reset_records_locked(State& g);
bool load_faults_locked(State& g);

}  // namespace xmc_ip
