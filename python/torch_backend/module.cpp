// SPDX-License-Identifier: MIT
// The Python module `xagg._torch_backend`: ProcessGroupXagg as a torch.distributed.ProcessGroup.
// python/xagg/torch.py registers it as backend "xagg" and builds it from the environment; this
// module only binds the class.
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include "python/client_options.hpp"
#include "python/torch_backend/process_group_xagg.hpp"

namespace py = pybind11;
using xagg::torch_backend::ProcessGroupXagg;

PYBIND11_MODULE(_torch_backend, m)
{
    m.doc() = "The torch.distributed backend 'xagg' (see docs/PYTHON.md)";
    // Its base is torch's own ProcessGroup, so init_process_group and DDP take it as any other.
    py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
    py::class_<ProcessGroupXagg, c10::intrusive_ptr<ProcessGroupXagg>> group(m, "ProcessGroupXagg",
                                                                             base);
    std::apply(
        [&group](auto &&...options) {
            group.def(
                py::init([](int rank, int size, c10::intrusive_ptr<c10d::ProcessGroup> delegate,
                            const std::vector<py::dict> &aggregators,
                            const std::string &local_address, bool owns_job, bool join,
                            unsigned window, unsigned partition_chunks, unsigned timeout_ms,
                            unsigned max_retries, bool autotune, unsigned tune_calls,
                            unsigned tune_trials, bool congestion_control,
                            std::optional<unsigned> delay_target_us, uint32_t local_rank,
                            uint32_t local_ranks, uint16_t port, bool local_first) {
                    if (aggregators.empty())
                        throw py::value_error("the xagg backend needs at least one aggregator");
                    const xagg::ClientOptions o = xagg::python::client_options(
                        aggregators, static_cast<uint32_t>(rank), local_address, join, window,
                        partition_chunks, timeout_ms, max_retries, autotune, tune_calls,
                        tune_trials, congestion_control, delay_target_us, local_rank, local_ranks,
                        port, local_first);
                    xagg::torch_backend::Settings settings;
                    if (owns_job)
                        settings.owned_job = o.aggregators.front();
                    py::gil_scoped_release unlocked;
                    return c10::make_intrusive<ProcessGroupXagg>(rank, size, o, std::move(delegate),
                                                                 std::move(settings));
                }),
                py::arg("rank"), py::arg("size"), py::arg("delegate"), py::arg("aggregators"),
                py::arg("local_address"), py::arg("owns_job") = false, options...);
        },
        xagg::python::client_option_args());
    group
        .def_property_readonly("xagg_allreduces", &ProcessGroupXagg::xagg_allreduces,
                               "all_reduce calls summed through xagg")
        .def("delegated", &ProcessGroupXagg::delegated, "Calls handed to the gloo group, by kind")
        .def_property_readonly("delegate", &ProcessGroupXagg::delegate,
                               "The gloo process group that takes what xagg does not sum");
}
