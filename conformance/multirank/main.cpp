// xmc_multirank: the transfer test bodies (conformance/tests/test_transfer*.cpp) on every rank of an
// MPI job, one rank per process, over gloo (SPEC 6, SPEC 8 tier `multirank`).
//
//   mpirun -np N xmc_multirank [--backend NAME|PATH] [--store file|mpi] [--expect-fail ID,...] [gtest flags]
//
// --store: gloo's rendezvous store, a FileStore in a fresh temporary folder (file, the default: one
// host) or the store over MPI (mpi: several hosts, no shared file system; SPEC 8).
//
// --expect-fail: the self-test over processes (conformance/broken, `xmc-selftest: multirank`): the
// job succeeds only when the requirements whose tests failed, on any rank, are exactly these.
//
// Rank 0 chooses the rapidcheck seed (XMC_SEED, a seed=... in RC_PARAMS, or a random one) and shares
// it, so every rank draws the same cases. Every rank checks its own buffers and reports its own
// verdict, and the job fails if any rank fails.
#include "catalogue.hpp"
#include "fixture.hpp"
#include "mpi_world.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace xmc::conformance;

namespace {

// The seed every rank uses: rank 0's choice.
uint64_t shared_seed(int rank) {
    unsigned long long seed = 0;
    if (rank == 0) {
        const char *rc = std::getenv("RC_PARAMS");
        std::cmatch m;
        if (const char *s = std::getenv("XMC_SEED")) seed = std::strtoull(s, nullptr, 10);
        else if (rc && std::regex_search(rc, m, std::regex("seed=([0-9]+)"))) seed = std::stoull(m[1].str());
        else seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    }
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    return seed;
}

// RC_PARAMS with the shared seed in place of any other: rapidcheck reads it on first use.
void use_seed(uint64_t seed) {
    const char *rc = std::getenv("RC_PARAMS");
    std::string params = std::regex_replace(rc ? rc : "", std::regex("seed=[0-9]+"), "");
    params += " seed=" + std::to_string(seed);
    setenv("RC_PARAMS", params.c_str(), 1);
}

// Ranks other than 0 print only their failures, each line marked with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
    explicit RankFailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult &r) override {
        if (r.failed())
            std::printf("[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                        r.summary());
    }

private:
    int rank_;
};

// --expect-fail: the requirements whose tests failed on any rank must be exactly `want`. Every
// rank computes the same verdict from the union of every rank's failures; rank 0 prints it.
bool caught_exactly(const std::string &want_list, int rank) {
    const auto &cat = catalogue();
    std::vector<unsigned char> failed(cat.size(), 0);
    const auto *ut = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < ut->total_test_suite_count(); ++i) {
        const auto *suite = ut->GetTestSuite(i);
        for (int j = 0; j < suite->total_test_count(); ++j) {
            const auto *t = suite->GetTestInfo(j);
            if (!t->should_run() || !t->result()->Failed()) continue;
            if (const Requirement *r = requirement_of_test(t->name()))
                failed[size_t(r - cat.data())] = 1;
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, failed.data(), int(failed.size()), MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD);
    std::set<std::string> want, got;
    std::stringstream ss(want_list);
    for (std::string id; std::getline(ss, id, ',');) want.insert(id);
    for (size_t k = 0; k < cat.size(); ++k)
        if (failed[k]) got.insert(cat[k].id);
    if (rank == 0) {
        if (want == got) std::printf("xmc selftest: caught: the suite failed exactly %s\n", want_list.c_str());
        for (const auto &id : want)
            if (!got.count(id)) std::printf("xmc selftest: NOT CAUGHT: %s passed on a backend that breaks it\n", id.c_str());
        for (const auto &id : got)
            if (!want.count(id)) std::printf("xmc selftest: UNEXPECTED: %s failed, but the planted bug is not there\n", id.c_str());
        std::fflush(stdout);
    }
    return want == got;
}

} // namespace

int main(int argc, char **argv) {
    int provided = 0;  // the MPI store serves from a thread of rank 0
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--backend") == 0) {
            selected_backends() = {argv[i + 1]};
            for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
            argc -= 2;
            break;
        }
    MpiGlooWorld::Store store = MpiGlooWorld::Store::File;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--store") == 0) {
            if (std::strcmp(argv[i + 1], "mpi") == 0) {
                store = MpiGlooWorld::Store::Mpi;
            } else if (std::strcmp(argv[i + 1], "file") != 0) {
                if (rank == 0) std::fprintf(stderr, "xmc_multirank: --store takes file or mpi\n");
                MPI_Finalize();
                return 2;
            }
            for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
            argc -= 2;
            break;
        }
    std::string expect_fail;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--expect-fail") == 0) {
            expect_fail = argv[i + 1];
            for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
            argc -= 2;
            break;
        }
    if (store == MpiGlooWorld::Store::Mpi && provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) std::fprintf(stderr, "xmc_multirank: --store mpi needs MPI_THREAD_MULTIPLE; this MPI gives %d\n", provided);
        MPI_Finalize();
        return 2;
    }
    const uint64_t seed = shared_seed(rank);
    use_seed(seed);

    ::testing::GTEST_FLAG(filter) = "*/TransferTest.*";  // the transfer bodies; --gtest_filter overrides
    ::testing::GTEST_FLAG(color) = "no";  // mpirun may hand ranks a terminal; logs stay plain
    ::testing::InitGoogleTest(&argc, argv);
    if (rank != 0) {
        auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new RankFailurePrinter(rank));
    }
    int failed = 0;
    {
        MpiGlooWorld world(store);
        set_world(&world);
        if (rank == 0)
            std::printf("xmc_multirank: %d ranks over gloo (rendezvous: %s store), seed %llu (rerun: XMC_SEED=%llu)\n",
                        size, store == MpiGlooWorld::Store::Mpi ? "MPI" : "file", (unsigned long long)seed,
                        (unsigned long long)seed);
        std::fflush(stdout);
        const int rc = RUN_ALL_TESTS();
        const auto *ut = ::testing::UnitTest::GetInstance();
        // A tier that runs nothing fails, and says why (SPEC 6).
        const bool nothing = ut->test_to_run_count() == ut->skipped_test_count();
        if (nothing && rank == 0)
            std::printf("xmc_multirank: no transfer test ran (the filter selects none, or the backend does not "
                        "declare the transfer capability)\n");
        int mine = rc != 0 || nothing;
        // Every rank's own verdict.
        std::printf("xmc_multirank: rank %d/%d: %s (%d tests run, %d failed)\n", rank, size, mine ? "FAILED" : "passed",
                    ut->test_to_run_count(), ut->failed_test_count());
        std::fflush(stdout);
        MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!expect_fail.empty()) failed = caught_exactly(expect_fail, rank) ? 0 : 1;
        set_world(nullptr);
    }
    MPI_Finalize();
    return failed ? 1 : 0;
}
