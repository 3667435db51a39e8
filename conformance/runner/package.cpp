#include "package.hpp"

#include "catalogue.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pugixml.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace xmc::conformance {

// Generated at configure time (conformance/CMakeLists.txt): the suite's version and revision and
// the compiler (mustpass.cpp declares the embedded must-pass lists).
namespace embedded {
extern const char *const kSuiteVersion;
extern const char *const kGitRevision;
extern const char *const kCompiler;
} // namespace embedded

const char *suite_version() { return embedded::kSuiteVersion; }
const char *git_revision() { return embedded::kGitRevision; }
const char *build_compiler() { return embedded::kCompiler; }

// ---- waivers ----------------------------------------------------------------

bool parse_waivers(const std::string &text, const std::string &source, std::vector<Waiver> *out,
                   std::string *error) {
    out->clear();
    std::istringstream in(text);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
        ++n;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (trim(line).empty() || line[0] == '#') continue;
        std::vector<std::string> f;
        std::istringstream fs(line);
        for (std::string x; std::getline(fs, x, '\t');) f.push_back(trim(x));
        const std::string where = source + ":" + std::to_string(n) + ": ";
        Waiver w;
        w.line = n;
        if (f.size() == 3) {
            w.id = f[0]; w.backend = f[1]; w.reason = f[2];
        } else if (f.size() == 5) {
            w.id = f[0]; w.backend = f[1]; w.device = f[2]; w.reason = f[3]; w.link = f[4];
        } else {
            *error = where + "a waiver has 5 tab-separated columns (ID, backend, device, reason, link) "
                             "or 3 (ID, backend, reason); this line has " + std::to_string(f.size());
            return false;
        }
        if (w.id.empty() || w.backend.empty() || w.reason.empty()) {
            *error = where + "the requirement ID, backend and reason of a waiver may not be empty";
            return false;
        }
        if (w.device.empty()) w.device = "*";
        bool known = false;
        for (const auto &r : catalogue()) known |= r.id == w.id;
        if (!known) {
            *error = where + "'" + w.id + "' is not a requirement of the catalogue (xmc list-requirements)";
            return false;
        }
        out->push_back(w);
    }
    return true;
}

bool read_waivers(const std::string &path, std::vector<Waiver> *out, std::string *error) {
    std::string text;
    if (!read_text(path, &text)) {
        *error = "cannot read waiver file " + path;
        return false;
    }
    return parse_waivers(text, path, out, error);
}

namespace {
std::string lower_case(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
} // namespace

bool waiver_applies(const Waiver &w, const std::string &backend, const std::vector<DeviceFacts> &devices) {
    if (w.backend != "*" && w.backend != backend) return false;
    if (w.device == "*") return true;
    for (const auto &d : devices)
        if (w.device == d.name || lower_case(w.device) == lower_case(d.uuid)) return true;
    return false;
}

// ---- environment ------------------------------------------------------------

namespace {

std::string uuid_text(const uint8_t u[16]) {
    char s[40];
    std::snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                  u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return s;
}

// KEY=value lines of /etc/os-release, quotes removed.
json os_release() {
    json j = json::object();
    std::ifstream in("/etc/os-release");
    for (std::string line; std::getline(in, line);) {
        const size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string v = line.substr(eq + 1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
        const std::string k = line.substr(0, eq);
        if (k == "PRETTY_NAME" || k == "ID" || k == "VERSION_ID" || k == "VERSION_CODENAME") j[k] = v;
    }
    return j;
}

// The value after "key<spaces>:" on the first matching line of a /proc file.
std::string proc_field(const char *path, const std::string &key) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key, 0) == 0 && line.find(':') != std::string::npos) return trim(line.substr(line.find(':') + 1));
    return "";
}

// The driver libraries the backend loaded (looked up without loading them):
// path, and the version where the driver tells it.
json drivers_loaded() {
    json out = json::array();
    const char *cuda = std::getenv("XMC_CUDA_DRIVER") ? std::getenv("XMC_CUDA_DRIVER") : "libcuda.so.1";
    if (void *h = dlopen(cuda, RTLD_LAZY | RTLD_NOLOAD)) {
        json d = {{"api", "cuda"}, {"library", cuda}};
        using get_version_fn = int (*)(int *);
        if (auto fn = reinterpret_cast<get_version_fn>(dlsym(h, "cuDriverGetVersion"))) {
            int v = 0;
            if (fn(&v) == 0) {
                d["version"] = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
                d["version_code"] = v;
            }
            Dl_info info{};
            if (dladdr(reinterpret_cast<void *>(fn), &info) && info.dli_fname) d["library"] = info.dli_fname;
        }
        // Through the interposer (fakes/cuda_interpose), the version is the driver's beneath it: name it.
        using real_fn = size_t (*)(char *, size_t);
        if (auto real = reinterpret_cast<real_fn>(dlsym(h, "xmc_cuda_interpose_real_driver"))) {
            char buf[512] = "";
            real(buf, sizeof buf);
            d["interposer"] = d["library"];
            d["beneath"] = buf;
        }
        dlclose(h);
        out.push_back(d);
    }
    if (void *h = dlopen("libze_loader.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
        json d = {{"api", "level_zero"}, {"library", "libze_loader.so.1"}};
        Dl_info info{};
        if (void *sym = dlsym(h, "zeInit"); sym && dladdr(sym, &info) && info.dli_fname) d["library"] = info.dli_fname;
        if (const char *alt = std::getenv("ZE_ENABLE_ALT_DRIVERS")) d["alt_drivers"] = alt;
        dlclose(h);
        out.push_back(d);
    }
    // The kernel module's own statement, on a machine with the NVIDIA driver.
    std::ifstream nv("/proc/driver/nvidia/version");
    if (std::string line; nv && std::getline(nv, line)) out.push_back({{"api", "nvidia kernel module"}, {"version", trim(line)}});
    return out;
}

// Runs in the child: opens the backend and asks for its devices and driver.
json query_backend(const LoadedBackend &b) {
    json j = {{"devices", json::array()}};
    xmc_instance *inst = nullptr;
    xmc_open_params p{sizeof p, nullptr};
    const xmc_status st = b.api->open(&p, &inst);
    if (st != XMC_OK) {
        // (no instance, so no last_error to read)
        j["devices_error"] = std::string("open failed: ") + xmc_status_string(st);
        j["drivers"] = drivers_loaded();
        return j;
    }
    int32_t n = 0;
    if (b.api->device_count(inst, &n) != XMC_OK) {
        j["devices_error"] = "device_count failed";
        n = 0;
    }
    j["device_count"] = n;
    for (int32_t i = 0; i < n; ++i) {
        xmc_device_info d{};
        if (b.api->device_info(inst, i, &d) != XMC_OK) {
            j["devices"].push_back({{"index", i}, {"error", "device_info failed"}});
            continue;
        }
        d.name[sizeof d.name - 1] = 0;
        j["devices"].push_back({{"index", d.index}, {"name", d.name}, {"uuid", uuid_text(d.uuid)},
                                {"total_memory", d.total_memory}});
    }
    j["drivers"] = drivers_loaded();  // while the backend holds them
    b.api->close(inst);
    return j;
}

// The first line of a sysfs or procfs file, trimmed; "" when it cannot be read.
std::string first_line(const std::string &path) {
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) return "";
    return trim(line);
}

// Logical CPUs online, physical cores and sockets, from /proc/cpuinfo (a VM
// without "physical id" lines counts each logical CPU's core once).
json cpu_facts() {
    json j = {{"model", proc_field("/proc/cpuinfo", "model name")},
              {"online", sysconf(_SC_NPROCESSORS_ONLN)},
              {"memory", proc_field("/proc/meminfo", "MemTotal")}};
    std::set<std::pair<std::string, std::string>> cores;
    std::set<std::string> sockets;
    std::ifstream in("/proc/cpuinfo");
    std::string socket = "0", core;
    int processors = 0;
    for (std::string line; std::getline(in, line);) {
        const size_t colon = line.find(':');
        const std::string key = trim(line.substr(0, colon)), value = colon == std::string::npos ? "" : trim(line.substr(colon + 1));
        if (key == "processor") { ++processors; core = std::to_string(processors); }
        else if (key == "physical id") socket = value;
        else if (key == "core id") core = value;
        else if (line.empty() && processors) { cores.insert({socket, core}); sockets.insert(socket); }
    }
    if (processors) { cores.insert({socket, core}); sockets.insert(socket); }
    j["cores"] = static_cast<int>(cores.size());
    j["sockets"] = static_cast<int>(sockets.size());
    return j;
}

// The host's huge pages: transparent (the kernel's policy, e.g. "always
// [madvise] never") and explicit (the HugePages_* lines of /proc/meminfo).
json hugepage_facts() {
    json thp = json::object();
    for (const char *k : {"enabled", "defrag"}) {
        const std::string path = std::string("/sys/kernel/mm/transparent_hugepage/") + k;
        const std::string v = first_line(path);
        thp[k] = v.empty() ? "unknown: cannot read " + path : v;
    }
    json expl = json::object();
    for (const char *k : {"HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize"}) {
        const std::string v = proc_field("/proc/meminfo", std::string(k) + ":");
        if (!v.empty()) expl[k] = v;
    }
    if (expl.empty()) expl["error"] = "/proc/meminfo has no HugePages_* lines";
    return {{"transparent", thp}, {"explicit", expl}};
}

std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The PCI address (domain:bus:device.function, as sysfs names it) of the GPU
// whose UUID is `uuid`: the backend's device_info gives no PCI address, so it
// is looked up where the NVIDIA driver lists its GPUs (its /proc files, then
// nvidia-smi). "" with *where saying where it was looked for.
std::string pci_address_of(const std::string &uuid, std::string *where) {
    const std::string want = "gpu-" + lower(uuid);
    glob_t g{};
    if (glob("/proc/driver/nvidia/gpus/*/information", 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
            std::string text, bus;
            read_text(g.gl_pathv[i], &text);
            bool match = false;
            std::istringstream in(text);
            for (std::string line; std::getline(in, line);) {
                const size_t colon = line.find(':');
                if (colon == std::string::npos) continue;
                const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
                if (key == "GPU UUID") match = lower(value) == want;
                if (key == "Bus Location") bus = lower(value);
            }
            if (match && !bus.empty()) { globfree(&g); return bus; }
        }
    }
    globfree(&g);
    // nvidia-smi prints the domain with 8 digits ("00000000:18:00.0"); sysfs with 4.
    if (FILE *f = popen("timeout 20 nvidia-smi --query-gpu=uuid,pci.bus_id --format=csv,noheader 2>/dev/null", "r")) {
        char buf[256];
        std::string found;
        while (std::fgets(buf, sizeof buf, f)) {
            const std::string line = buf;
            const size_t comma = line.find(',');
            if (comma == std::string::npos || lower(trim(line.substr(0, comma))) != want) continue;
            const std::string bus = lower(trim(line.substr(comma + 1)));
            if (bus.size() >= 12) found = bus.substr(bus.size() - 12);
        }
        pclose(f);
        if (!found.empty()) return found;
    }
    *where = "no PCI address for device UUID " + uuid + ": not in /proc/driver/nvidia/gpus/*/information, and "
             "nvidia-smi is missing or does not list it (the host backend's and the fake drivers' devices are no PCI devices)";
    return "";
}

// A device's PCI link and NUMA node from sysfs, or {"error": why not}.
json pci_facts(const std::string &uuid) {
    std::string why;
    const std::string bus = pci_address_of(uuid, &why);
    if (bus.empty()) return {{"error", why}};
    const std::string dir = "/sys/bus/pci/devices/" + bus + "/";
    json j = {{"bus_id", bus}};
    for (const char *k : {"current_link_speed", "current_link_width", "max_link_speed", "max_link_width", "numa_node"}) {
        const std::string v = first_line(dir + k);
        j[k] = v.empty() ? "unknown: cannot read " + dir + k : v;
    }
    return j;
}

} // namespace

std::vector<std::pair<std::string, std::string>> driver_variables() {
    std::vector<std::pair<std::string, std::string>> v;
    for (char **e = environ; *e; ++e) {
        const std::string kv = *e;
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        const std::string k = kv.substr(0, eq);
        // XMC_CUDA_INTERPOSE_*: the driver beneath the interposer (_REAL) and where it recorded the
        // driver's answers: a package run through it names the real driver it qualified.
        if (k == "XMC_CUDA_DRIVER" || k == "ZE_ENABLE_ALT_DRIVERS" || k == "XMC_BACKEND_PATH" ||
            k.rfind("XMC_FAKE_", 0) == 0 || k.rfind("XMC_CUDA_INTERPOSE", 0) == 0)
            v.emplace_back(k, kv.substr(eq + 1));
    }
    std::sort(v.begin(), v.end());
    return v;
}

json collect_environment(const LoadedBackend &b, int timeout_s) {
    json env;
    env["suite"] = {{"name", "xmc"}, {"version", suite_version()}, {"git_revision", git_revision()}};
    struct utsname u{};
    uname(&u);
    env["os"] = {{"sysname", u.sysname}, {"release", u.release}, {"version", u.version}, {"machine", u.machine},
                 {"os_release", os_release()}};
    env["cpu"] = cpu_facts();
    env["hugepages"] = hugepage_facts();
    env["compiler"] = build_compiler();
    env["backend"] = {{"name", b.api->name}, {"version", b.api->version}, {"path", b.path},
                      {"abi_version", b.api->abi_version}, {"capabilities", caps_to_string(b.api->capabilities)}};
    for (const auto &[k, v] : driver_variables()) env["variables"][k] = v;
    char when[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    env["date"] = when;

    // The backend's devices and driver, asked in a child with a time limit.
    int fds[2];
    if (pipe(fds) != 0) {
        env["devices"] = json::array();
        env["devices_error"] = "pipe failed";
        return env;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        const std::string s = query_backend(b).dump();
        size_t off = 0;
        while (off < s.size()) {
            const ssize_t w = write(fds[1], s.data() + off, s.size() - off);
            if (w <= 0) break;
            off += static_cast<size_t>(w);
        }
        _exit(0);
    }
    close(fds[1]);
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool timed_out = false;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) { timed_out = true; break; }
        pollfd p{fds[0], POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char buf[4096];
        const ssize_t r = read(fds[0], buf, sizeof buf);
        if (r <= 0) break;
        text.append(buf, static_cast<size_t>(r));
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    json q = json::parse(text, nullptr, false);
    if (q.is_discarded() || !q.is_object()) {
        env["devices"] = json::array();
        env["devices_error"] = timed_out ? "the device query timed out after " + std::to_string(timeout_s) + " s"
                               : WIFSIGNALED(status) ? std::string("the device query died by signal ") + strsignal(WTERMSIG(status))
                                                     : "the device query gave no answer";
        return env;
    }
    for (auto &[k, v] : q.items()) env[k] = v;
    for (auto &d : env["devices"])
        if (d.contains("uuid")) d["pci"] = pci_facts(d.value("uuid", ""));
    return env;
}

// ---- whether device 0 is shared with other processes ----------------------------

namespace {

// A forked child that runs `fn` and writes its answer on a pipe; the parent reads a line of it
// with a time limit. (Forked, not exec'd: the parent never calls into the backend itself.)
struct Forked {
    pid_t pid = -1;
    int out = -1, hold = -1;  // the child's answers; closing `hold` lets it finish
};

template <class F>
Forked fork_child(F &&fn) {
    Forked f;
    int o[2], h[2];
    if (pipe(o) != 0) return f;
    if (pipe(h) != 0) { close(o[0]); close(o[1]); return f; }
    std::fflush(nullptr);
    f.pid = fork();
    if (f.pid == 0) {
        close(o[0]);
        close(h[1]);
        fn(o[1], h[0]);
        _exit(0);
    }
    close(o[1]);
    close(h[0]);
    f.out = o[0];
    f.hold = h[1];
    return f;
}

// One line from fd, within the deadline ("" when none came).
std::string read_line(int fd, std::chrono::steady_clock::time_point deadline) {
    std::string line;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return "";
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char c;
        if (read(fd, &c, 1) != 1) return "";
        if (c == '\n') return line;
        line += c;
    }
}

void finish(Forked &f) {
    if (f.hold >= 0) close(f.hold);
    if (f.out >= 0) close(f.out);
    if (f.pid > 0) {
        int status = 0;
        // The holder frees and exits once its pipe closes; one that hangs is killed.
        for (int i = 0; i < 200 && waitpid(f.pid, &status, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (waitpid(f.pid, &status, WNOHANG) == 0) {
            kill(f.pid, SIGKILL);
            waitpid(f.pid, &status, 0);
        }
    }
}

void say(int fd, const std::string &s) {
    const std::string line = s + "\n";
    if (write(fd, line.data(), line.size()) < 0) {}
}

// Opens an instance; the device's free memory, or "" (with why) when it has none to report.
bool free_memory(const LoadedBackend &b, xmc_instance **inst, uint64_t *free, std::string *why) {
    xmc_open_params p{sizeof p, nullptr};
    int32_t n = 0;
    uint64_t total = 0;
    if (b.api->open(&p, inst) != XMC_OK) return *why = "the backend does not open", false;
    if (b.api->device_count(*inst, &n) != XMC_OK || n < 1) return *why = "the backend has no device", false;
    if (!b.api->device_free_memory || b.api->device_free_memory(*inst, 0, free, &total) != XMC_OK)
        return *why = "device 0 reports no free memory", false;
    return true;
}

} // namespace

bool device_shared(const LoadedBackend &b, int timeout_s, std::string *how) {
    constexpr uint64_t kHold = uint64_t{64} << 20;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    // The holder: device 0's free memory, then kHold bytes of it held until told to finish.
    Forked holder = fork_child([&](int out, int hold) {
        xmc_instance *inst = nullptr;
        uint64_t free = 0;
        void *p = nullptr;
        std::string why;
        if (!free_memory(b, &inst, &free, &why)) return say(out, "no " + why);
        if (!b.api->dev_alloc || b.api->dev_alloc(inst, 0, kHold, &p) != XMC_OK)
            return say(out, "no device 0 cannot allocate " + std::to_string(kHold >> 20) + " MiB");
        say(out, "free " + std::to_string(free));
        char c;
        while (read(hold, &c, 1) > 0) {}
        b.api->dev_free(inst, p);
        b.api->close(inst);
    });
    const std::string h = read_line(holder.out, deadline);
    bool shared = true;
    if (h.rfind("free ", 0) != 0) {
        *how = "cannot tell (" + (h.empty() ? std::string("the probe gave no answer") : h.substr(3)) +
               "): taken as shared";
    } else {
        // A second process: on a device the two share, it sees the held bytes gone.
        Forked asker = fork_child([&](int out, int) {
            xmc_instance *inst = nullptr;
            uint64_t free = 0;
            std::string why;
            say(out, free_memory(b, &inst, &free, &why) ? "free " + std::to_string(free) : "no " + why);
            if (inst) b.api->close(inst);
        });
        const std::string a = read_line(asker.out, deadline);
        finish(asker);
        if (a.rfind("free ", 0) != 0) {
            *how = "cannot tell (" + (a.empty() ? std::string("the probe gave no answer") : a.substr(3)) +
                   "): taken as shared";
        } else {
            const uint64_t before = std::stoull(h.substr(5)), seen = std::stoull(a.substr(5));
            shared = seen + kHold / 2 <= before;
            *how = "while one process held " + std::to_string(kHold >> 20) + " MiB of device 0 (free before: " +
                   std::to_string(before) + " bytes), another saw " + std::to_string(seen) + " bytes free: " +
                   (shared ? "shared" : "each process's own");
        }
    }
    finish(holder);
    return shared;
}

json device_identity(const json &environment) {
    json ids = json::array();
    if (!environment.contains("devices") || !environment["devices"].is_array()) return ids;
    for (const auto &d : environment["devices"])
        ids.push_back({{"index", d.value("index", -1)}, {"name", d.value("name", "")}, {"uuid", d.value("uuid", "")},
                       {"total_memory", d.value("total_memory", 0ull)},
                       {"bus_id", d.contains("pci") && d["pci"].is_object() ? d["pci"].value("bus_id", "") : ""}});
    return ids;
}

// ---- reading packages back ------------------------------------------------------

bool read_package_results(const std::string &dir, json *results, std::string *error) {
    std::string text;
    if (!std::filesystem::is_directory(dir)) { *error = dir + " is not a folder"; return false; }
    if (!read_text(dir + "/results.json", &text)) {
        *error = dir + " is not a qualification package: it holds no readable results.json";
        return false;
    }
    *results = json::parse(text, nullptr, false);
    if (results->is_discarded() || !results->is_object()) {
        *error = dir + " is not a qualification package: its results.json is not a JSON object";
        return false;
    }
    if (results->value("format", "") != kPackageFormat || !(*results)["requirements"].is_array() ||
        !(*results)["backend"].is_object()) {
        *error = dir + " is not a qualification package: its results.json is not of format " + kPackageFormat +
                 " with 'backend' and 'requirements'";
        return false;
    }
    return true;
}

std::string sha256_file(const std::string &path) {
    std::string text;
    if (!read_text(path, &text)) return "";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr) != 1) return "";
    std::string hex;
    char b[3];
    for (unsigned int i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", md[i]);
        hex += b;
    }
    return hex;
}

std::string recount_summary(json &results) {
    std::map<std::string, int> n;
    for (const auto &r : results["requirements"]) n[r.value("verdict", "")]++;
    const int tests = static_cast<int>(results["requirements"].size());
    results["summary"] = {{"tests", tests}, {"passed", n["passed"]}, {"failed", n["failed"]},
                          {"unsupported", n["unsupported"]}, {"waived", n["waived"]}};
    return summary_line(tests, n["passed"], n["failed"], n["unsupported"], n["waived"]);
}

// ---- junit.xml ----------------------------------------------------------------

namespace {
// A testcase's outcome element: <failure message type>text</failure> for a
// failing status, <skipped message/> for a skip, nothing for a pass.
void junit_outcome(pugi::xml_node tc, const std::string &status, const std::string &message) {
    if (status == "passed") return;
    const std::string text = junit_text(message);
    if (status == "skipped") {
        tc.append_child("skipped").append_attribute("message") = text.c_str();
        return;
    }
    pugi::xml_node f = tc.append_child("failure");
    f.append_attribute("message") = text.c_str();
    f.append_attribute("type") = status.c_str();
    f.text() = text.c_str();
}
} // namespace

std::string junit_xml(const json &results) {
    pugi::xml_document doc;
    pugi::xml_node decl = doc.append_child(pugi::node_declaration);
    decl.append_attribute("version") = "1.0";
    decl.append_attribute("encoding") = "UTF-8";
    pugi::xml_node root = doc.append_child("testsuites");
    root.append_attribute("name") = "xmc";
    int failed = 0;
    for (const auto &r : results["requirements"]) failed += r.value("verdict", "") == "failed";
    root.append_attribute("tests") = static_cast<unsigned long long>(results["requirements"].size());
    root.append_attribute("failures") = failed;
    for (const auto &r : results["requirements"]) {
        const std::string id = r.value("id", ""), verdict = r.value("verdict", "");
        pugi::xml_node suite = root.append_child("testsuite");
        suite.append_attribute("name") = id.c_str();
        suite.append_attribute("tests") = static_cast<unsigned long long>(std::max<size_t>(1, r["tests"].size()));
        if (r["tests"].empty()) {
            pugi::xml_node tc = suite.append_child("testcase");
            tc.append_attribute("classname") = id.c_str();
            tc.append_attribute("name") = id.c_str();
            junit_outcome(tc, verdict == "passed" ? "passed" : verdict == "failed" ? "failed" : "skipped",
                          r.value("reason", ""));
        }
        for (const auto &t : r["tests"]) {
            pugi::xml_node tc = suite.append_child("testcase");
            tc.append_attribute("classname") = id.c_str();
            tc.append_attribute("name") = t.value("name", "").c_str();
            char seconds[32];
            std::snprintf(seconds, sizeof seconds, "%.3f", t.value("ms", 0.0) / 1000.0);
            tc.append_attribute("time") = seconds;
            junit_outcome(tc, t.value("status", ""), t.value("message", ""));
        }
    }
    std::ostringstream out;
    doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
    return out.str();
}

std::vector<DeviceFacts> devices_of(const json &environment) {
    std::vector<DeviceFacts> v;
    if (!environment.contains("devices") || !environment["devices"].is_array()) return v;
    for (const auto &d : environment["devices"]) {
        DeviceFacts f;
        f.index = d.value("index", 0);
        f.name = d.value("name", "");
        f.uuid = d.value("uuid", "");
        f.total_memory = d.value("total_memory", 0ull);
        v.push_back(f);
    }
    return v;
}

// ---- helpers ----------------------------------------------------------------

std::string junit_text(const std::string &s) {
    std::string o;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') o += "\xef\xbf\xbd";  // U+FFFD
        else o += c;
    }
    return o;
}

std::string xml_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        switch (c) {
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '&': o += "&amp;"; break;
        case '"': o += "&quot;"; break;
        default: o += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
        }
    }
    return o;
}

bool read_text(const std::string &path, std::string *out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
    return true;
}

bool write_text(const std::string &path, const std::string &text, std::string *error) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
        *error = "cannot write " + path;
        return false;
    }
    return true;
}

std::string summary_line(int tests, int passed, int failed, int unsupported, int waived) {
    char s[256];
    std::snprintf(s, sizeof s, "xmc: tests:%d passed:%d failed:%d unsupported:%d waived:%d", tests, passed, failed,
                  unsupported, waived);
    return s;
}

std::string primitive_of(const std::string &id) { return id.substr(0, id.find('-')); }

std::string human_bytes(unsigned long long n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (n >= 1024 && n % 1024 == 0 && i < 4) { n /= 1024; ++i; }
    return std::to_string(n) + " " + u[i];
}

bool read_parent(const std::string &dir, Parent *p, std::string *err) {
    p->dir = dir;
    if (!read_package_results(dir, &p->results, err)) {
        *err = "--rerun-failed: " + *err;
        return false;
    }
    std::error_code ec;
    p->path = std::filesystem::absolute(dir, ec).lexically_normal().string();
    p->digest = sha256_file(dir + "/results.json");
    std::string text;
    if (!read_text(dir + "/environment.json", &text) ||
        (p->environment = json::parse(text, nullptr, false)).is_discarded() || !p->environment.is_object()) {
        *err = "--rerun-failed: " + dir + " is not a complete package: its environment.json is missing or not JSON";
        return false;
    }
    if (!read_text(dir + "/waivers.tsv", &p->waivers_text)) {
        *err = "--rerun-failed: " + dir + " is not a complete package: it holds no waivers.tsv";
        return false;
    }
    return true;
}

} // namespace xmc::conformance
