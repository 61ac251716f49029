// SPDX-License-Identifier: MIT
// How Python gives the client its options, read once for every module that takes them
// (xagg._xagg's Client and create_job, the torch backend's ProcessGroupXagg), so a key or a
// keyword means the same everywhere: an aggregator is a dict with the keys of docs/PYTHON.md
// ("address", "job", "socket", "host", "token", "ca", "cert", "key", "plaintext", "weight",
// "job_key"), and the client's keyword arguments are ClientOptions's fields, with its defaults.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

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

// A count from the environment (torchrun's LOCAL_RANK, LOCAL_WORLD_SIZE), or `fallback` when it
// is unset or not a number.
inline uint32_t environment_count(const char *name, uint32_t fallback)
{
    const char *v = std::getenv(name);
    if (!v || !*v)
        return fallback;
    char *end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    return *end || n > UINT32_MAX ? fallback : static_cast<uint32_t>(n);
}

// The keyword arguments client_options() takes after the aggregators, rank and local address,
// in its order, with a default ClientOptions's defaults: the tail of every py::arg list that
// builds a client (each module passes them with std::apply). Ranks started by torchrun share a
// host by its LOCAL_RANK and LOCAL_WORLD_SIZE unless told otherwise, so each picks a port of its
// own by itself (read when the module is imported).
inline auto client_option_args()
{
    namespace py = pybind11;
    const ClientOptions d;
    return std::make_tuple(
        py::arg("join") = d.join, py::arg("window") = d.window,
        py::arg("partition_chunks") = d.partition_chunks,
        py::arg("timeout_ms") = static_cast<unsigned>(d.timeout.count()),
        py::arg("max_retries") = d.max_retries, py::arg("autotune") = d.autotune,
        py::arg("tune_calls") = d.tune_calls, py::arg("tune_trials") = d.tune_trials,
        py::arg("congestion_control") = d.congestion_control,
        py::arg("delay_target_us") = py::none(),
        py::arg("local_rank") = environment_count("LOCAL_RANK", d.local_rank),
        py::arg("local_ranks") = environment_count("LOCAL_WORLD_SIZE", d.local_ranks),
        py::arg("port") = d.port, py::arg("local_first") = d.local_first);
}

// ClientOptions from the keyword arguments of client_option_args() and what precedes them.
inline ClientOptions client_options(const std::vector<pybind11::dict> &aggregators, uint32_t rank,
                                    const std::string &local_address, bool join, unsigned window,
                                    unsigned partition_chunks, unsigned timeout_ms,
                                    unsigned max_retries, bool autotune, unsigned tune_calls,
                                    unsigned tune_trials, bool congestion_control,
                                    std::optional<unsigned> delay_target_us, uint32_t local_rank,
                                    uint32_t local_ranks, uint16_t port, bool local_first)
{
    ClientOptions o;
    for (const pybind11::dict &d : aggregators)
        o.aggregators.push_back(aggregator_from_dict(d));
    o.rank = rank;
    o.local_address = local_address;
    o.join = join;
    o.window = window;
    o.partition_chunks = partition_chunks;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    o.max_retries = max_retries;
    o.autotune = autotune;
    o.tune_calls = tune_calls;
    o.tune_trials = tune_trials;
    o.congestion_control = congestion_control;
    if (delay_target_us)
        o.delay_target = std::chrono::microseconds(*delay_target_us);
    o.local_rank = local_rank;
    o.local_ranks = local_ranks;
    o.port = port;
    o.local_first = local_first;
    return o;
}

}  // namespace xagg::python
