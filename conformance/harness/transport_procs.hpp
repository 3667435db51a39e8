// The process world of `xmc qualify --procs N` (SPEC 6, SPEC 8): N forked `xmc run` children on one
// host, one rank each, every group of a run connected by gloo over TCP loopback (transport_gloo.hpp)
// through a FileStore in a fresh temporary folder that qualify makes. No MPI: the harness's own
// coordination (the line-up before each run, every rank's failures gathered after it, the shared
// seed) goes over a gloo group of its own, "harness", so a transport that a test breaks cannot
// break the harness.
//
// Built as a module of its own, libxmc_procs_world.so, that `xmc run` loads only as a rank: the
// runner itself then needs no libgloo, which GPU machines lack (hardware/run_h200_session.sh), and a
// module that does not load is one more reason the process world cannot start, said as such.
#pragma once
#include "transport_world.hpp"

#include <cstddef>
#include <cstdint>

// The module's one entry: joins the world as rank `rank` of `size` through the FileStore in
// `store_dir`, and agrees on rank 0's *seed (every rank's *seed becomes rank 0's). Returns the world
// (delete it before exit, on every rank: its destructor lines the ranks up), or nullptr with why in
// error[errlen].
extern "C" xmc::conformance::World *xmc_procs_world_open(int rank, int size, const char *store_dir, uint64_t *seed,
                                                        char *error, size_t errlen);
#define XMC_PROCS_WORLD_ENTRY "xmc_procs_world_open"
#define XMC_PROCS_WORLD_LIBRARY "libxmc_procs_world.so"
