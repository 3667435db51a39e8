// A registration bug of the self-test is one step of the platform's RegOps
// (reference/common/registration.hpp) replaced in plant(): everything else is the reference's.
// `real()` keeps the reference's steps, for a bug that wraps the step it replaces.
#pragma once
#include "registration.hpp"

#include <cstring>

namespace xmc::broken_reg {

inline be::RegOps &real() {
    static be::RegOps r{};
    return r;
}

// Keeps the reference's steps of `regs` in real() and gives the table to change.
inline be::RegOps &steps(be::Registrations &regs) {
    real() = regs.ops;
    return regs.ops;
}

// Where a step is called from: reg_register, reg_unregister, close, reg_query, pin_alloc, pin_free.
inline bool is(const char *call, const char *name) { return std::strcmp(call, name) == 0; }

// A release step that, called from `Call`, releases only a range's first chunk and answers
// success for the others (cuda_close_first_chunk_only, cuda_unreg_first_chunk_only).
template <const char *Call> int64_t release_first_chunk_only(const char *call, void *ctx, void *base, void *chunk,
                                                             size_t bytes) {
    if (is(call, Call) && chunk != base) return 0;  // the bug: chunk 1 stands for all
    return real().release(call, ctx, base, chunk, bytes);
}

} // namespace xmc::broken_reg
