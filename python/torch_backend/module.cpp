// SPDX-License-Identifier: MIT
// The Python module `xagg._torch_backend`: ProcessGroupXagg as a torch.distributed.ProcessGroup.
// python/xagg/torch.py registers it as backend "xagg" and builds it from the environment; this
// module only binds the class.
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include "python/aggregator_dict.hpp"
#include "python/torch_backend/process_group_xagg.hpp"

namespace py = pybind11;
using xagg::torch_backend::ProcessGroupXagg;

PYBIND11_MODULE(_torch_backend, m)
{
    m.doc() = "The torch.distributed backend 'xagg' (see docs/PYTHON.md)";
    // Its base is torch's own ProcessGroup, so init_process_group and DDP take it as any other.
    py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
    py::class_<ProcessGroupXagg, c10::intrusive_ptr<ProcessGroupXagg>>(m, "ProcessGroupXagg", base)
        .def(py::init([](int rank, int size, c10::intrusive_ptr<c10d::ProcessGroup> delegate,
                         const std::vector<py::dict> &aggregators, const std::string &local_address,
                         bool owns_job, unsigned window, unsigned partition_chunks,
                         unsigned timeout_ms, unsigned max_retries, bool autotune,
                         bool congestion_control) {
                 xagg::ClientOptions o;
                 for (const py::dict &d : aggregators)
                     o.aggregators.push_back(xagg::python::aggregator_from_dict(d));
                 if (o.aggregators.empty())
                     throw py::value_error("the xagg backend needs at least one aggregator");
                 o.rank = static_cast<uint32_t>(rank);
                 o.local_address = local_address;
                 o.window = window;
                 o.partition_chunks = partition_chunks;
                 o.timeout = std::chrono::milliseconds(timeout_ms);
                 o.max_retries = max_retries;
                 o.autotune = autotune;
                 o.congestion_control = congestion_control;
                 xagg::torch_backend::Settings settings;
                 if (owns_job)
                     settings.owned_job = o.aggregators.front();
                 py::gil_scoped_release unlocked;
                 return c10::make_intrusive<ProcessGroupXagg>(rank, size, o, std::move(delegate),
                                                              std::move(settings));
             }),
             py::arg("rank"), py::arg("size"), py::arg("delegate"), py::arg("aggregators"),
             py::arg("local_address"), py::arg("owns_job") = false, py::arg("window") = 512,
             py::arg("partition_chunks") = 32, py::arg("timeout_ms") = 20,
             py::arg("max_retries") = 200, py::arg("autotune") = true,
             py::arg("congestion_control") = true)
        .def_property_readonly("xagg_allreduces", &ProcessGroupXagg::xagg_allreduces,
                               "all_reduce calls summed through xagg")
        .def("delegated", &ProcessGroupXagg::delegated, "Calls handed to the gloo group, by kind")
        .def_property_readonly("delegate", &ProcessGroupXagg::delegate,
                               "The gloo process group that takes what xagg does not sum");
}
