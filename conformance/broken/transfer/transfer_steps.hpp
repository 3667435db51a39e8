// A transfer bug of the self-test lies in one named step of the shared protocol
// (transfer::Steps, reference/common/transfer_protocol.hpp), replaced in plant(); everything else
// is the reference's. `real()` keeps the reference's steps, for a bug that wraps the step it
// replaces.
#pragma once
#include "transfer_protocol.hpp"

namespace xmc::broken_transfer {

inline transfer::Steps &steps() { return transfer::steps(); }
inline const transfer::Steps &real() { return transfer::reference_steps(); }

// For a bug whose executor acts on another request than its caller's (the entry changes it and
// calls the reference's): the request the caller made, per rank thread (ranks may be threads).
inline thread_local const xmc_transfer_args *t_caller = nullptr;
struct AsCaller {
    explicit AsCaller(const xmc_transfer_args *a) { t_caller = a; }
    ~AsCaller() { t_caller = nullptr; }
    AsCaller(const AsCaller &) = delete;
    AsCaller &operator=(const AsCaller &) = delete;
};
// Its digest step: the votes carry the digest of the caller's request, so its peers agree with
// it while it acts on the changed one.
inline uint64_t caller_digest(const xmc_transfer_args &a) { return real().digest(t_caller ? *t_caller : a); }

} // namespace xmc::broken_transfer
