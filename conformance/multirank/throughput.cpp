// AFF-SPEED on the CPU tier: the host executor over gloo at 2 ranks against gloo's own send/recv of
// the same bytes, between the same two processes, in the same run (SPEC 5 AFF-SPEED, SPEC 10).
//
//   mpirun -np 2 xmc_multirank_throughput [--mib N] [--budget-mib B] [--repeat R] [--store file|mpi]
//                                         [--check-targets]
//
// Cases (N MiB of float32, default 256):
//   dense:   a 1-D tensor held whole by rank 0, moved whole to rank 1 (N MiB cross, one way);
//   rows:    an [R x R] matrix split by rows 3:1 over the ranks, resharded to 1:3: half of it
//            crosses, in contiguous runs (N/2 MiB cross, one way);
//   reshard: an [R x R] matrix split by rows over both ranks, resharded to columns: each rank sends a
//            quarter of the tensor to the other and copies a quarter locally (N/2 MiB cross). For
//            information, no target: every row crossing is strided, so the sender packs it into
//            staging and the receiver unpacks it, copies gloo's own send/recv never makes (about
//            0.5 of it on the 2-core CI machine).
// Baseline: the same bytes per direction as one gloo message each, in the executor's order (the
// lower rank sends first). Figures: GB/s of cross-rank bytes, best of R; ratio = executor / gloo.
// --check-targets: exit 1 when the ratio of dense or rows is below 0.8 (the AFF-SPEED target on this tier).
#include "abi_plan.hpp"
#include "loader.hpp"
#include "mpi_store.hpp"
#include "transport_gloo.hpp"

#include <xmc/affine.hpp>

#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/device.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace aff = xmc::affine;
using namespace xmc::conformance;

namespace {

using Clock = std::chrono::steady_clock;

const aff::RankLayout *layout_of(const aff::Map &m, int rank) {
    for (const auto &r : m.ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

// A dense row-major buffer for this rank's shard of `m` (ptr NULL when it holds none).
xmc_shard_buffer dense(const aff::Map &m, int rank, std::vector<float> &store, float fill) {
    xmc_shard_buffer b{};
    const aff::RankLayout *l = layout_of(m, rank);
    if (!l || aff::numel(l->shard_shape) == 0) return b;
    store.assign(size_t(aff::numel(l->shard_shape)), fill);
    b.ptr = store.data();
    b.kind = XMC_MEM_HOST;
    b.capacity = store.size();
    b.ndim = int32_t(l->shard_shape.size());
    const auto strides = aff::row_major_strides(l->shard_shape);
    for (int d = 0; d < b.ndim; ++d) b.shape[d] = l->shard_shape[size_t(d)], b.strides[d] = strides[size_t(d)];
    return b;
}

struct Figure {
    double exec_gbs = 0, gloo_gbs = 0;
};

} // namespace

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t mib = 256, budget_mib = 64;
    int repeat = 3;
    bool check = false, mpi_store = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mib" && i + 1 < argc) mib = std::atoll(argv[++i]);
        else if (a == "--budget-mib" && i + 1 < argc) budget_mib = std::atoll(argv[++i]);
        else if (a == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
        else if (a == "--store" && i + 1 < argc) mpi_store = std::string(argv[++i]) == "mpi";
        else if (a == "--check-targets") check = true;
    }
    if (size != 2) {
        if (rank == 0) std::fprintf(stderr, "xmc_multirank_throughput: run with 2 ranks (mpirun -np 2)\n");
        MPI_Finalize();
        return 2;
    }
    int failed = 0;
    {
        // Rendezvous, as in xmc_multirank.
        std::unique_ptr<gloo::rendezvous::Store> store;
        std::string folder;
        if (mpi_store) {
            store = std::make_unique<MpiStore>(MPI_COMM_WORLD);
        } else {
            char path[4096] = {};
            if (rank == 0) {
                std::snprintf(path, sizeof path, "%s",
                              (std::filesystem::temp_directory_path() / "xmc-gloo-XXXXXX").string().c_str());
                if (!mkdtemp(path)) MPI_Abort(MPI_COMM_WORLD, 2);
            }
            MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
            folder = path;
            store = std::make_unique<gloo::rendezvous::FileStore>(folder);
        }
        auto device = gloo_loopback_device();
        auto group = std::make_unique<GlooGroup>(device, *store, "throughput", rank, size, 60000);
        const xmc_transport *tp = group->transport();
        const int32_t labels[2] = {0, 1};
        xmc_group g{rank, 2, labels, tp, 60000};

        std::string err;
        const LoadedBackend *host = load_backend("host", &err);
        xmc_instance *inst = nullptr;
        xmc_open_params op{sizeof(xmc_open_params), nullptr};
        if (!host || host->api->open(&op, &inst) != XMC_OK) {
            std::fprintf(stderr, "rank %d: cannot open the host backend: %s\n", rank, err.c_str());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }

        const int64_t elems = mib * 1024 * 1024 / 4;
        const int64_t side = int64_t(std::sqrt(double(elems))) / 4 * 4;
        struct Case {
            const char *name;
            aff::Map src, tgt;
            bool target;  // false: for information (see the file's comment)
        };
        const std::vector<Case> cases = {
            {"dense", aff::split_sizes({elems}, 0, {elems, 0}, {0, 1}), aff::split_sizes({elems}, 0, {0, elems}, {0, 1}),
             true},
            {"rows", aff::split_sizes({side, side}, 0, {3 * side / 4, side / 4}, {0, 1}),
             aff::split_sizes({side, side}, 0, {side / 4, 3 * side / 4}, {0, 1}), true},
            {"reshard", aff::split_even({side, side}, 0, {0, 1}), aff::split_even({side, side}, 1, {0, 1}), false},
        };
        if (rank == 0)
            std::printf("xmc_multirank_throughput: 2 ranks over gloo (TCP on loopback), host executor, staging budget "
                        "%lld MiB, best of %d\n%-8s %12s %12s %12s %8s\n",
                        (long long)budget_mib, repeat, "case", "cross MiB", "executor GB/s", "gloo GB/s", "ratio");
        for (const Case &c : cases) {
            auto plan = aff::plan(c.src, c.tgt);
            if (!plan) MPI_Abort(MPI_COMM_WORLD, 3);
            const auto segs = abi_segments(*plan);
            std::vector<float> sbuf, tbuf;
            xmc_transfer_args a{};
            a.struct_size = sizeof a;
            a.plan = xmc_plan_view{segs.data(), segs.size(), plan->digest};
            a.source = dense(c.src, rank, sbuf, 1.0f + float(rank));
            a.target = dense(c.tgt, rank, tbuf, 0.0f);
            a.elem_size = 4;
            a.staging_budget = uint64_t(budget_mib) << 20;
            a.group = &g;
            // Bytes per direction, from the plan.
            uint64_t out = 0, in = 0;
            for (const aff::Segment &s : plan->segments) {
                const uint64_t b = uint64_t(aff::numel(s.extents)) * 4;
                if (s.src_rank == rank && s.tgt_rank != rank) out += b;
                if (s.tgt_rank == rank && s.src_rank != rank) in += b;
            }
            uint64_t cross = out + in, all_cross = 0;
            MPI_Allreduce(&cross, &all_cross, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            all_cross /= 2;  // each byte counted by its sender and its receiver
            double best_exec = 1e300, best_gloo = 1e300;
            std::vector<char> sendbuf(static_cast<size_t>(out)), recvbuf(static_cast<size_t>(in));
            for (int r = 0; r < repeat; ++r) {
                MPI_Barrier(MPI_COMM_WORLD);
                auto t0 = Clock::now();
                xmc_transfer_stats st{};
                const xmc_status s = host->api->transfer_execute(inst, &a, &st);
                MPI_Barrier(MPI_COMM_WORLD);
                const double te = std::chrono::duration<double>(Clock::now() - t0).count();
                if (s != XMC_OK) {
                    xmc_error_info e{};
                    host->api->last_error(inst, &e);
                    std::fprintf(stderr, "rank %d: transfer failed: %s\n", rank, e.message);
                    failed = 1;
                }
                best_exec = std::min(best_exec, te);
                // gloo alone: one message per direction, lower rank sends first.
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = Clock::now();
                const int peer = 1 - rank;
                int rc = 0;
                if (rank == 0) {
                    if (out) rc |= tp->send(tp->ctx, peer, sendbuf.data(), out, 1000 + uint64_t(r));
                    if (in) rc |= tp->recv(tp->ctx, peer, recvbuf.data(), in, 2000 + uint64_t(r));
                } else {
                    if (in) rc |= tp->recv(tp->ctx, peer, recvbuf.data(), in, 1000 + uint64_t(r));
                    if (out) rc |= tp->send(tp->ctx, peer, sendbuf.data(), out, 2000 + uint64_t(r));
                }
                MPI_Barrier(MPI_COMM_WORLD);
                const double tg = std::chrono::duration<double>(Clock::now() - t0).count();
                if (rc) failed = 1;
                best_gloo = std::min(best_gloo, tg);
            }
            // Spot check: the target holds the source's values.
            for (size_t i = 0; i < tbuf.size(); i += 4099)
                if (tbuf[i] != 1.0f && tbuf[i] != 2.0f) {
                    std::fprintf(stderr, "rank %d: %s: target element %zu is %g\n", rank, c.name, i, double(tbuf[i]));
                    failed = 1;
                    break;
                }
            const double exec_gbs = double(all_cross) / best_exec / 1e9, gloo_gbs = double(all_cross) / best_gloo / 1e9;
            const double ratio = exec_gbs / gloo_gbs;
            if (rank == 0)
                std::printf("%-8s %12.1f %12.2f %12.2f %8.2f%s\n", c.name, double(all_cross) / (1 << 20), exec_gbs,
                            gloo_gbs, ratio,
                            !c.target ? "  (information: strided, packed)" : ratio < 0.8 ? "  (below 0.8)" : "");
            if (check && c.target && ratio < 0.8) failed = 1;
        }
        std::fflush(stdout);
        host->api->close(inst);
        MPI_Barrier(MPI_COMM_WORLD);
        group.reset();
        store.reset();
        if (rank == 0 && !folder.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(folder, ec);
        }
    }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
