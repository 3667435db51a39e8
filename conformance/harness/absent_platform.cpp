// The absent-platform children (absent_platform.hpp): the hidings of each driver
// backend, the child processes, and what a child checks before the test's own checks.
#include "absent_platform.hpp"
#include "driver_control_ze.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

extern char **environ;

namespace xmc::conformance {
namespace {

constexpr const char *kHidingEnv = "XMC_ABSENT_PLATFORM";  // set in a child: the hiding it runs under
constexpr auto kChildLimit = std::chrono::seconds(60);     // a child is a second; this is a hang

bool cuda_backend(const std::string &name) { return name == "cuda" || name.rfind("broken_cuda_", 0) == 0; }

// The driver library a CUDA backend loads (reference/cuda/driver.cpp), as given.
std::string cuda_library() {
    const char *env = std::getenv("XMC_CUDA_DRIVER");
    return env && *env ? env : "libcuda.so.1";
}

// Is the library `lib` loaded in this process (never loads it)?
bool loaded(const std::string &lib) {
    void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != nullptr;
}

std::string tail_of(const std::string &path, size_t n) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// Runs `test` of `backend` in a child with `env` added; "" when it passed, else why not.
std::string run_child(const std::string &backend, const std::string &test, const Hiding &h) {
    char dir[] = "/tmp/xmc-absent-platform-XXXXXX";
    if (!mkdtemp(dir)) return "cannot create a temporary directory";
    const std::string results = std::string(dir) + "/results.jsonl", log = std::string(dir) + "/child.log";
    std::vector<std::string> env_strings;
    for (char **e = environ; *e; ++e) {
        const std::string kv = *e;
        const std::string key = kv.substr(0, kv.find('='));
        bool replaced = key == kHidingEnv || key.rfind("GTEST_", 0) == 0 || key.rfind("XMC_FAULT_SWEEP_", 0) == 0;
        for (const auto &[k, v] : h.env) replaced |= key == k;
        for (const auto &k : h.unset) replaced |= key == k;
        if (!replaced) env_strings.push_back(kv);
    }
    for (const auto &[k, v] : h.env) env_strings.push_back(k + "=" + v);
    env_strings.push_back(std::string(kHidingEnv) + "=" + h.name);
    std::vector<std::string> args = {"xmc", "run", "--backend", backend, "--xmc-results", results,
                                     "--gtest_filter=" + test};
    std::vector<char *> envp, argv;
    for (auto &s : env_strings) envp.push_back(s.data());
    for (auto &s : args) argv.push_back(s.data());
    envp.push_back(nullptr);
    argv.push_back(nullptr);
    const int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t pid = fork();
    if (pid == 0) {
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        setpgid(0, 0);
        execve("/proc/self/exe", argv.data(), envp.data());
        _exit(127);
    }
    if (logfd >= 0) ::close(logfd);
    std::string why;
    if (pid < 0) {
        why = "fork failed";
    } else {
        const auto end = std::chrono::steady_clock::now() + kChildLimit;
        int status = 0;
        bool hung = false;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > end) {
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                hung = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::string outcome, message;
        std::ifstream in(results);
        for (std::string line; std::getline(in, line);) {
            const auto ev = nlohmann::json::parse(line, nullptr, false);
            if (!ev.is_discarded() && ev.value("event", "") == "end") {
                outcome = ev.value("status", "");
                message = ev.value("message", "");
            }
        }
        if (hung) why = "hung (no result after " + std::to_string(kChildLimit.count()) + " s)";
        else if (WIFSIGNALED(status)) why = std::string("crashed: ") + strsignal(WTERMSIG(status));
        else if (outcome.empty()) why = "ended (status " + std::to_string(WEXITSTATUS(status)) + ") without running the test";
        else if (outcome == "skipped") why = "skipped, which a child never may: " + message;
        else if (outcome != "passed") why = message;
        if (!why.empty() && outcome.empty()) why += "; its output ends:\n" + tail_of(log, 1500);
    }
    ::unlink(results.c_str());
    ::unlink(log.c_str());
    ::rmdir(dir);
    return why;
}

} // namespace

// ---- the hidings, one list ---------------------------------------------------

namespace {
// Every hiding of a backend: those a fake must do (needs_fake) run only over the fake.
struct Listed {
    Hiding hiding;
    bool needs_fake;
    const char *real;  // why a real driver cannot be hidden so
};
std::vector<Listed> all_hidings(const std::string &name) {
    if (cuda_backend(name))
        return {
            {{"no_driver", {{"XMC_CUDA_DRIVER", "/nonexistent/libcuda.so.1"}}, Hiding::NoDriver,
              "XMC_CUDA_DRIVER names a library that does not exist"}, false, ""},
            // CUDA_VISIBLE_DEVICES= hides every device of the real driver; the fake counts its own.
            {{"no_device", {{"XMC_FAKE_CUDA_DEVICES", "0"}, {"CUDA_VISIBLE_DEVICES", ""}}, Hiding::NoDevice,
              "the driver loads and lists no device (CUDA_VISIBLE_DEVICES empty; the fake's XMC_FAKE_CUDA_DEVICES=0)",
              {"XMC_FAKE_CUDA_ORDER"}},
             false, ""},
            {{"no_extension", {{"XMC_FAKE_CUDA_ATTRS", "host_register_supported=0"}}, Hiding::NoExtension,
              "devices whose CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED is 0"},
             true, "the real driver's host-register support cannot be hidden"},
        };
    if (ze_backend(name))
        return {
            {{"no_driver", {{"XMC_ZE_LOADER", "/nonexistent/libze_loader.so.1"}}, Hiding::NoDriver,
              "XMC_ZE_LOADER names a loader that does not exist"}, false, ""},
            {{"no_loader_driver", {{"ZE_ENABLE_ALT_DRIVERS", "/nonexistent/libze_driver.so"}}, Hiding::NoDriver,
              "the loader loads and finds no driver"},
             true, "the loader would still find the system's drivers"},
            {{"no_device", {{"XMC_FAKE_ZE_DEVICES", "0"}}, Hiding::NoDevice,
              "the driver loads and zeDeviceGet lists no device", {"XMC_FAKE_ZE_ORDER"}},
             true, "the system's drivers' devices cannot be hidden one by one"},
            {{"no_extension",
              {{"XMC_FAKE_ZE_FAULTS", "fail:zeDriverGetExtensionProperties:ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"}},
              Hiding::NoExtension, "devices whose driver lists no external-memmap extension"},
             true, "the system's driver's extensions cannot be hidden"},
        };
    return {};
}
} // namespace

std::vector<Hiding> hidings_of(const xmc_backend *api, std::vector<std::string> *not_here) {
    const bool fake = driver_control(api, nullptr) != nullptr;
    std::vector<Hiding> out;
    for (const auto &l : all_hidings(api->name)) {
        if (!l.needs_fake || fake) out.push_back(l.hiding);
        else if (not_here) not_here->push_back(std::string(l.hiding.name) + ": " + l.real + " (the fake does it: " + l.hiding.how + ")");
    }
    return out;
}

// ---- the fixture ------------------------------------------------------------

void AbsentPlatform::SetUp() {
    BackendTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
    hiding_ = std::getenv(kHidingEnv);
    if (!hiding_ && all_hidings(api->name).empty())
        XMC_SKIP(SkipKind::Unsupported, "backend '" << api->name
                                                     << "' loads no driver library the suite knows how to hide");
}

void AbsentPlatform::each_hiding(const std::function<void(Hiding::What what)> &checks) {
    if (hiding_) {
        // The child: first that the platform is hidden as the parent meant it.
        // Found in the whole list: under the hiding, the fake may not be loaded.
        const std::vector<Listed> all = all_hidings(api->name);
        const Hiding *h = nullptr;
        bool needs_fake = false;
        for (const auto &x : all)
            if (x.hiding.name == std::string(hiding_)) {
                h = &x.hiding;
                needs_fake = x.needs_fake;
            }
        ASSERT_NE(h, nullptr) << "no hiding named '" << hiding_ << "' for backend " << api->name;
        const DriverControl *c = driver_control(api, nullptr);
        if (needs_fake && h->what != Hiding::NoDriver) {
            ASSERT_NE(c, nullptr) << "the fake driver is not loaded: the child hides more than " << h->how;
        }
        const bool cuda = cuda_backend(api->name);
        switch (h->what) {
        case Hiding::NoDriver:
            ASSERT_EQ(c, nullptr) << "the fake driver was loaded although it was hidden (" << h->how << ")";
            ASSERT_FALSE(cuda && loaded(cuda_library())) << cuda_library() << " is loaded although it was hidden";
            ASSERT_EQ(devices_, 0) << "pretended: " << devices_ << " device(s) without a driver (" << h->how << ")";
            break;
        case Hiding::NoDevice:
        case Hiding::NoExtension: {
            // The driver must be there, and have taken its configuration: a fake that refused it
            // (a malformed script) reports no device, and the child would check nothing it meant to.
            if (c) {
                ASSERT_EQ(c->config_error(), "") << "the fake refused the hiding's configuration (" << h->how << ")";
            } else {
                ASSERT_TRUE(!cuda || loaded(cuda_library()))
                    << "the driver " << cuda_library() << " did not load: the child hides more than " << h->how;
            }
            if (h->what == Hiding::NoDevice)
                ASSERT_EQ(devices_, 0) << "pretended: " << devices_ << " device(s) where the driver lists none ("
                                       << h->how << ")";
            else
                ASSERT_GT(devices_, 0) << "no device: the child hides more than the extension (" << h->how << ")";
            break;
        }
        }
        checks(h->what);
        return;
    }
    // The parent: one child per hiding.
    std::vector<std::string> not_here;
    const std::vector<Hiding> hidings = hidings_of(api, &not_here);
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string test = std::string(info->test_suite_name()) + "." + info->name();
    // A run that has no driver (or no device) has none to hide devices (or an extension) of:
    // those children would check nothing they mean to.
    const bool driver_here = driver_control(api, nullptr) != nullptr || (cuda_backend(api->name) ? loaded(cuda_library()) : devices_ > 0);
    for (const auto &h : hidings) {
        if (h.what != Hiding::NoDriver && (!driver_here || (h.what == Hiding::NoExtension && devices_ == 0))) {
            std::printf("absent platform: %s %s: not checkable here: this run has no %s to hide\n", api->name, h.name,
                        driver_here ? "device" : "driver");
            continue;
        }
        const std::string why = run_child(GetParam(), test, h);
        std::printf("absent platform: %s %s (%s): %s\n", api->name, h.name, h.how, why.empty() ? "passed" : "FAILED");
        EXPECT_EQ(why, "") << "the child with " << h.name << " (" << h.how << ")";
    }
    for (const auto &n : not_here) std::printf("absent platform: %s: not checkable here: %s\n", api->name, n.c_str());
    std::fflush(stdout);
}

} // namespace xmc::conformance
