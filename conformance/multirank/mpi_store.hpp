// Gloo's rendezvous key-value store built on MPI itself (SPEC 8): across hosts there is no shared
// file system for a FileStore, and Debian's gloo has no MPI context of its own.
//
// Rank 0 of the communicator serves the store from a thread of its own; every rank (rank 0 too) is
// a client that sends each request to it with MPI point-to-point on a duplicate of the
// communicator, so the store's messages never meet the harness's. A `get` or `wait` for a key not
// yet set is answered once some rank sets it; a client that waits past its timeout gets
// gloo::IoException, as from gloo's own stores. Needs MPI_THREAD_MULTIPLE.
#pragma once
#include <gloo/rendezvous/store.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace xmc::conformance {

class MpiStore : public gloo::rendezvous::Store {
public:
    explicit MpiStore(MPI_Comm comm);  // collective over comm
    ~MpiStore() override;              // collective over comm
    MpiStore(const MpiStore &) = delete;
    MpiStore &operator=(const MpiStore &) = delete;

    void set(const std::string &key, const std::vector<char> &data) override;
    std::vector<char> get(const std::string &key) override;
    void wait(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override;

    static constexpr std::chrono::milliseconds kTimeout = std::chrono::seconds(60);

private:
    std::vector<char> request(char op, const std::vector<std::string> &keys, const std::vector<char> &data,
                              std::chrono::milliseconds timeout);
    void serve();

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    std::atomic<bool> stop_{false};
    std::thread server_;  // rank 0 only
};

} // namespace xmc::conformance
