// A slot bug of the self-test is one step of the platform's VmmOps
// (reference/common/slots.hpp) replaced in plant(): everything else is the reference's.
// `real()` keeps the reference's steps, for a bug that wraps the step it replaces.
#pragma once
#include "vmm.hpp"  // reference/host/vmm.hpp

namespace xmc::broken_vmm {

template <class V>
be::VmmOps<V> &real() {
    static be::VmmOps<V> r{};
    return r;
}

// Keeps the reference's steps of `table` in real() and gives the table to change; every instance
// opened from now on takes it.
template <class V>
be::VmmOps<V> &steps(be::VmmOps<V> &table) {
    real<V>() = table;
    return table;
}

inline be::VmmOps<host::Vmm> &host_steps() { return steps(host::vmm_ops()); }

} // namespace xmc::broken_vmm
