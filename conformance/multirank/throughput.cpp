// AFF-SPEED on the CPU tier: the host executor over gloo at P ranks (2 or more) against gloo's own
// send/recv of the same bytes, between the same processes, in the same run (SPEC 5 AFF-SPEED, SPEC 10).
//
//   mpirun -np P xmc_multirank_throughput [--mib N] [--budget-mib B] [--repeat R] [--store file|mpi]
//                                         [--json FILE] [--check-targets]
//
// Cases (N MiB of float32, default 256; the ranks pair up as 0-1, 2-3, ...; at 2 ranks one pair):
//   dense:   a 1-D tensor in one chunk per pair, held by the pair's even rank and moved whole to its
//            odd rank (N MiB cross, one way);
//   rows:    an [R x R] matrix split by rows 3:1:3:1... over the ranks, resharded to 1:3:1:3...: in
//            each pair half of the pair's rows cross, in contiguous runs (N/2 MiB cross, one way);
//   reshard: an [R x R] matrix split by rows over the ranks, resharded to columns: every rank sends
//            a block to every other (strided) and copies one locally. For information, no target:
//            every row crossing is strided, so the sender packs it into staging and the receiver
//            unpacks it, copies gloo's own send/recv never makes (about 0.5 of it on 2 ranks on the
//            2-core CI machine).
// Baseline: the same bytes per direction between each two ranks as one gloo message each, in the
// executor's order (peers in the executor's rounds, the lower rank of a pair sends first).
// Rows per case, each run from an MPI barrier before it to one after it (SPEC 10: the median of
// several samples), the three interleaved in every repeat so that load on a shared machine falls
// on all of them alike; one warm-up repeat first, not counted:
//   one-shot: transfer_execute, the whole call (agreement, staging, bytes, completion);
//   prepared: (0.3) the same transfer prepared once before the repeats (transfer_prepare), then one
//             transfer_run per repeat, released after them (AFF-PREPARED);
//   gloo:     the baseline above;
//   memcpy:   the same-host peak: each rank memcpy's the bytes it sends within its own memory.
// Figures: GB/s of cross-rank bytes over the median of R; ratio = row / gloo, and prepared / memcpy
// (SPEC 10, 0.3: a prepared staged run between processes of one host >= 0.5 of a memcpy of the
// bytes; within a node the reference's prepared runs stage through shared memory, not gloo).
// --check-targets: exit 1 when, for dense or rows, the one-shot ratio is below 0.8 (the AFF-SPEED
// target on this tier), the prepared ratio below 0.95 (SPEC 10, 0.3: a prepared gloo run, 4 CPU
// ranks, >= 0.95 of gloo's own send/receive of the same bytes; held to it at every rank count) or
// prepared / memcpy below 0.5.
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

double median(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t.empty() ? 0 : t[t.size() / 2];
}

// Sizes along one axis for P ranks: `even` on the pairs' even ranks and `odd` on their odd ones,
// scaled so that they add up to `total` (the last rank takes the remainder; an odd P's last rank,
// outside any pair, holds nothing when both are per-pair chunks).
std::vector<int64_t> alternating(int64_t total, int p, int64_t even, int64_t odd) {
    std::vector<int64_t> v(size_t(p), 0);
    const int paired = p / 2 * 2;
    const int64_t unit = total / (int64_t(paired / 2) * (even + odd));
    int64_t used = 0;
    for (int k = 0; k < paired; ++k) used += v[size_t(k)] = unit * (k % 2 ? odd : even);
    v[size_t(paired - 1)] += total - used;
    return v;
}

} // namespace

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t mib = 256, budget_mib = 64;
    int repeat = 3;
    std::string json_path;
    bool check = false, mpi_store = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mib" && i + 1 < argc) mib = std::atoll(argv[++i]);
        else if (a == "--budget-mib" && i + 1 < argc) budget_mib = std::atoll(argv[++i]);
        else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
        else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
        else if (a == "--store" && i + 1 < argc) mpi_store = std::string(argv[++i]) == "mpi";
        else if (a == "--check-targets") check = true;
    }
    if (size < 2) {
        if (rank == 0) std::fprintf(stderr, "xmc_multirank_throughput: run with 2 or more ranks (mpirun -np P)\n");
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
        auto device = gloo_device();
        auto group = std::make_unique<GlooGroup>(device, *store, "throughput", rank, size, 60000);
        const xmc_transport *tp = group->transport();
        std::vector<int32_t> labels(size_t(size), 0);
        std::vector<int> ranks(size_t(size), 0);
        for (int k = 0; k < size; ++k) labels[size_t(k)] = ranks[size_t(k)] = k;
        xmc_group g{rank, size, labels.data(), tp, 60000};

        std::string err;
        const LoadedBackend *host = load_backend("host", &err);
        xmc_instance *inst = nullptr;
        xmc_open_params op{sizeof(xmc_open_params), nullptr};
        if (!host || host->api->open(&op, &inst) != XMC_OK) {
            std::fprintf(stderr, "rank %d: cannot open the host backend: %s\n", rank, err.c_str());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }

        const int64_t elems = mib * 1024 * 1024 / 4;
        // A multiple of 2P rows, so that 3:1 splits are whole (at 2 ranks: of 4, as before).
        const int64_t side = int64_t(std::sqrt(double(elems))) / (2 * size) * (2 * size);
        struct Case {
            const char *name;
            aff::Map src, tgt;
            bool target;  // false: for information (see the file's comment)
        };
        const std::vector<Case> cases = {
            {"dense", aff::split_sizes({elems}, 0, alternating(elems, size, 1, 0), ranks),
             aff::split_sizes({elems}, 0, alternating(elems, size, 0, 1), ranks), true},
            {"rows", aff::split_sizes({side, side}, 0, alternating(side, size, 3, 1), ranks),
             aff::split_sizes({side, side}, 0, alternating(side, size, 1, 3), ranks), true},
            {"reshard", aff::split_even({side, side}, 0, ranks), aff::split_even({side, side}, 1, ranks), false},
        };
        const bool can_prepare = (host->api->capabilities & XMC_CAP_TRANSFER_PREPARED) != 0;
        const char *iface = std::getenv("XMC_GLOO_IFACE");  // gloo_device(): hosts joined by that interface
        const std::string over = iface && *iface ? std::string("TCP on interface ") + iface : "TCP on loopback";
        if (rank == 0)
            std::printf("xmc_multirank_throughput: %d ranks over gloo (%s), host executor, staging budget "
                        "%lld MiB, median of %d after a warm-up\n%-8s %10s %14s %14s %10s %10s %10s %10s %12s\n",
                        size, over.c_str(), (long long)budget_mib, repeat, "case", "cross MiB", "one-shot GB/s", "prepared GB/s",
                        "gloo GB/s", "memcpy GB/s", "one-shot", "prepared", "prep/memcpy");
        std::string json = "{\"ranks\": " + std::to_string(size) + ", \"mib\": " + std::to_string(mib) +
                           ", \"repeat\": " + std::to_string(repeat) + ", \"cases\": [";
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
            // Bytes per direction and peer, from the plan.
            std::vector<uint64_t> out(size_t(size), 0), in(size_t(size), 0);
            for (const aff::Segment &s : plan->segments) {
                const uint64_t b = uint64_t(aff::numel(s.extents)) * 4;
                if (s.src_rank == rank && s.tgt_rank != rank) out[size_t(s.tgt_rank)] += b;
                if (s.tgt_rank == rank && s.src_rank != rank) in[size_t(s.src_rank)] += b;
            }
            uint64_t cross = 0, all_cross = 0, most = 0;
            for (int p = 0; p < size; ++p) {
                cross += out[size_t(p)] + in[size_t(p)];
                most = std::max({most, out[size_t(p)], in[size_t(p)]});
            }
            MPI_Allreduce(&cross, &all_cross, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            all_cross /= 2;  // each byte counted by its sender and its receiver
            std::vector<char> sendbuf(static_cast<size_t>(most)), recvbuf(static_cast<size_t>(most));
            const auto report = [&](const char *what) {
                xmc_error_info e{};
                host->api->last_error(inst, &e);
                std::fprintf(stderr, "rank %d: %s: %s failed: %s\n", rank, c.name, what, e.message);
                failed = 1;
            };
            // Prepared once, before the repeats; its runs are timed below beside the calls.
            xmc_prepared *pt = nullptr;
            if (can_prepare) {
                MPI_Barrier(MPI_COMM_WORLD);
                if (host->api->transfer_prepare(inst, &a, &pt) != XMC_OK) report("transfer_prepare"), pt = nullptr;
            }
            std::vector<double> t_exec, t_prep, t_gloo, t_copy;
            for (int r = 0; r <= repeat; ++r) {  // r == 0: warm-up, not counted
                MPI_Barrier(MPI_COMM_WORLD);
                auto t0 = Clock::now();
                xmc_transfer_stats st{};
                const xmc_status s = host->api->transfer_execute(inst, &a, &st);
                MPI_Barrier(MPI_COMM_WORLD);
                if (r > 0) t_exec.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
                if (s != XMC_OK) report("transfer_execute");
                // (0.3) One run of the prepared transfer, timed as the call above (AFF-PREPARED).
                if (pt) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    t0 = Clock::now();
                    const xmc_status sp = host->api->transfer_run(inst, pt, nullptr, &st, nullptr);
                    MPI_Barrier(MPI_COMM_WORLD);
                    if (r > 0) t_prep.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
                    if (sp != XMC_OK) report("transfer_run");
                }
                // gloo alone: one message per direction and peer, peers in the executor's rounds
                // (round k pairs rank m with k - m), the lower rank of a pair sending first.
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = Clock::now();
                int rc = 0;
                const uint64_t tag = 1000 + 2 * uint64_t(r);
                for (int k = 0; k < size && !rc; ++k) {
                    const int p = ((k - rank) % size + size) % size;
                    if (p == rank) continue;
                    const uint64_t o = out[size_t(p)], i = in[size_t(p)];
                    if (rank < p) {
                        if (o) rc |= tp->send(tp->ctx, p, sendbuf.data(), o, tag);
                        if (i) rc |= tp->recv(tp->ctx, p, recvbuf.data(), i, tag + 1);
                    } else {
                        if (i) rc |= tp->recv(tp->ctx, p, recvbuf.data(), i, tag);
                        if (o) rc |= tp->send(tp->ctx, p, sendbuf.data(), o, tag + 1);
                    }
                }
                MPI_Barrier(MPI_COMM_WORLD);
                if (r > 0) t_gloo.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
                if (rc) failed = 1;
                // The same-host peak: each rank copies what it sends with memcpy, in its own memory.
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = Clock::now();
                for (int p = 0; p < size; ++p)
                    if (out[size_t(p)]) std::memcpy(recvbuf.data(), sendbuf.data(), size_t(out[size_t(p)]));
                MPI_Barrier(MPI_COMM_WORLD);
                if (r > 0) t_copy.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            }
            // Spot check that the prepared run moves the bytes itself: the target cleared, one more
            // run, then it holds the source's values (1 + the source rank). Without a prepared
            // transfer, the last call's result is checked.
            if (pt) {
                std::fill(tbuf.begin(), tbuf.end(), 0.0f);
                MPI_Barrier(MPI_COMM_WORLD);
                xmc_transfer_stats st{};
                if (host->api->transfer_run(inst, pt, nullptr, &st, nullptr) != XMC_OK) report("transfer_run");
                if (host->api->transfer_release(inst, pt) != XMC_OK) report("transfer_release");
            }
            for (size_t i = 0; i < tbuf.size(); i += 4099)
                if (!(tbuf[i] >= 1.0f && tbuf[i] <= float(size) && tbuf[i] == std::floor(tbuf[i]))) {
                    std::fprintf(stderr, "rank %d: %s: target element %zu is %g\n", rank, c.name, i, double(tbuf[i]));
                    failed = 1;
                    break;
                }
            const double gb = double(all_cross) / 1e9;
            const double exec_gbs = gb / median(t_exec), gloo_gbs = gb / median(t_gloo);
            const double prep_gbs = pt ? gb / median(t_prep) : 0;
            const double copy_gbs = gb / median(t_copy);
            const double ratio = exec_gbs / gloo_gbs, prep_ratio = prep_gbs / gloo_gbs, prep_copy = prep_gbs / copy_gbs;
            const bool exec_low = c.target && ratio < 0.8, prep_low = c.target && pt && prep_ratio < 0.95;
            const bool copy_low = c.target && pt && prep_copy < 0.5;
            if (rank == 0) {
                std::printf("%-8s %10.1f %14.2f %14.2f %10.2f %10.2f %10.3f %10.3f %12.3f%s%s%s%s%s\n", c.name,
                            double(all_cross) / (1 << 20), exec_gbs, prep_gbs, gloo_gbs, copy_gbs, ratio, prep_ratio,
                            prep_copy, !c.target ? "  (information: strided, packed)" : "",
                            exec_low ? "  (one-shot below 0.8)" : "", prep_low ? "  (prepared below 0.95)" : "",
                            copy_low ? "  (prepared below 0.5 of memcpy)" : "",
                            can_prepare ? "" : "  (no transfer_prepared: prepared not measured)");
                char row[600];
                std::snprintf(row, sizeof row,
                              "%s{\"case\": \"%s\", \"cross_bytes\": %llu, \"exec_gbs\": %.3f, \"gloo_gbs\": %.3f, "
                              "\"exec_over_gloo\": %.4f, \"target\": %s, \"prepared_gbs\": %.3f, "
                              "\"prepared_over_gloo\": %.4f, \"prepared_target\": %s, \"memcpy_gbs\": %.3f, "
                              "\"prepared_over_memcpy\": %.4f, \"prepared_memcpy_target\": %s}",
                              json.back() == '[' ? "" : ", ", c.name, (unsigned long long)all_cross, exec_gbs, gloo_gbs,
                              ratio, c.target ? "0.8" : "null", prep_gbs, prep_ratio, c.target ? "0.95" : "null",
                              copy_gbs, prep_copy, c.target ? "0.5" : "null");
                json += row;
            }
            if (check && (exec_low || prep_low || copy_low || (c.target && !pt))) failed = 1;
        }
        json += "]}\n";
        if (rank == 0 && !json_path.empty()) {
            if (FILE *f = std::fopen(json_path.c_str(), "w")) {
                std::fputs(json.c_str(), f);
                std::fclose(f);
            } else {
                std::fprintf(stderr, "xmc_multirank_throughput: cannot write %s\n", json_path.c_str());
                failed = 1;
            }
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
