#include "transport_procs.hpp"

#include "transport_gloo.hpp"

#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/device.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace xmc::conformance {
namespace {

// The harness's own gathers wait for the slowest rank's whole run (its deadline, then the rendezvous
// of its groups); qualify's --timeout ends a world that takes longer.
constexpr uint32_t kHarnessTimeoutMs = 15 * 60 * 1000;

// A rank stuck past its deadline cannot be freed from another thread as in a threads world: it ends
// its process, and qualify ends the other ranks and names the test that was running.
void on_deadline(int) {
    static const char msg[] = "xmc run: a rank is still running past its deadline; ending this process\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(3);
}

class ProcsGlooWorld : public World {
public:
    ProcsGlooWorld(int rank, int size, const std::string &store_dir)
        : rank_(rank), size_(size), store_(std::make_unique<gloo::rendezvous::FileStore>(store_dir)),
          device_(gloo_device()),
          harness_(std::make_unique<GlooGroup>(device_, *store_, "harness", rank, size, kHarnessTimeoutMs)) {
        signal(SIGALRM, on_deadline);
    }
    ~ProcsGlooWorld() override {
        barrier();  // no rank leaves while another may still reach it
        harness_.reset();
        store_.reset();
        device_.reset();
    }
    const char *name() const override { return "gloo"; }
    int size() const override { return size_; }
    // Every case costs a gloo rendezvous per group (about 0.1 s): the thread world draws the breadth
    // (100 cases); this world is for the paths between processes (IPC), which a few cases take as
    // surely, at a fifth of the cost of 25 to every transfer self-test and package of the PR gate.
    int property_cases() const override { return 5; }

    // Every rank's bytes, in rank order (fixed size per rank).
    bool gather(const void *in, void *out, size_t bytes) {
        const xmc_transport *t = harness_->transport();
        return t->all_gather(t->ctx, in, out, bytes, kHarnessTimeoutMs) == 0;
    }
    void barrier() {
        char in = 0;
        std::vector<char> out(static_cast<size_t>(size_));
        gather(&in, out.data(), 1);
    }
    // Every rank's strings, in rank order, on every rank.
    std::vector<std::string> gather_strings(const std::vector<std::string> &mine) {
        std::string packed;  // NUL-separated
        for (const auto &s : mine) packed += s + '\0';
        uint64_t len = packed.size();
        std::vector<uint64_t> lens(static_cast<size_t>(size_));
        if (!gather(&len, lens.data(), sizeof len)) return {"the harness's gather of every rank's failures failed"};
        uint64_t longest = 0;
        for (uint64_t l : lens) longest = std::max(longest, l);
        packed.resize(longest);
        std::vector<char> all(size_t(longest) * size_t(size_));
        if (longest && !gather(packed.data(), all.data(), longest)) return {"the harness's gather of every rank's failures failed"};
        std::vector<std::string> out;
        for (int r = 0; r < size_; ++r)
            for (size_t at = 0; at < lens[size_t(r)];) {
                out.emplace_back(all.data() + size_t(r) * longest + at);
                at += out.back().size() + 1;
            }
        return out;
    }

    std::vector<std::string> run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms, uint32_t deadline_ms,
                                 const RankBody &body) override {
        const uint64_t run = runs_++;
        std::vector<std::string> mine;
        RankEnv env;
        bool member = false;
        for (size_t g = 0; g < groups.size() && !member; ++g)
            for (size_t i = 0; i < groups[g].members.size(); ++i)
                if (groups[g].members[i] == rank_) {
                    env = RankEnv{rank_, int(g), int32_t(i), groups[g].labels, nullptr, op_timeout_ms};
                    member = true;
                    break;
                }
        barrier();  // everyone starts the run together, so timeouts measure the run only
        std::unique_ptr<GlooGroup> group;
        alarm(deadline_ms / 1000 + 30);
        if (member) {
            try {
                const std::string prefix = "run" + std::to_string(run) + "/group" + std::to_string(env.group);
                group = std::make_unique<GlooGroup>(device_, *store_, prefix, env.index, int(env.labels.size()),
                                                    op_timeout_ms);
                env.transport = group->transport();
                mine = body(env);
            } catch (const std::exception &e) {
                mine.push_back(std::string("exception: ") + e.what());
            }
        }
        alarm(0);
        for (auto &f : mine)
            f = "rank " + std::to_string(env.label()) + " (process " + std::to_string(rank_) + "): " + f;
        // The gather is also the barrier after which no member still uses its group's connections.
        std::vector<std::string> all = gather_strings(mine);
        group.reset();
        return all;
    }

private:
    int rank_ = 0, size_ = 0;
    uint64_t runs_ = 0;
    std::unique_ptr<gloo::rendezvous::Store> store_;
    std::shared_ptr<gloo::transport::Device> device_;
    std::unique_ptr<GlooGroup> harness_;
};

} // namespace
} // namespace xmc::conformance

extern "C" __attribute__((visibility("default"))) xmc::conformance::World *
xmc_procs_world_open(int rank, int size, const char *store_dir, uint64_t *seed, char *error, size_t errlen) {
    using namespace xmc::conformance;
    auto fail = [&](const std::string &why) -> World * {
        std::snprintf(error, errlen, "%s", why.c_str());
        return nullptr;
    };
    // The hook of the test that a world which cannot connect is said so (qualify.procs_cannot_start).
    if (const char *f = std::getenv("XMC_TEST_PROCS_FAULT"); f && std::strcmp(f, "connect") == 0)
        return fail("gloo could not connect the ranks (simulated: XMC_TEST_PROCS_FAULT=connect)");
    try {
        auto w = std::make_unique<ProcsGlooWorld>(rank, size, store_dir);
        std::vector<uint64_t> seeds(static_cast<size_t>(size));
        if (!w->gather(seed, seeds.data(), sizeof *seed)) return fail("the ranks could not share rank 0's seed over gloo");
        *seed = seeds[0];
        return w.release();
    } catch (const std::exception &e) {
        return fail(std::string("gloo could not connect the ranks through the store in ") + store_dir + ": " + e.what());
    }
}
