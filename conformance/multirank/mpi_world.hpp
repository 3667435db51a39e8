// The MPI world: one rank per MPI process, and every group of a run connected by gloo
// (transport_gloo.hpp). MPI only coordinates the harness: it shares the rendezvous folder, lines the
// ranks up before each run and gathers every rank's failures. Transfers under test never use MPI,
// so a transport that the test breaks cannot break the harness.
#pragma once
#include "transport_world.hpp"

#include <memory>
#include <string>

namespace gloo {
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
} // namespace gloo

namespace xmc::conformance {

class MpiGlooWorld : public World {
public:
    // Gloo's rendezvous store: a FileStore in a fresh temporary folder (one host), or the store over
    // MPI (mpi_store.hpp: several hosts, no shared file system).
    enum class Store { File, Mpi };
    explicit MpiGlooWorld(Store store = Store::File);  // after MPI_Init_thread; collective
    ~MpiGlooWorld() override;  // before MPI_Finalize; collective
    const char *name() const override { return "gloo"; }
    int size() const override { return size_; }
    int rank() const { return rank_; }
    std::vector<std::string> run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms, uint32_t deadline_ms,
                                 const RankBody &body) override;
    // Every case costs a gloo rendezvous per group: fewer cases than in process.
    int property_cases() const override { return 25; }

private:
    int rank_ = 0, size_ = 0;
    uint64_t runs_ = 0;
    std::string folder_;  // the FileStore's fresh temporary folder, made by rank 0 ("" with the MPI store)
    std::shared_ptr<gloo::transport::Device> device_;
    std::unique_ptr<gloo::rendezvous::Store> store_;
};

// Every rank's strings, in rank order, on every rank (MPI_COMM_WORLD).
std::vector<std::string> mpi_all_gather_strings(const std::vector<std::string> &mine);

} // namespace xmc::conformance
