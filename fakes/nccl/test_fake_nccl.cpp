// Tests of the fake NCCL. The library is loaded the way the xmc CUDA backend loads NCCL: dlopen by
// path (XMC_FAKE_NCCL_PATH) and dlsym of nccl.h's names. Ranks are threads of this process, or a
// forked child; every test ends with the ledger of live communicators empty.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <cuda.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fake_nccl_control.h"

namespace {

#define ENTRIES(X)                                                                                    \
    X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank)                    \
    X(ncclCommInitRankConfig) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommGetAsyncError) X(ncclSend) \
    X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)

struct Api {
#define MEMBER(name) decltype(&::name) name = nullptr;
    ENTRIES(MEMBER)
#undef MEMBER
    decltype(&xmc_fake_nccl_set_faults) set_faults = nullptr;
    decltype(&xmc_fake_nccl_last_error) last_error = nullptr;
    decltype(&xmc_fake_nccl_live_comms) live_comms = nullptr;
    decltype(&xmc_fake_nccl_calls) calls = nullptr;
};

const Api &api() {
    static const Api a = [] {
        Api a;
        void *lib = dlopen(XMC_FAKE_NCCL_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!lib) return a;
#define RESOLVE(name) a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name));
        ENTRIES(RESOLVE)
#undef RESOLVE
        a.set_faults = reinterpret_cast<decltype(a.set_faults)>(dlsym(lib, "xmc_fake_nccl_set_faults"));
        a.last_error = reinterpret_cast<decltype(a.last_error)>(dlsym(lib, "xmc_fake_nccl_last_error"));
        a.live_comms = reinterpret_cast<decltype(a.live_comms)>(dlsym(lib, "xmc_fake_nccl_live_comms"));
        a.calls = reinterpret_cast<decltype(a.calls)>(dlsym(lib, "xmc_fake_nccl_calls"));
        return a;
    }();
    return a;
}

class FakeNccl : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(api().ncclSend, nullptr) << dlerror();
        ASSERT_EQ(api().set_faults(nullptr), 0);
    }
    void TearDown() override {
        api().set_faults(nullptr);
        EXPECT_EQ(api().live_comms(), 0u) << "communicators left in the ledger";
    }
};

// Waits for a non-blocking communicator's work: its final answer, or ncclInProgress after `ms`.
ncclResult_t settle(ncclComm_t c, int ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    ncclResult_t r = ncclInProgress;
    while (std::chrono::steady_clock::now() < end) {
        if (api().ncclCommGetAsyncError(c, &r) != ncclSuccess) return ncclInternalError;
        if (r != ncclInProgress) return r;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return r;
}

ncclComm_t make(int n, const ncclUniqueId &id, int rank, bool blocking) {
    ncclComm_t c = nullptr;
    if (blocking) {
        EXPECT_EQ(api().ncclCommInitRank(&c, n, id, rank), ncclSuccess);
    } else {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        EXPECT_EQ(api().ncclCommInitRankConfig(&c, n, id, rank, &cfg), ncclInProgress);
        EXPECT_EQ(settle(c), ncclSuccess);
    }
    return c;
}

// n ranks on n threads, each running body(rank, comm).
void on_ranks(int n, bool blocking, const std::function<void(int, ncclComm_t)> &body) {
    ncclUniqueId id;
    ASSERT_EQ(api().ncclGetUniqueId(&id), ncclSuccess);
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r) t.emplace_back([&, r] { body(r, make(n, id, r, blocking)); });
    for (auto &x : t) x.join();
}

TEST_F(FakeNccl, VersionAndErrorStrings) {
    int v = 0;
    EXPECT_EQ(api().ncclGetVersion(&v), ncclSuccess);
    EXPECT_EQ(v, NCCL_VERSION_CODE);
    EXPECT_EQ(api().ncclGetVersion(nullptr), ncclInvalidArgument);
    EXPECT_STRNE(api().ncclGetErrorString(ncclRemoteError), "");
}

TEST_F(FakeNccl, GroupedSendAndReceiveBetweenEveryPair) {
    for (bool blocking : {true, false}) {
        const int n = 4;
        const size_t bytes = 3 << 20;  // beyond any socket buffer: progress in both directions
        on_ranks(n, blocking, [&](int me, ncclComm_t c) {
            std::vector<std::vector<char>> out(n, std::vector<char>(bytes)), in(n, std::vector<char>(bytes, 0));
            for (int p = 0; p < n; ++p)
                for (size_t i = 0; i < bytes; ++i) out[size_t(p)][i] = char(me * 31 + p * 7 + int(i % 251));
            ASSERT_EQ(api().ncclGroupStart(), ncclSuccess);
            for (int p = 0; p < n; ++p) {
                EXPECT_EQ(api().ncclSend(out[size_t(p)].data(), bytes, ncclUint8, p, c, nullptr), ncclSuccess);
                EXPECT_EQ(api().ncclRecv(in[size_t(p)].data(), bytes, ncclUint8, p, c, nullptr), ncclSuccess);
            }
            const ncclResult_t g = api().ncclGroupEnd();
            EXPECT_EQ(g, blocking ? ncclSuccess : ncclInProgress);
            if (!blocking) {
                EXPECT_EQ(settle(c), ncclSuccess);
            }
            for (int p = 0; p < n; ++p)
                for (size_t i = 0; i < bytes; i += 4093)
                    ASSERT_EQ(in[size_t(p)][i], char(p * 31 + me * 7 + int(i % 251))) << "from " << p << " at " << i;
            EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
        });
    }
}

// As on NCCL: a send completes only once the peer posted its receive, so two ranks that each send
// first, outside a group, wait for each other until aborted.
TEST_F(FakeNccl, UngroupedSendsOfBothRanksDeadlockUntilAborted) {
    std::atomic<int> settled{0};
    on_ranks(2, false, [&](int me, ncclComm_t c) {
        std::vector<char> out(64, char(me)), in(64);
        EXPECT_EQ(api().ncclSend(out.data(), 64, ncclInt8, 1 - me, c, nullptr), ncclInProgress);
        EXPECT_EQ(api().ncclRecv(in.data(), 64, ncclInt8, 1 - me, c, nullptr), ncclInProgress);
        EXPECT_EQ(settle(c, 300), ncclInProgress);
        // Neither aborts before both have waited: an abort closes the sockets, and the peer still
        // waiting would see ncclRemoteError (seen on a loaded machine, threads started apart).
        ++settled;
        while (settled.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(api().ncclCommAbort(c), ncclSuccess);
    });
}

TEST_F(FakeNccl, FaultScriptFailsTheKthSendWithItsCode) {
    ASSERT_EQ(api().set_faults("fail:ncclSend:ncclSystemError@2"), 0);
    ncclUniqueId id;
    ASSERT_EQ(api().ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = make(1, id, 0, true);
    std::vector<char> a(8, 1), b(8, 0);
    for (int k = 1; k <= 3; ++k) {
        ASSERT_EQ(api().ncclGroupStart(), ncclSuccess);
        const ncclResult_t s = api().ncclSend(a.data(), 8, ncclUint8, 0, c, nullptr);
        EXPECT_EQ(s, k == 2 ? ncclSystemError : ncclSuccess) << "send " << k;
        EXPECT_EQ(api().ncclRecv(b.data(), 8, ncclUint8, 0, c, nullptr), ncclSuccess);
        // A group with a failed call does nothing and answers that call's code.
        EXPECT_EQ(api().ncclGroupEnd(), k == 2 ? ncclSystemError : ncclSuccess) << "group " << k;
    }
    EXPECT_EQ(std::memcmp(a.data(), b.data(), 8), 0);
    EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
}

TEST_F(FakeNccl, FaultScriptFailsInitAndExhaustsCommunicators) {
    ASSERT_EQ(api().set_faults("fail:ncclCommInitRank:ncclInternalError@1; exhaust:ncclCommInitRank:1:ncclSystemError"), 0);
    ncclUniqueId id;
    ASSERT_EQ(api().ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = nullptr, d = nullptr;
    EXPECT_EQ(api().ncclCommInitRank(&c, 1, id, 0), ncclInternalError);
    EXPECT_EQ(api().live_comms(), 0u);
    EXPECT_EQ(api().ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    ncclUniqueId id2;
    ASSERT_EQ(api().ncclGetUniqueId(&id2), ncclSuccess);
    EXPECT_EQ(api().ncclCommInitRank(&d, 1, id2, 0), ncclSystemError);  // one alive already
    EXPECT_EQ(api().live_comms(), 1u);
    EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
}

TEST_F(FakeNccl, MalformedScriptRefusedNamingTheRule) {
    EXPECT_EQ(api().set_faults("fail:ncclBogus:ncclSystemError"), -1);
    EXPECT_NE(std::string(api().last_error()).find("ncclBogus"), std::string::npos) << api().last_error();
    EXPECT_EQ(api().set_faults("fail:ncclSend:ncclSuccess"), -1);  // success is no fault
    EXPECT_EQ(api().set_faults("fail:ncclSend:9"), -1);            // outside ncclResult_t
}

TEST_F(FakeNccl, BadArgumentsAreInvalidArgument) {
    ncclUniqueId id;
    ASSERT_EQ(api().ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = nullptr;
    EXPECT_EQ(api().ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
    EXPECT_EQ(api().ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
    ncclUniqueId junk;
    std::memset(&junk, 7, sizeof junk);
    EXPECT_EQ(api().ncclCommInitRank(&c, 1, junk, 0), ncclInvalidArgument);
    c = make(1, id, 0, true);
    char b[4];
    EXPECT_EQ(api().ncclSend(b, 4, ncclUint8, 1, c, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api().ncclSend(b, 4, ncclUint8, 0, nullptr, nullptr), ncclInvalidArgument);
    EXPECT_EQ(api().ncclGroupEnd(), ncclInvalidUsage);  // no group open
    EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
    EXPECT_EQ(api().ncclCommDestroy(c), ncclInvalidArgument);  // destroyed: no longer a communicator
}

TEST_F(FakeNccl, SizesOfAPairThatDifferAreInvalidUsage) {
    on_ranks(2, false, [&](int me, ncclComm_t c) {
        std::vector<char> buf(64);
        api().ncclGroupStart();
        if (me == 0) api().ncclSend(buf.data(), 64, ncclUint8, 1, c, nullptr);
        else api().ncclRecv(buf.data(), 32, ncclUint8, 0, c, nullptr);
        api().ncclGroupEnd();
        // The sender finds the sizes differ (the receiver waits for data that never come, until
        // the sender's abort closes the connection).
        if (me == 0) {
            EXPECT_EQ(settle(c), ncclInvalidUsage);
        } else {
            settle(c, 300);  // (closing first could reach the sender before the size does)
        }
        EXPECT_EQ(api().ncclCommAbort(c), ncclSuccess);
    });
}

// Ranks in two processes; the child exits mid-transfer and the parent sees ncclRemoteError.
TEST_F(FakeNccl, PeerProcessThatExitsIsARemoteError) {
    ncclUniqueId id;
    ASSERT_EQ(api().ncclGetUniqueId(&id), ncclSuccess);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ncclComm_t c = nullptr;
        if (api().ncclCommInitRank(&c, 2, id, 1) != ncclSuccess) _exit(1);
        std::vector<char> in(1024);
        api().ncclRecv(in.data(), 1024, ncclUint8, 0, c, nullptr);  // the parent's first message
        const bool ok = in[5] == 5;
        _exit(ok ? 0 : 2);  // leaves without the second receive
    }
    ncclComm_t c = make(2, id, 0, false);
    std::vector<char> out(1024);
    for (size_t i = 0; i < out.size(); ++i) out[i] = char(i);
    EXPECT_EQ(api().ncclSend(out.data(), 1024, ncclUint8, 1, c, nullptr), ncclInProgress);
    EXPECT_EQ(settle(c), ncclSuccess);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(api().ncclSend(out.data(), 1024, ncclUint8, 1, c, nullptr), ncclInProgress);
    EXPECT_EQ(settle(c), ncclRemoteError);
    EXPECT_EQ(api().ncclCommAbort(c), ncclSuccess);
}

}  // namespace

// ---- stream order (over the fake CUDA driver) ----
#ifdef XMC_FAKE_CUDA_PATH

// The fake CUDA driver, loaded as the backend loads it (XMC_CUDA_DRIVER names it): the fake NCCL
// then queues each group on its stream.
struct Cuda {
    CUresult (*init)(unsigned) = nullptr;
    CUresult (*device_get)(CUdevice *, int) = nullptr;
    CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice) = nullptr;
    CUresult (*ctx_destroy)(CUcontext) = nullptr;
    CUresult (*ctx_set_current)(CUcontext) = nullptr;
    CUresult (*stream_create)(CUstream *, unsigned) = nullptr;
    CUresult (*stream_destroy)(CUstream) = nullptr;
    CUresult (*stream_synchronize)(CUstream) = nullptr;
    CUresult (*stream_query)(CUstream) = nullptr;
    CUresult (*event_create)(CUevent *, unsigned) = nullptr;
    CUresult (*event_record)(CUevent, CUstream) = nullptr;
    CUresult (*event_query)(CUevent) = nullptr;
    CUresult (*event_synchronize)(CUevent) = nullptr;
    CUresult (*event_destroy)(CUevent) = nullptr;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*mem_free)(CUdeviceptr) = nullptr;
    CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
    int (*set_faults)(const char *) = nullptr;
    bool ok = false;
};

const Cuda &cuda() {
    static const Cuda c = [] {
        Cuda c;
        setenv("XMC_CUDA_DRIVER", XMC_FAKE_CUDA_PATH, 1);
        void *lib = dlopen(XMC_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!lib) return c;
        auto one = [&](auto *out, const char *name) {
            *out = reinterpret_cast<std::remove_reference_t<decltype(*out)>>(dlsym(lib, name));
            return *out != nullptr;
        };
        c.ok = one(&c.init, "cuInit") && one(&c.device_get, "cuDeviceGet") && one(&c.ctx_create, "cuCtxCreate_v2") &&
               one(&c.ctx_destroy, "cuCtxDestroy_v2") && one(&c.ctx_set_current, "cuCtxSetCurrent") &&
               one(&c.stream_create, "cuStreamCreate") && one(&c.stream_destroy, "cuStreamDestroy_v2") &&
               one(&c.stream_synchronize, "cuStreamSynchronize") && one(&c.stream_query, "cuStreamQuery") &&
               one(&c.event_create, "cuEventCreate") && one(&c.event_record, "cuEventRecord") &&
               one(&c.event_query, "cuEventQuery") && one(&c.event_synchronize, "cuEventSynchronize") &&
               one(&c.event_destroy, "cuEventDestroy_v2") && one(&c.mem_alloc, "cuMemAlloc_v2") &&
               one(&c.mem_free, "cuMemFree_v2") && one(&c.htod_async, "cuMemcpyHtoDAsync_v2") &&
               one(&c.set_faults, "xmc_fake_cuda_set_faults");
        return c;
    }();
    return c;
}

class FakeNcclOnStreams : public FakeNccl {
protected:
    void SetUp() override {
        FakeNccl::SetUp();
        ASSERT_TRUE(cuda().ok) << dlerror();
        ASSERT_EQ(cuda().init(0), CUDA_SUCCESS);
        CUdevice dev = 0;
        ASSERT_EQ(cuda().device_get(&dev, 0), CUDA_SUCCESS);
        ASSERT_EQ(cuda().ctx_create(&ctx_, 0, dev), CUDA_SUCCESS);
        setenv("XMC_CUDA_DRIVER", XMC_FAKE_CUDA_PATH, 1);  // (the other tests run unordered)
    }
    void TearDown() override {
        unsetenv("XMC_CUDA_DRIVER");
        cuda().set_faults(nullptr);
        if (ctx_) {
            EXPECT_EQ(cuda().ctx_destroy(ctx_), CUDA_SUCCESS);
        }
        FakeNccl::TearDown();
    }
    CUcontext ctx_ = nullptr;
};

// Rank 0 fills its send buffer with a copy held back 300 ms on its stream, then sends it on that
// stream: the group must not read the buffer before the copy wrote it (unordered, it sent zeros).
TEST_F(FakeNcclOnStreams, GroupAfterADelayedCopyOnItsStreamWaitsForIt) {
    ASSERT_EQ(cuda().set_faults("exec_delay:cuMemcpyHtoDAsync:300ms@1"), 0);
    on_ranks(2, true, [&](int me, ncclComm_t c) {
        ASSERT_EQ(cuda().ctx_set_current(ctx_), CUDA_SUCCESS);
        CUstream s = nullptr;
        CUdeviceptr buf = 0;
        ASSERT_EQ(cuda().stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        ASSERT_EQ(cuda().mem_alloc(&buf, 64), CUDA_SUCCESS);
        std::memset(reinterpret_cast<void *>(buf), 0, 64);  // the fake's device memory is host memory
        const std::vector<char> filled(64, 'x');
        ASSERT_EQ(api().ncclGroupStart(), ncclSuccess);
        if (me == 0) {
            ASSERT_EQ(cuda().htod_async(buf, filled.data(), 64, s), CUDA_SUCCESS);  // the held-back copy
            EXPECT_EQ(api().ncclSend(reinterpret_cast<void *>(buf), 64, ncclUint8, 1, c, cudaStream_t(s)), ncclSuccess);
        } else {
            EXPECT_EQ(api().ncclRecv(reinterpret_cast<void *>(buf), 64, ncclUint8, 0, c, cudaStream_t(s)), ncclSuccess);
        }
        EXPECT_EQ(api().ncclGroupEnd(), ncclSuccess);
        EXPECT_EQ(cuda().stream_synchronize(s), CUDA_SUCCESS);
        if (me == 1) {
            EXPECT_EQ(std::string(reinterpret_cast<const char *>(buf), 64), std::string(64, 'x'))
                << "the group sent the buffer before the copy queued before it on its stream wrote it";
        }
        EXPECT_EQ(cuda().mem_free(buf), CUDA_SUCCESS);
        EXPECT_EQ(cuda().stream_destroy(s), CUDA_SUCCESS);
        EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
    });
}

// ncclGroupEnd only queues the group (held back 300 ms by exec_delay): the bytes are not there when
// it returns, the stream and an event recorded after it say NOT_READY, and a synchronize of the
// event (or the stream) is what makes them visible. Blocking and non-blocking communicators alike.
TEST_F(FakeNcclOnStreams, CompletionIsSeenOnlyThroughTheStreamOrAnEvent) {
    for (bool blocking : {true, false}) {
        ASSERT_EQ(api().set_faults("exec_delay:ncclGroupEnd:300ms"), 0);
        on_ranks(2, blocking, [&](int me, ncclComm_t c) {
            ASSERT_EQ(cuda().ctx_set_current(ctx_), CUDA_SUCCESS);
            CUstream s = nullptr;
            CUevent e = nullptr;
            CUdeviceptr out = 0, in = 0;
            ASSERT_EQ(cuda().stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
            ASSERT_EQ(cuda().event_create(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
            ASSERT_EQ(cuda().mem_alloc(&out, 64), CUDA_SUCCESS);
            ASSERT_EQ(cuda().mem_alloc(&in, 64), CUDA_SUCCESS);
            std::memset(reinterpret_cast<void *>(out), 'a' + me, 64);
            std::memset(reinterpret_cast<void *>(in), 0, 64);
            ASSERT_EQ(api().ncclGroupStart(), ncclSuccess);
            EXPECT_EQ(api().ncclSend(reinterpret_cast<void *>(out), 64, ncclUint8, 1 - me, c, cudaStream_t(s)), ncclSuccess);
            EXPECT_EQ(api().ncclRecv(reinterpret_cast<void *>(in), 64, ncclUint8, 1 - me, c, cudaStream_t(s)), ncclSuccess);
            EXPECT_EQ(api().ncclGroupEnd(), blocking ? ncclSuccess : ncclInProgress);
            // The communicator has nothing pending: the work is the stream's now.
            if (!blocking) {
                EXPECT_EQ(settle(c, 100), ncclSuccess);
            }
            ASSERT_EQ(cuda().event_record(e, s), CUDA_SUCCESS);
            EXPECT_EQ(reinterpret_cast<const char *>(in)[0], 0) << "the bytes moved before the stream got there";
            EXPECT_EQ(cuda().stream_query(s), CUDA_ERROR_NOT_READY);
            EXPECT_EQ(cuda().event_query(e), CUDA_ERROR_NOT_READY);
            EXPECT_EQ(cuda().event_synchronize(e), CUDA_SUCCESS);
            EXPECT_EQ(std::string(reinterpret_cast<const char *>(in), 64), std::string(64, char('a' + (1 - me))));
            EXPECT_EQ(cuda().stream_query(s), CUDA_SUCCESS);
            EXPECT_EQ(cuda().mem_free(out), CUDA_SUCCESS);
            EXPECT_EQ(cuda().mem_free(in), CUDA_SUCCESS);
            EXPECT_EQ(cuda().event_destroy(e), CUDA_SUCCESS);
            EXPECT_EQ(cuda().stream_destroy(s), CUDA_SUCCESS);
            EXPECT_EQ(api().ncclCommDestroy(c), ncclSuccess);
        });
    }
}

// Aborting a communicator whose group waits on a stream that never reaches it (the stream's
// earlier copy is held back a minute) drops the group, and the stream goes on.
TEST_F(FakeNcclOnStreams, AbortDropsAGroupItsStreamHasNotReached) {
    ASSERT_EQ(cuda().set_faults("exec_delay:cuMemcpyHtoDAsync:500ms"), 0);
    on_ranks(2, false, [&](int me, ncclComm_t c) {
        ASSERT_EQ(cuda().ctx_set_current(ctx_), CUDA_SUCCESS);
        CUstream s = nullptr;
        CUdeviceptr buf = 0;
        ASSERT_EQ(cuda().stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        ASSERT_EQ(cuda().mem_alloc(&buf, 64), CUDA_SUCCESS);
        const std::vector<char> filled(64, 'y');
        ASSERT_EQ(cuda().htod_async(buf, filled.data(), 64, s), CUDA_SUCCESS);
        ASSERT_EQ(api().ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(api().ncclSend(reinterpret_cast<void *>(buf), 64, ncclUint8, 1 - me, c, cudaStream_t(s)), ncclSuccess);
        EXPECT_EQ(api().ncclRecv(reinterpret_cast<void *>(buf), 64, ncclUint8, 1 - me, c, cudaStream_t(s)), ncclSuccess);
        EXPECT_EQ(api().ncclGroupEnd(), ncclInProgress);
        EXPECT_EQ(api().ncclCommAbort(c), ncclSuccess);
        EXPECT_EQ(cuda().stream_synchronize(s), CUDA_SUCCESS);  // neither hangs nor fails
        EXPECT_EQ(cuda().mem_free(buf), CUDA_SUCCESS);
        EXPECT_EQ(cuda().stream_destroy(s), CUDA_SUCCESS);
    });
}
#endif
