// SPDX-License-Identifier: MIT
// xaggd's configuration: one struct, one CLI11 definition. Every key of the config file is also a
// command-line flag of the same name (--key), so `xaggd --help` lists them all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xagg/defaults.h"
#include "xagg/fastpath.h"
#include "xagg/proto.h"

namespace CLI {
class App;
}

namespace xagg::daemon {

struct Config {
    std::string interface;              // NIC to attach the fast path to
    std::string datapath = "xdp";       // xdp (fast path + host PS) | host (host PS only)
    std::string xdp_mode = "native";    // native | skb
    uint16_t port = XAGG_DEFAULT_PORT;  // UDP port of xagg traffic
    // Values per chunk of a job created without chunk_elems: auto (2048 where the interface's
    // MTU carries jumbo chunks, else 768), 768 or 2048.
    std::string default_chunk_elems = "auto";
    uint32_t max_positions =
        XAGG_DEFAULT_MAX_POSITIONS;  // fast-path capacity, in slot positions (768 values)
    uint32_t max_jobs = XAGG_DEFAULT_MAX_JOBS;   // job table capacity
    uint32_t min_job_positions = 256;            // fast-path memory guaranteed to each job
    std::string memory_policy = "benefit";       // benefit | fair | equal | fcfs
    std::string bpffs_dir = "/sys/fs/bpf/xagg";  // where maps are pinned
    std::string state_dir = "/var/lib/xagg";     // job table kept across restarts
    std::string control_socket = XAGG_DEFAULT_CONTROL_SOCKET;
    // The host path's slots, kept across a restart (a tmpfs).
    std::string host_slots_dir = "/run/xagg/slots";
    std::string control_socket_mode = "0660";  // octal file mode of the socket
    std::string control_tcp_address;         // HOST:PORT of the API for remote workers; empty: off
    std::string control_token_file;          // file holding the token TCP requests must carry
    std::string control_tenants_file;        // tenants' tokens, each for its own jobs only
    std::string control_tls_cert;            // PEM certificate (chain) of the TCP API's TLS
    std::string control_tls_key;             // its PEM private key
    std::string control_tls_client_ca;       // when set: clients need a certificate it signed
    bool control_tcp_plaintext = false;      // TCP without TLS: only when said explicitly
    uint32_t control_max_connections = 256;  // open control connections at once
    uint32_t control_request_timeout_ms = 10000;     // to send a whole request line
    std::string group_base = "239.77.0.0";           // job N's results go to group_base + N
    std::string metrics_address = "127.0.0.1:9873";  // Prometheus /metrics; empty: off
    unsigned host_ps_threads = 2;                    // threads of the host-side parameter server
    std::string log_level = "info";                  // trace | debug | info | warn | error
    // Several nodes (docs/SCHEDULING.md): all empty/default = one node, no etcd.
    std::string etcd_endpoint;  // http://HOST:PORT of etcd; empty: no cluster
    std::string etcd_prefix = "/xagg";
    int etcd_lease_ttl = 5;         // seconds a dead node stays registered
    std::string node_name;          // default: the host name
    std::string advertise_address;  // IPv4 workers send this node's chunks to
    double node_rate = 4e6;         // contributions/s, the node's speed for placement
    std::string netns;              // `ip netns` namespace to run in (tests, demos)
    std::string config_file;        // the file these came from, if any
};

// Every key of the config file with its value in `config`, as text, in make_cli()'s order.
std::vector<std::pair<std::string, std::string>> config_values(const Config &config);

// A key whose value differs between two configs, with both values as text ("" when empty).
struct ConfigChange {
    std::string key, before, after;
};
std::vector<ConfigChange> changed_keys(const Config &before, const Config &after);

// The CLI11 application that parses into `config`. Shared by the daemon and `config check`.
std::unique_ptr<CLI::App> make_cli(Config &config);

// Checks a config file line by line: unknown keys and bad values are reported as
// "FILE:LINE: reason", one string per problem. Empty when the file is good.
std::vector<std::string> check_config_file(const std::string &path);

// Checks what no single key can: combinations, and values that need parsing.
std::vector<std::string> check_config(const Config &config);

// Everything xaggd would refuse to start with in this config file, in xaggd's words: its lines
// (check_config_file), then the whole (check_config), then the token file it names. Empty when
// the file is good. What `xaggctl config check` runs.
// `parsed`, when given, receives the config the file holds (when it parses).
std::vector<std::string> validate_config_file(const std::string &path, Config *parsed = nullptr);

// The chunk size of a job created without one, for `setting` (default_chunk_elems) on a node
// whose interface carries jumbo chunks or not: auto takes the largest that fits.
uint32_t resolve_default_chunk_elems(const std::string &setting, bool jumbo_fits);

// A file of secrets (`key` names it in the message): it must exist and not be readable by
// everyone. Throws std::runtime_error saying which.
void require_private_file(const std::string &key, const std::string &path);

// The control API's token: the first line of the file, trailing blanks removed. A file anyone
// may read is no secret and is refused, as is a token shorter than 16 characters. Throws
// std::runtime_error saying which.
std::string read_token_file(const std::string &path);

}  // namespace xagg::daemon
