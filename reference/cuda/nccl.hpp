// NCCL, resolved at run time (the NCCL path of the affine executor, transfer_nccl.cpp): dlopen of
// XMC_NCCL_LIBRARY (default libnccl.so.2) and dlsym of the entries the path uses, with the types of
// the toolkit's nccl.h. Nothing is linked: where the library is absent or lacks an entry, the NCCL
// path is unsupported with the reason, and the backend loads and works as before.
#pragma once
#include <nccl.h>

#include <string>

namespace xmc::cuda {

// X(name) for every entry the path needs.
#define XMC_NCCL_ENTRIES(X)                                                                          \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)    \
    X(ncclCommGetAsyncError) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)              \
    X(ncclGetErrorString)
// Optional: a non-blocking communicator (NCCL 2.14 on), so that creating one never blocks a rank
// whose peer died; without it, ncclCommInitRank.
#define XMC_NCCL_OPTIONAL(X) X(ncclCommInitRankConfig)

struct Nccl {
#define XMC_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
    XMC_NCCL_ENTRIES(XMC_NCCL_MEMBER)
    XMC_NCCL_OPTIONAL(XMC_NCCL_MEMBER)
#undef XMC_NCCL_MEMBER
    std::string library;  // what was loaded (or tried)
    bool usable = false;  // loaded, every entry of XMC_NCCL_ENTRIES found, ncclGetVersion answered
    std::string why;      // why not usable
    int version = 0;      // ncclGetVersion's answer

    // Loaded on first use, once per process.
    static Nccl &get();
    // ncclGetErrorString's text, or "ncclResult_t".
    const char *text(ncclResult_t r) const;
};

} // namespace xmc::cuda
