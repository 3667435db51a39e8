#include "mpi_world.hpp"

#include "mpi_store.hpp"
#include "transport_gloo.hpp"

#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/device.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace xmc::conformance {

namespace {

// A rank stuck past its deadline cannot be freed from another thread as in process: it ends its
// process, and mpirun ends the job, so that the run still finishes.
void on_deadline(int) {
    static const char msg[] = "xmc_multirank: a rank is still running past its deadline; ending this process\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(3);
}

} // namespace

std::vector<std::string> mpi_all_gather_strings(const std::vector<std::string> &mine) {
    std::string packed;  // NUL-separated
    for (const auto &s : mine) packed += s + '\0';
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int len = int(packed.size());
    std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size; ++r) offsets[size_t(r)] = total, total += lens[size_t(r)];
    std::vector<char> all(size_t(total) + 1);
    MPI_Allgatherv(packed.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (size_t at = 0; at < size_t(total);) {
        out.emplace_back(all.data() + at);
        at += out.back().size() + 1;
    }
    return out;
}

MpiGlooWorld::MpiGlooWorld(Store store) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (store == Store::Mpi) {
        store_ = std::make_unique<MpiStore>(MPI_COMM_WORLD);
    } else {
        // Gloo's rendezvous on one host: a file store in a fresh temporary folder (SPEC 8).
        char path[4096] = {};
        if (rank_ == 0) {
            std::string tmpl = (std::filesystem::temp_directory_path() / "xmc-gloo-XXXXXX").string();
            std::snprintf(path, sizeof path, "%s", tmpl.c_str());
            if (!mkdtemp(path)) {
                std::perror("xmc_multirank: mkdtemp");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
        folder_ = path;
        store_ = std::make_unique<gloo::rendezvous::FileStore>(folder_);
    }
    device_ = gloo_device();
    signal(SIGALRM, on_deadline);
}

MpiGlooWorld::~MpiGlooWorld() {
    MPI_Barrier(MPI_COMM_WORLD);
    store_.reset();
    device_.reset();
    if (rank_ == 0 && !folder_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(folder_, ec);
    }
}

std::vector<std::string> MpiGlooWorld::run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms,
                                           uint32_t deadline_ms, const RankBody &body) {
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
    MPI_Barrier(MPI_COMM_WORLD);  // everyone starts the run together, so timeouts measure the run only
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
    std::vector<std::string> all = mpi_all_gather_strings(mine);
    group.reset();
    return all;
}

} // namespace xmc::conformance
