// SPDX-License-Identifier: MIT
// The Python module `xagg._xagg`: the client library for Python. All-reduces any writable,
// contiguous float32 or int32 buffer in place (numpy arrays, and CPU torch tensors through
// tensor.numpy(), which shares their memory: no copy). The GIL is released while waiting.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "python/client_options.hpp"
#include "xagg/client.hpp"

namespace py = pybind11;

namespace {

// The buffer, checked, with the object that owns it kept alive as long as needed.
struct Held {
    py::buffer_info info;
    py::object owner;
};

Held writable(py::object obj, char *format)
{
    py::buffer buffer = py::reinterpret_borrow<py::buffer>(obj);
    py::buffer_info info = buffer.request(true);
    if (info.itemsize != 4 || (info.format != "f" && info.format != "i" && info.format != "l" &&
                               info.format != "=f" && info.format != "<f" && info.format != "=i"))
        throw py::type_error("xagg all-reduces float32 or int32 buffers, not '" + info.format +
                             "'");
    py::ssize_t expect = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; d--) {
        if (info.shape[d] > 1 && info.strides[d] != expect)
            throw py::value_error("xagg all-reduces contiguous buffers only");
        expect *= info.shape[d];
    }
    *format = info.format.back() == 'f' ? 'f' : 'i';
    return {std::move(info), std::move(obj)};
}

py::dict report(const xagg::AllReduceReport &r)
{
    py::dict d;
    d["chunks"] = r.chunks;
    d["retransmits"] = r.retransmits;
    d["early_retransmits"] = r.early_retransmits;
    d["credit_cuts"] = r.credit_cuts;
    d["marked_chunks"] = r.marked_chunks;
    d["fallback_chunks"] = r.fallback_chunks;
    d["nonfinite_blocks"] = r.nonfinite_blocks;
    d["partial_chunks"] = r.partial_chunks;
    d["contributors"] = r.contributors;
    d["seconds"] = r.seconds;
    d["window"] = r.window;
    d["partition_chunks"] = r.partition_chunks;
    return d;
}

// An all-reduce in flight, holding its buffer.
struct Pending {
    xagg::AllReduce op;
    std::shared_ptr<Held> held;
    py::dict wait()
    {
        xagg::AllReduceReport r;
        {
            py::gil_scoped_release unlocked;
            r = op.wait();
        }
        held.reset();
        return report(r);
    }
    bool ready() const { return const_cast<xagg::AllReduce &>(op).ready(); }
};

// Starts summing `buffer` in place. Without the GIL: the first call waits for every worker to
// join (the client's rendezvous), and each call scans the buffer for its block exponents.
Pending begin(xagg::Client &c, py::object buffer, int priority)
{
    char format;
    auto held = std::make_shared<Held>(writable(std::move(buffer), &format));
    const auto n = static_cast<size_t>(held->info.size);
    py::gil_scoped_release unlocked;
    xagg::AllReduce op =
        format == 'f'
            ? c.allreduce_async(std::span<float>(static_cast<float *>(held->info.ptr), n), priority)
            : c.allreduce_async(std::span<int32_t>(static_cast<int32_t *>(held->info.ptr), n),
                                priority);
    return Pending{std::move(op), held};
}

const char *kind_name(xagg::ClientError::Kind k)
{
    switch (k) {
    case xagg::ClientError::Kind::unreachable: return "unreachable";
    case xagg::ClientError::Kind::refused: return "refused";
    case xagg::ClientError::Kind::evicted: return "evicted";
    case xagg::ClientError::Kind::job_deleted: return "job_deleted";
    case xagg::ClientError::Kind::timeout: return "timeout";
    case xagg::ClientError::Kind::closed: return "closed";
    case xagg::ClientError::Kind::invalid: return "invalid";
    }
    return "unknown";
}

}  // namespace

PYBIND11_MODULE(_xagg, m)
{
    m.doc() = "xagg client: all-reduce through xagg aggregators (see docs/PYTHON.md)";
    static py::exception<xagg::ClientError> error(m, "ClientError", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const xagg::ClientError &e) {
            // args: (message, kind), kind one of unreachable, refused, evicted, ...
            PyErr_SetObject(error.ptr(), py::make_tuple(e.what(), kind_name(e.kind())).ptr());
        }
    });

    m.def(
        "create_job",
        [](const py::dict &aggregator, uint32_t workers, uint64_t gradient_elems,
           uint32_t chunk_elems) {
            const xagg::Aggregator a = xagg::python::aggregator_from_dict(aggregator);
            py::gil_scoped_release unlocked;
            return xagg::create_job(a, {workers, gradient_elems, chunk_elems});
        },
        py::arg("aggregator"), py::arg("workers"), py::arg("gradient_elems"),
        py::arg("chunk_elems") = 0,
        "Create a job on the aggregator's daemon (as `xaggctl job create`); returns its id");
    m.def(
        "delete_job",
        [](const py::dict &aggregator) {
            const xagg::Aggregator a = xagg::python::aggregator_from_dict(aggregator);
            py::gil_scoped_release unlocked;
            xagg::delete_job(a);
        },
        py::arg("aggregator"), "Delete the aggregator dict's job on its daemon");

    py::class_<Pending>(m, "AllReduce")
        .def("wait", &Pending::wait, "Block until summed; the report as a dict")
        .def("ready", &Pending::ready);

    py::class_<xagg::Client> client(m, "Client");
    std::apply(
        [&client](auto &&...options) {
            client.def(py::init([](const std::vector<py::dict> &aggregators, uint32_t rank,
                                   const std::string &local_address, bool join, unsigned window,
                                   unsigned partition_chunks, unsigned timeout_ms,
                                   unsigned max_retries, bool autotune, unsigned tune_calls,
                                   unsigned tune_trials, bool congestion_control,
                                   std::optional<unsigned> delay_target_us, uint32_t local_rank,
                                   uint32_t local_ranks, uint16_t port, bool local_first) {
                           const xagg::ClientOptions o = xagg::python::client_options(
                               aggregators, rank, local_address, join, window, partition_chunks,
                               timeout_ms, max_retries, autotune, tune_calls, tune_trials,
                               congestion_control, delay_target_us, local_rank, local_ranks, port,
                               local_first);
                           py::gil_scoped_release unlocked;
                           return std::make_unique<xagg::Client>(o);
                       }),
                       py::arg("aggregators"), py::arg("rank"), py::arg("local_address"),
                       options...);
        },
        xagg::python::client_option_args());
    client.def_property_readonly("workers", &xagg::Client::workers)
        .def_property_readonly(
            "tuning",
            [](const xagg::Client &c) {
                xagg::Tuning t = c.tuning();
                py::dict d;
                d["enabled"] = t.enabled;
                d["done"] = t.done;
                d["window"] = t.window;
                d["partition_chunks"] = t.partition_chunks;
                d["trials"] = t.trials;
                d["best_call_seconds"] = t.best_call_seconds;
                d["start_call_seconds"] = t.start_call_seconds;
                return d;
            },
            "What the automatic configuration has chosen so far, as a dict")
        .def("allreduce_async", &begin, py::arg("buffer"), py::arg("priority") = 0,
             "Start summing the buffer in place over every worker; returns an AllReduce")
        .def(
            "allreduce",
            [](xagg::Client &c, py::object buffer, int priority) {
                return begin(c, std::move(buffer), priority).wait();
            },
            py::arg("buffer"), py::arg("priority") = 0,
            "Sum the buffer in place over every worker; the report as a dict");
}
