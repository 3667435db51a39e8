// A stream, copy or graph bug of the self-test is one step of the platform's StreamOps or GraphOps
// (reference/common/streams.hpp) replaced in plant(): the entries' checks and everything else
// stay the reference's. `real<Ops>()` keeps the reference's steps, for a bug that wraps the step
// it replaces.
#pragma once
#include "streams.hpp"

namespace xmc::broken_steps {

template <class Ops> Ops &real() {
    static Ops r{};
    return r;
}

// Keeps the reference's steps of `ops` in real<Ops>() and gives the table to change.
template <class Ops> Ops &steps(Ops &ops) {
    real<Ops>() = ops;
    return ops;
}

} // namespace xmc::broken_steps
