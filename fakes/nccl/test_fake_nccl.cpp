// Tests of the fake NCCL. The library is loaded the way the xmc CUDA backend loads NCCL: dlopen by
// path (XMC_FAKE_NCCL_PATH) and dlsym of nccl.h's names. Ranks are threads of this process, or a
// forked child; every test ends with the ledger of live communicators empty.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
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
    on_ranks(2, false, [&](int me, ncclComm_t c) {
        std::vector<char> out(64, char(me)), in(64);
        EXPECT_EQ(api().ncclSend(out.data(), 64, ncclInt8, 1 - me, c, nullptr), ncclInProgress);
        EXPECT_EQ(api().ncclRecv(in.data(), 64, ncclInt8, 1 - me, c, nullptr), ncclInProgress);
        EXPECT_EQ(settle(c, 300), ncclInProgress);
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
