// The harness of the PIN-* tests (conformance/tests/test_pin.cpp): the
// fixture, and a child process that cannot exceed RLIMIT_MEMLOCK.
#pragma once
#include "fixture.hpp"

#include <sys/capability.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace xmc::conformance {

// The pin_stats at SetUp are the baseline a test's accounting is checked against.
class PinTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->pin_stats(inst, &baseline_), XMC_OK);
    }
    xmc_pin_result alloc(size_t n, size_t align = 1) {
        xmc_pin_result r{};
        EXPECT_TRUE(status_is(XMC_OK, api->pin_alloc(inst, n, align, XMC_NO_DEVICE, &r)));
        return r;
    }
    xmc_pin_info query(const void *p, size_t len = 0) {
        xmc_pin_info q{};
        EXPECT_EQ(api->pin_query(inst, p, len, &q), XMC_OK);
        return q;
    }
    xmc_pin_stats stats() {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK);
        return s;
    }
    xmc_pin_stats baseline_{};
};

// Runs `body` in a child that cannot exceed RLIMIT_MEMLOCK: it drops
// CAP_IPC_LOCK (root ignores the limit while holding it) and lowers the limit.
// The child reports through its exit status and a pipe.
struct ChildResult {
    int status = 0;
    std::string message;
};

inline ChildResult run_limited_child(size_t limit, const std::function<std::string()> &body) {
    int fds[2];
    if (pipe(fds) != 0) return {-1, "pipe failed"};
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        std::string msg;
        cap_t caps = cap_get_proc();
        cap_value_t lock = CAP_IPC_LOCK;
        if (!caps || cap_set_flag(caps, CAP_EFFECTIVE, 1, &lock, CAP_CLEAR) != 0 ||
            cap_set_flag(caps, CAP_PERMITTED, 1, &lock, CAP_CLEAR) != 0 || cap_set_proc(caps) != 0)
            msg = "cannot drop CAP_IPC_LOCK";
        if (caps) cap_free(caps);
        struct rlimit rl{limit, limit};
        if (msg.empty() && setrlimit(RLIMIT_MEMLOCK, &rl) != 0) msg = "cannot lower RLIMIT_MEMLOCK";
        if (msg.empty()) msg = body();
        ssize_t w = write(fds[1], msg.data(), msg.size());
        (void)w;
        _exit(msg.empty() ? 0 : 1);
    }
    close(fds[1]);
    ChildResult res;
    char buf[512];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) res.message.append(buf, k);
    close(fds[0]);
    waitpid(pid, &res.status, 0);
    return res;
}

} // namespace xmc::conformance
