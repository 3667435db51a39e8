#include "package.hpp"

#include "catalogue.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace xmc::conformance {

// Generated at configure time (conformance/CMakeLists.txt): the suite's
// version and revision, the compiler, and the must-pass lists of every
// version under conformance/mustpass/.
namespace embedded {
struct MustPassFile {
    const char *version;
    const char *name;
    const char *text;
};
extern const char *const kSuiteVersion;
extern const char *const kGitRevision;
extern const char *const kCompiler;
extern const MustPassFile kMustPassFiles[];
extern const int kMustPassFileCount;
} // namespace embedded

const char *suite_version() { return embedded::kSuiteVersion; }
const char *git_revision() { return embedded::kGitRevision; }
const char *build_compiler() { return embedded::kCompiler; }

// ---- must-pass lists --------------------------------------------------------

namespace {

// Trims spaces, tabs and a trailing '\r'.
std::string trim(const std::string &s) {
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

// The IDs of a list's text: one a line, '#' starts a comment.
std::vector<std::string> ids_of_text(const std::string &text) {
    std::vector<std::string> ids;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        line = trim(line.substr(0, line.find('#')));
        if (!line.empty()) ids.push_back(line);
    }
    return ids;
}

// Dotted versions compared part by part as numbers ("0.10.0" after "0.9.0").
bool version_less(const std::string &a, const std::string &b) {
    std::istringstream x(a), y(b);
    for (;;) {
        std::string pa, pb;
        const bool ha = static_cast<bool>(std::getline(x, pa, '.')), hb = static_cast<bool>(std::getline(y, pb, '.'));
        if (!ha || !hb) return !ha && hb;
        const long na = std::strtol(pa.c_str(), nullptr, 10), nb = std::strtol(pb.c_str(), nullptr, 10);
        if (na != nb) return na < nb;
    }
}

std::string mustpass_dir(const std::string &version) { return "conformance/mustpass/" + version + "/"; }

} // namespace

std::vector<std::string> mustpass_versions() {
    std::set<std::string> seen;
    for (int i = 0; i < embedded::kMustPassFileCount; ++i) seen.insert(embedded::kMustPassFiles[i].version);
    std::vector<std::string> v(seen.begin(), seen.end());
    std::sort(v.begin(), v.end(), version_less);
    return v;
}

bool is_mustpass_version(const std::string &version) {
    const auto v = mustpass_versions();
    return std::find(v.begin(), v.end(), version) != v.end();
}

std::vector<MustPassList> mustpass_lists(const std::string &version) {
    std::vector<MustPassList> v;
    for (int i = 0; i < embedded::kMustPassFileCount; ++i)
        if (embedded::kMustPassFiles[i].version == version)
            v.push_back({embedded::kMustPassFiles[i].name, ids_of_text(embedded::kMustPassFiles[i].text)});
    return v;
}

bool MustPass::contains(const std::string &id) const {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool mustpass_for(const std::string &version, xmc_caps caps, MustPass *out, std::string *error) {
    *out = MustPass{};
    const std::vector<MustPassList> lists = mustpass_lists(version);
    if (lists.empty()) {
        std::string known;
        for (const auto &v : mustpass_versions()) known += (known.empty() ? "" : ", ") + v;
        *error = "this xmc holds no must-pass lists of suite " + version + " (it holds " + known + ")";
        return false;
    }
    out->suite = version;
    auto find = [&](const std::string &name) -> const MustPassList * {
        for (const auto &l : lists)
            if (l.name == name) return &l;
        return nullptr;
    };
    // `always` is new in 0.2.0: a version without it held every backend to `model` only.
    std::vector<std::string> want = {"model"};
    if (find("always")) want.push_back("always");
    for (int i = 0; i < XMC_CAP_COUNT_; ++i)
        if (caps & (1ull << i)) want.push_back(xmc_cap_string(1ull << i));
    std::set<std::string> ids;
    for (const auto &name : want) {
        const MustPassList *found = find(name);
        // An earlier suite has no list for a capability it predates (0.2's
        // register_portable, ...): it held such a backend to nothing more.
        if (!found && version != suite_version()) continue;
        if (!found) {
            *error = "no must-pass list for capability '" + name + "' in suite " + version + " (" +
                     mustpass_dir(version) + name + ".txt)";
            return false;
        }
        out->lists.push_back(name);
        ids.insert(found->ids.begin(), found->ids.end());
    }
    // Catalogue order, so the file reads like the catalogue.
    for (const auto &r : catalogue())
        if (ids.count(r.id)) out->ids.push_back(r.id);
    return true;
}

std::string mustpass_text(const MustPass &m) {
    std::string s = "# xmc must-pass list: the requirements that must pass (or be waived) for this backend.\n";
    s += "# suite: " + m.suite + "\n# lists:";
    for (const auto &l : m.lists) s += " " + l;
    s += "\n# (the union of " + mustpass_dir(m.suite) + "<list>.txt for `model`, `always` and each declared capability)\n";
    for (const auto &id : m.ids) s += id + "\n";
    return s;
}

bool parse_mustpass(const std::string &text, MustPass *out, std::string *error) {
    *out = MustPass{};
    bool have_suite = false, have_lists = false;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# suite: ", 0) == 0) { out->suite = trim(line.substr(9)); have_suite = true; }
        else if (line.rfind("# lists:", 0) == 0) {
            std::istringstream ls(line.substr(8));
            for (std::string l; ls >> l;) out->lists.push_back(l);
            have_lists = true;
        }
    }
    out->ids = ids_of_text(text);
    if (!have_suite || !have_lists) {
        *error = "mustpass.txt has no '# suite:' or '# lists:' header line";
        return false;
    }
    return true;
}

std::vector<std::string> check_mustpass_lists(const std::string &version) {
    std::vector<std::string> problems;
    const std::string dir = mustpass_dir(version);
    const std::vector<MustPassList> lists = mustpass_lists(version);
    if (lists.empty()) return {dir + ": no must-pass lists of suite " + version + " are embedded"};
    std::map<std::string, std::string> list_of;  // ID -> list naming it
    for (const auto &l : lists) {
        const xmc_caps bit = capability_bit(l.name);
        if (l.name != "model" && l.name != "always" && !bit)
            problems.push_back(dir + l.name + ".txt: '" + l.name + "' is not a capability (nor 'model' or 'always')");
        for (const auto &id : l.ids) {
            const Requirement *r = nullptr;
            for (const auto &c : catalogue())
                if (c.id == id) r = &c;
            if (!r) { problems.push_back(dir + l.name + ".txt: " + id + " is not in the catalogue"); continue; }
            if (r->capability != l.name)
                problems.push_back(dir + l.name + ".txt: " + id + " needs capability '" + r->capability +
                                   "', so it belongs in " + r->capability + ".txt");
            if (!r->in_tier("pr"))
                problems.push_back(dir + l.name + ".txt: " + id + " is measured by a hardware tier only, so "
                                   "qualification cannot pass it");
            if (list_of.count(id)) problems.push_back(dir + l.name + ".txt: " + id + " is listed twice");
            list_of[id] = l.name;
        }
    }
    // An older version's lists predate the rows added since: only the current
    // version must list every `pr` requirement.
    if (version != suite_version()) return problems;
    for (const auto &r : catalogue())
        if (r.in_tier("pr") && !list_of.count(r.id))
            problems.push_back(r.id + " (capability " + r.capability + ", tier pr) is in no must-pass list: add it to " +
                               dir + r.capability + ".txt");
    return problems;
}

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
std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
} // namespace

bool waiver_applies(const Waiver &w, const std::string &backend, const std::vector<DeviceFacts> &devices) {
    if (w.backend != "*" && w.backend != backend) return false;
    if (w.device == "*") return true;
    for (const auto &d : devices)
        if (w.device == d.name || lower(w.device) == lower(d.uuid)) return true;
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

} // namespace

std::vector<std::pair<std::string, std::string>> driver_variables() {
    std::vector<std::pair<std::string, std::string>> v;
    for (char **e = environ; *e; ++e) {
        const std::string kv = *e;
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        const std::string k = kv.substr(0, eq);
        if (k == "XMC_CUDA_DRIVER" || k == "ZE_ENABLE_ALT_DRIVERS" || k == "XMC_BACKEND_PATH" || k.rfind("XMC_FAKE_", 0) == 0)
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
    env["cpu"] = {{"model", proc_field("/proc/cpuinfo", "model name")},
                  {"online", sysconf(_SC_NPROCESSORS_ONLN)},
                  {"memory", proc_field("/proc/meminfo", "MemTotal")}};
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
    return env;
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

} // namespace xmc::conformance
