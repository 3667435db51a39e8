// The gloo transport: the ranks of a group are processes on one host, connected by gloo's TCP
// transport on the loopback interface. Every group is a gloo context of its own, made by a
// rendezvous through a key-value store under a prefix unique to that group. A group therefore never
// depends on a default world (AFF-GROUP), and a failed group never affects the next one.
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
} // namespace gloo

namespace xmc::conformance {

// gloo's TCP device, one per process, shared by its groups: on 127.0.0.1, or on the interface
// XMC_GLOO_IFACE names (ranks on several hosts: multirank/run_two_hosts.sh's network namespaces).
std::shared_ptr<gloo::transport::Device> gloo_device();

// This process's end of one group. send and recv give up after op_timeout_ms; all_gather after
// the timeout it is given. After a timeout gloo closes every connection of the group, so any
// later operation fails at once. Calls return 0 or an xmc_status.
class GlooGroup {
public:
    // Joins the group as member `index` of `size`; throws when the others have not all joined
    // within a minute.
    GlooGroup(const std::shared_ptr<gloo::transport::Device> &device, gloo::rendezvous::Store &store,
              const std::string &prefix, int index, int size, uint32_t op_timeout_ms);
    ~GlooGroup();
    GlooGroup(const GlooGroup &) = delete;
    GlooGroup &operator=(const GlooGroup &) = delete;

    const xmc_transport *transport() const { return &transport_; }

private:
    static int send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag);
    static int recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag);
    static int all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms);

    std::shared_ptr<gloo::Context> context_;  // null for a group of one
    const int size_;
    const uint32_t op_timeout_ms_;
    uint32_t gather_tag_ = 0;  // gloo collectives of one group are told apart by tag
    xmc_transport transport_;
};

} // namespace xmc::conformance
