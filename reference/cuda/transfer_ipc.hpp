// Path IPC of the CUDA affine executor (transfer.cpp; SPEC 8: transfers between GPUs of different
// processes of one node): each rank shares its source with the peers that read from it, and each
// target rank opens its peers' sources in its own context and pulls its segments from them with
// device copies. Nothing crosses the transport but the descriptors; no host staging.
#pragma once
#include "cuda.hpp"
#include "transfer_protocol.hpp"

#include <functional>
#include <string>
#include <vector>

namespace xmc::cuda {

class IpcPath {
public:
    IpcPath(xmc_instance *inst, Driver &d) : inst_(inst), d_(d) {}
    ~IpcPath() { close(false); }
    IpcPath(const IpcPath &) = delete;
    IpcPath &operator=(const IpcPath &) = delete;

    // AFF-PATH: why this rank cannot take path IPC in this call, or "" when it can: the driver's
    // IPC entry points, and a source (if any) that is device memory the driver can share.
    // A driver call that failed on the way sets *native (the rank then fails with its code).
    std::string why_not(const xmc_transfer_args &a, int64_t *native);
    // Step 5, first, on every rank of a group in which any pair takes path IPC (every rank takes
    // part in its exchange, whatever fails on it): shares this rank's source with its readers and
    // opens the sources of the peers it reads from, in the current context; `device` gets access
    // to VMM memory mapped here.
    xmc_status open(const xmc_transfer_args &a, const transfer::Work &w, uint64_t call_tag, CUdevice device);
    // Queues the pulls from every peer on path IPC: copy(the peer's source pointer here, the
    // segment's source view on it, its target view). Statistics as the direct path's.
    using Copy = std::function<xmc_status(char *src, const transfer::View &sv, const transfer::View &tv)>;
    xmc_status pull(const xmc_transfer_args &a, const transfer::Work &w, xmc_transfer_stats &st, const Copy &copy);
    // Closes everything open() opened (handles, mappings, descriptors, sockets). Call once nothing
    // queued reads the peers' sources any more, before the completion vote, on every path, errors
    // included. The first failure, after closing the rest (reported as the call's error when
    // `report`: not over an earlier failure's).
    xmc_status close(bool report = true);
    // open() succeeded and close() has not run since: the peers' sources are open here.
    bool is_open() const { return open_; }

    // What a rank tells the others (all_gather).
    struct Info {
        uint64_t magic;     // kMagic
        int32_t index;      // group position
        int32_t kind;       // Kind
        int32_t failed;     // 1: sharing the source failed (why in reason, the driver's code in native)
        int32_t reserved;
        int64_t native;
        uint64_t offset;    // bytes from the shared range's start to the source's pointer
        uint64_t size;      // bytes of the shared range (VMM: what a reader maps)
        xmc_shard_buffer source;
        CUipcMemHandle handle;  // kind kLegacy
        char reason[96];
    };
    static constexpr uint64_t kMagic = 0x786d632d69706331ull;  // "xmc-ipc1"
    enum Kind : int32_t { kNone = 0, kLegacy = 1, kVmm = 2 };

private:
    struct Share {  // how this rank's source is shared
        Kind kind = kNone;
        CUdeviceptr start = 0;
        size_t size = 0;
        CUresult native = CUDA_SUCCESS;  // the driver call that failed in classify(), if one did
    };
    // A release the driver refused, tried again by the next close() (the destructor's at the
    // latest): a failed cuMemUnmap, cuMemAddressFree or cuMemRelease of a peer's source leaked it
    // for good (the fault sweep between processes).
    struct Leftover {
        enum What { kCloseLegacy, kUnmap, kFree, kRelease } what;
        CUdeviceptr base = 0;
        size_t size = 0;
        CUmemGenericAllocationHandle handle = 0;
    };
    // Calls the driver's release for `l`; keeps it for the next close() when that fails.
    CUresult release(const Leftover &l);
    std::vector<Leftover> leftover_;
    struct Opened {  // a peer's source opened here
        int peer = -1;
        Kind kind = kNone;
        CUdeviceptr base = 0;  // where the shared range starts here
        size_t size = 0;
    };
    std::string classify(const xmc_shard_buffer &b, size_t elem, Share *s);
    xmc_status fail(CUresult r, const std::string &what);
    xmc_status receive_fds(const transfer::Work &w, uint32_t timeout_ms, std::vector<int> &fds);

    xmc_instance *inst_;
    Driver &d_;
    std::vector<Info> info_;      // every rank's, from open()
    std::vector<Opened> opened_;
    int listen_ = -1;             // this rank's socket for the VMM peers' descriptors
    int exported_ = -1;           // this rank's VMM source as a descriptor, until sent
    bool open_ = false;
};

}  // namespace xmc::cuda
