// xmc-selftest: fails GRAPH-CAPTURE
// xmc-selftest: base cuda
// xmc-selftest: filter GRAPH-*
// xmc-selftest: timeout 30
// xmc-selftest: ctest-timeout 120
// Bug (GRAPH-CAPTURE, on CUDA): graph_destroy hands the graph to a reaper
// thread and returns at once, trusting cuGraphExecDestroy to wait for a launch
// in flight -- which the real driver does not (recorded on an H200, driver 580:
// graph_exec_destroy_while_running_waits is "no"). The caller is told the
// graph is gone while a launch of it still runs. The bug is the destroy step of the CUDA
// GraphOps (close only joins the reapers, so that nothing touches a closed instance).
#include "cuda_broken.hpp"
#include "stream_steps.hpp"

#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace xmc::broken_cuda {
namespace {

std::mutex mu;
std::map<xmc_instance *, std::vector<std::thread>> reapers;

xmc_status destroy(xmc_instance *inst, xmc_graph *g) {
    bool known = false;
    {
        auto *in = static_cast<xmc::cuda::Instance *>(inst);
        std::lock_guard<std::mutex> lock(in->mu);
        known = in->graphs.count(g) != 0;
    }
    auto real = broken_steps::real<be::GraphOps>().destroy;
    if (!known) return real(inst, g);  // not a graph: its refusal
    std::lock_guard<std::mutex> lock(mu);
    reapers[inst].emplace_back([inst, g, real] { real(inst, g); });  // the bug: not waited for
    return XMC_OK;
}

xmc_status close(xmc_instance *inst) {
    std::vector<std::thread> ts;
    {
        std::lock_guard<std::mutex> lock(mu);
        ts.swap(reapers[inst]);
        reapers.erase(inst);
    }
    for (auto &t : ts) t.join();  // nothing may touch the instance once it is closed
    return reference()->close(inst);
}

} // namespace

void plant(xmc_backend &t) {
    broken_steps::steps(xmc::cuda::graph_ops()).destroy = destroy;
    t.close = close;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_graph_destroy_async")
