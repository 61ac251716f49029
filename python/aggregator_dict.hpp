// SPDX-License-Identifier: MIT
// How Python names an aggregator: a dict with the keys of docs/PYTHON.md ("address", "job",
// "socket", "host", "token", "ca", "cert", "key", "plaintext", "weight", "job_key"), read into
// an xagg::Aggregator. One reader for every module that takes one (xagg._xagg's Client and
// create_job, the torch backend), so a key means the same everywhere.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "xagg/client.hpp"

namespace xagg::python {

inline Aggregator aggregator_from_dict(const pybind11::dict &d)
{
    namespace py = pybind11;
    Aggregator a;
    for (auto [k, v] : d) {
        const std::string key = py::str(k);
        if (key == "address")
            a.address = py::str(v);
        else if (key == "job")
            a.job = v.cast<uint32_t>();
        else if (key == "socket")
            a.control_socket = py::str(v);
        else if (key == "host")
            a.control_host = py::str(v);
        else if (key == "token")
            a.token = py::str(v);
        else if (key == "ca")
            a.tls.ca_file = py::str(v);
        else if (key == "cert")
            a.tls.cert_file = py::str(v);
        else if (key == "key")
            a.tls.key_file = py::str(v);
        else if (key == "plaintext")
            a.tls.plaintext = v.cast<bool>();
        else if (key == "weight")
            a.weight = v.cast<double>();
        else if (key == "job_key")
            a.key = py::str(v);
        else
            throw py::value_error("unknown aggregator key '" + key + "'");
    }
    return a;
}

}  // namespace xagg::python
