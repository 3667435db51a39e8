/* Control API of the fake NCCL (libxmc_fake_nccl.so).
 *
 * The fake stands in for libnccl.so.2: a program (the xmc CUDA backend's NCCL path) that dlopens
 * the library named by XMC_NCCL_LIBRARY and resolves the entries of nccl.h (ncclGetUniqueId,
 * ncclCommInitRank[Config], ncclSend, ncclRecv, ncclGroupStart/End, ...) gets communicators whose
 * ranks are processes or threads, connected over Unix domain sockets (abstract names derived from
 * the unique id), moving host memory (the CUDA fake's device memory is host memory).
 *
 * Behaviour worth knowing:
 *   - Point-to-point is a rendezvous, like NCCL's: a send moves its bytes only once the peer has
 *     posted the matching receive. Sends and receives that must progress together have to be in one
 *     ncclGroupStart/ncclGroupEnd (two ranks that each send first, ungrouped, deadlock, as on NCCL).
 *     Sizes of matching operations must agree (else ncclInvalidUsage).
 *   - Each communicator has a worker thread that runs its init and its groups in order.
 *   - Stream order, as on NCCL: when the process has loaded the fake CUDA driver (the library
 *     XMC_CUDA_DRIVER names, as the xmc CUDA backend loads it), each group's work is queued on
 *     the stream of its ncclSend/ncclRecv (one stream per communicator in a group, else
 *     ncclInvalidUsage; 0 is the current context's default stream) through the driver's
 *     xmc_fake_cuda_stream_enqueue: it starts only once the stream's earlier work is done (a copy
 *     that fills the send buffer), and the stream goes on only once it is done. ncclGroupEnd
 *     returns once the work is queued (a non-blocking communicator answers ncclInProgress, and
 *     ncclCommGetAsyncError then answers at once: nothing is pending on the communicator); the
 *     data have moved only when cuStreamSynchronize, cuStreamQuery or an event recorded after
 *     the group say the stream got past it. An error met while moving (a peer gone) becomes the
 *     communicator's asynchronous error and the stream goes on. A stream that cannot take the
 *     work: ncclUnhandledCudaError. exec_delay (below) holds a group back on its stream, so an
 *     executor that takes a round as done before its stream passed it is seen.
 *   - Without the fake CUDA driver loaded (the fake's own tests), groups run unordered, as soon
 *     as the worker gets to them: a non-blocking communicator answers ncclInProgress from init
 *     and ncclGroupEnd, and ncclCommGetAsyncError says ncclInProgress until the work is done
 *     (then ncclSuccess or the error); a blocking one waits in the call.
 *   - A peer that closes its connection (exits, aborts) fails the work with ncclRemoteError.
 *     ncclCommAbort stops the worker at once (the communicator is gone; a group still queued
 *     on a stream is dropped and its stream goes on); ncclCommDestroy waits for queued work
 *     first (also for streams to reach it).
 *
 * ---- configuration (environment, read when the library loads)
 *   XMC_FAKE_NCCL_FAULTS    a fault script (fakes/README.md). ENTRY is an nccl* entry the fake
 *                           exports (ncclGetErrorString excepted); CODE an ncclResult_t name
 *                           (ncclSystemError, ...) or a number 1..7; size_limit sees the bytes of
 *                           ncclSend and ncclRecv; exhaust counts the live communicators made by
 *                           ncclCommInitRank / ncclCommInitRankConfig; exec_delay applies to
 *                           ncclSend, ncclRecv and ncclGroupEnd: the group's work, once its
 *                           stream reached it, waits the sum of its calls' delays before it
 *                           moves anything (the calls return at once). A malformed script makes
 *                           every entry answer ncclInvalidUsage (the message on stderr).
 *   XMC_FAKE_NCCL_TRACE     if set and not "0", every call is printed to stderr
 */
#ifndef XMC_FAKE_NCCL_CONTROL_H
#define XMC_FAKE_NCCL_CONTROL_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Installs a fault script (NULL or "" clears the rules): 0, or -1 with the message in
 * xmc_fake_nccl_last_error(). Rules count calls from the moment they are installed. */
int xmc_fake_nccl_set_faults(const char *script);
const char *xmc_fake_nccl_last_error(void);
/* The ledger: communicators made and neither destroyed nor aborted. */
uint64_t xmc_fake_nccl_live_comms(void);
/* Calls of an entry since the library loaded (any outcome). */
uint64_t xmc_fake_nccl_calls(const char *entry);

#ifdef __cplusplus
}
#endif
#endif
