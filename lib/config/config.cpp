// SPDX-License-Identifier: MIT
#include "lib/config/config.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <type_traits>
#include <sstream>
#include <stdexcept>

#include "lib/config/tenants.hpp"

namespace xagg::daemon {

namespace {

// HOST:PORT, or empty.
std::string host_port_or_empty(const std::string &v)
{
    size_t colon = v.rfind(':');
    if (v.empty())
        return {};
    if (colon == std::string::npos || colon + 1 == v.size() || colon + 6 < v.size() ||
        v.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
        std::stoul(v.substr(colon + 1)) > 65535)
        return "must be HOST:PORT";
    return {};
}

}  // namespace

std::unique_ptr<CLI::App> make_cli(Config &c)
{
    auto app = std::make_unique<CLI::App>(
        "xaggd: the xagg aggregation daemon. Loads and attaches the XDP fast path, owns its "
        "maps and the job table, and serves the control API.\n\n"
        "Every option can also be set in the config file (--config), as `key = value`, one per "
        "line, '#' starts a comment.");
    app->set_config("--config", "", "Config file (TOML-style key = value lines)");
    app->allow_config_extras(CLI::config_extras_mode::error);
    app->add_option("--interface", c.interface, "NIC to attach the XDP fast path to");
    app->add_option("--datapath", c.datapath,
                    "xdp: the XDP fast path with the host parameter server behind it; host: the "
                    "host parameter server alone, for nodes where XDP cannot attach")
        ->check(CLI::IsMember({"xdp", "host"}))
        ->capture_default_str();
    app->add_option("--xdp_mode", c.xdp_mode,
                    "XDP attach mode; skb only where the driver lacks native XDP")
        ->check(CLI::IsMember({"native", "skb"}))
        ->capture_default_str();
    app->add_option("--default_chunk_elems", c.default_chunk_elems,
                    "Values per chunk of a job created without chunk_elems: auto (2048 where the "
                    "interface's MTU carries jumbo chunks, else 768), 768 or 2048")
        ->check(CLI::IsMember(std::vector<std::string>{"auto", std::to_string(XAGG_CHUNK_ELEMS),
                                                       std::to_string(XAGG_JUMBO_CHUNK_ELEMS)}))
        ->capture_default_str();
    app->add_option("--port", c.port, "UDP port of xagg traffic")
        ->check(CLI::Range(1, 65535))
        ->capture_default_str();
    // The memory keys count slot positions (768 values each; a 2048-value chunk takes three).
    // Before they were named so they were max_chunks and min_job_chunks: those names stay
    // accepted, as aliases of the same option.
    app->add_option("--max_positions,--max_chunks", c.max_positions,
                    "Fast-path capacity in slot positions of 768 values (3 KiB; a 2048-value "
                    "chunk takes 3). Alias: max_chunks")
        ->check(CLI::Range(1u, 1u << 30))
        ->capture_default_str();
    app->add_option("--max_jobs", c.max_jobs, "Capacity of the job table")
        ->check(CLI::Range(1u, 65536u))
        ->capture_default_str();
    app->add_option("--min_job_positions,--min_job_chunks", c.min_job_positions,
                    "Fast-path slot positions guaranteed to each job while the guarantees fit; "
                    "the rest is shared by weight. Alias: min_job_chunks")
        ->check(CLI::Range(0u, 1u << 30))
        ->capture_default_str();
    app->add_option("--memory_policy", c.memory_policy,
                    "How fast-path memory is divided between jobs: benefit (the jobs that gain "
                    "most per remaining time first), fair (by weight), equal, fcfs")
        ->check([](const std::string &v) {
            if (v == "hashed")
                return std::string(
                    "hashed is the simulator's ATP baseline: xaggd gives each job "
                    "a region of its own; use benefit, fair, equal or fcfs");
            return std::string(v == "benefit" || v == "fair" || v == "equal" || v == "fcfs"
                                   ? ""
                                   : "must be one of benefit, fair, equal, fcfs");
        })
        ->capture_default_str();
    app->add_option("--bpffs_dir", c.bpffs_dir, "bpffs directory the maps are pinned in")
        ->capture_default_str();
    app->add_option("--state_dir", c.state_dir, "Directory of the job table kept across restarts")
        ->capture_default_str();
    app->add_option("--host_slots_dir", c.host_slots_dir,
                    "Directory (a tmpfs) of the host path's slots, kept across restarts")
        ->capture_default_str();
    app->add_option("--control_socket", c.control_socket, "Unix socket of the control API")
        ->capture_default_str();
    app->add_option("--control_socket_mode", c.control_socket_mode,
                    "Octal file mode of the control socket (who may administer xaggd)")
        ->check([](const std::string &v) {
            if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos)
                return std::string("must be an octal file mode such as 0660");
            return std::string();
        })
        ->capture_default_str();
    app->add_option("--group_base", c.group_base,
                    "IPv4 multicast address; job N's results go to group_base + N")
        ->check([](const std::string &v) {
            in_addr a{};
            if (inet_pton(AF_INET, v.c_str(), &a) != 1 || !IN_MULTICAST(ntohl(a.s_addr)))
                return std::string("must be an IPv4 multicast address");
            return std::string();
        })
        ->capture_default_str();
    app->add_option("--metrics_address", c.metrics_address,
                    "HOST:PORT of the Prometheus /metrics endpoint; empty turns it off")
        ->check(host_port_or_empty)
        ->capture_default_str();
    app->add_option("--control_tcp_address", c.control_tcp_address,
                    "HOST:PORT of the control API over TCP, for workers on other hosts; empty "
                    "turns it off. Requests must carry the token of control_token_file")
        ->check(host_port_or_empty);
    app->add_option("--control_token_file", c.control_token_file,
                    "File whose first line is the token TCP requests must carry");
    app->add_option("--control_tenants_file", c.control_tenants_file,
                    "File of tenant tokens (NAME FIRST-LAST TOKEN a line): each may manage only "
                    "the jobs whose ids are in its range");
    app->add_option("--control_tls_cert", c.control_tls_cert,
                    "PEM certificate (chain) the TCP control API presents (TLS)");
    app->add_option("--control_tls_key", c.control_tls_key, "PEM private key of control_tls_cert");
    app->add_option("--control_tls_client_ca", c.control_tls_client_ca,
                    "PEM CA: TCP clients must present a certificate it signed (optional)");
    app->add_option("--control_tcp_plaintext", c.control_tcp_plaintext,
                    "true: serve the TCP control API without TLS (the token travels in clear)")
        ->capture_default_str();
    app->add_option("--control_max_connections", c.control_max_connections,
                    "Control connections open at once; past that the oldest idle one is closed")
        ->check(CLI::Range(1u, 65536u))
        ->capture_default_str();
    app->add_option("--control_request_timeout_ms", c.control_request_timeout_ms,
                    "Milliseconds a control client has to send a whole request line")
        ->check(CLI::Range(100u, 3600000u))
        ->capture_default_str();
    app->add_option("--host_ps_threads", c.host_ps_threads,
                    "Threads of the host-side parameter server")
        ->check(CLI::Range(1u, 64u))
        ->capture_default_str();
    app->add_option("--log_level", c.log_level, "Log level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
        ->capture_default_str();
    app->add_option("--etcd_endpoint", c.etcd_endpoint,
                    "http://HOST:PORT of etcd, to serve cluster jobs with other nodes; empty: "
                    "this node alone")
        ->check([](const std::string &v) {
            return v.empty() || v.rfind("http://", 0) == 0
                       ? std::string()
                       : std::string("must be http://HOST:PORT (or empty)");
        });
    app->add_option("--etcd_prefix", c.etcd_prefix, "Key prefix of this cluster in etcd")
        ->capture_default_str();
    app->add_option("--etcd_lease_ttl", c.etcd_lease_ttl,
                    "Seconds before a node that stopped renewing its lease counts as dead")
        ->check(CLI::Range(2, 300))
        ->capture_default_str();
    app->add_option("--node_name", c.node_name, "This node's name in etcd (default: host name)");
    app->add_option("--advertise_address", c.advertise_address,
                    "IPv4 workers send this node's chunks to (required with etcd_endpoint)")
        ->check(CLI::ValidIPV4);
    app->add_option("--node_rate", c.node_rate,
                    "Contributions per second this node aggregates: its weight in placement")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app->add_option("--netns", c.netns, "Run inside this `ip netns` network namespace");
    return app;
}

std::vector<std::string> check_config_file(const std::string &path)
{
    std::ifstream in(path);
    if (!in)
        return {path + ": cannot be read"};
    std::vector<std::string> problems;
    std::map<std::string, std::pair<std::string, int>> set_at;  // option -> (key, line) setting it
    std::string line;
    for (int number = 1; std::getline(in, line); number++) {
        size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#' || line[start] == ';')
            continue;
        if (line[start] == '[') {
            problems.push_back(path + ":" + std::to_string(number) +
                               ": sections are not used; write keys at the top level");
            continue;
        }
        if (line.find('=') == std::string::npos) {
            problems.push_back(path + ":" + std::to_string(number) + ": expected `key = value`");
            continue;
        }
        // Each line alone through the real parser: its error is that line's.
        Config scratch;
        auto app = make_cli(scratch);
        std::string key = line.substr(start, line.find_first_of(" \t=", start) - start);
        const CLI::Option *option =
            key == "config" ? nullptr : app->get_option_no_throw("--" + key);
        if (!option) {
            problems.push_back(path + ":" + std::to_string(number) + ": unknown key '" + key + "'");
            continue;
        }
        // A key given twice, or under its name and its alias, would leave the file's meaning to
        // the order of its lines.
        const auto [first, fresh] = set_at.try_emplace(option->get_name(), key, number);
        if (!fresh) {
            const std::string &earlier = first->second.first;
            problems.push_back(path + ":" + std::to_string(number) + ": " + key +
                               " is set already" + (earlier == key ? "" : " as " + earlier) +
                               " on line " + std::to_string(first->second.second));
            continue;
        }
        std::istringstream one(line);
        try {
            app->parse_from_stream(one);
        } catch (const CLI::Error &e) {
            problems.push_back(path + ":" + std::to_string(number) + ": " + e.what());
        }
    }
    return problems;
}

std::vector<std::pair<std::string, std::string>> config_values(const Config &c)
{
    const auto text = [](const auto &v) {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
            return v;
        else if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>)
            return std::string(v ? "true" : "false");
        else {
            std::ostringstream out;
            out << v;
            return out.str();
        }
    };
    return {{"interface", c.interface},
            {"datapath", c.datapath},
            {"xdp_mode", c.xdp_mode},
            {"default_chunk_elems", c.default_chunk_elems},
            {"port", text(c.port)},
            {"max_positions", text(c.max_positions)},
            {"max_jobs", text(c.max_jobs)},
            {"min_job_positions", text(c.min_job_positions)},
            {"memory_policy", c.memory_policy},
            {"bpffs_dir", c.bpffs_dir},
            {"state_dir", c.state_dir},
            {"host_slots_dir", c.host_slots_dir},
            {"control_socket", c.control_socket},
            {"control_socket_mode", c.control_socket_mode},
            {"group_base", c.group_base},
            {"metrics_address", c.metrics_address},
            {"control_tcp_address", c.control_tcp_address},
            {"control_token_file", c.control_token_file},
            {"control_tenants_file", c.control_tenants_file},
            {"control_tls_cert", c.control_tls_cert},
            {"control_tls_key", c.control_tls_key},
            {"control_tls_client_ca", c.control_tls_client_ca},
            {"control_tcp_plaintext", text(c.control_tcp_plaintext)},
            {"control_max_connections", text(c.control_max_connections)},
            {"control_request_timeout_ms", text(c.control_request_timeout_ms)},
            {"host_ps_threads", text(c.host_ps_threads)},
            {"log_level", c.log_level},
            {"etcd_endpoint", c.etcd_endpoint},
            {"etcd_prefix", c.etcd_prefix},
            {"etcd_lease_ttl", text(c.etcd_lease_ttl)},
            {"node_name", c.node_name},
            {"advertise_address", c.advertise_address},
            {"node_rate", text(c.node_rate)},
            {"netns", c.netns}};
}

std::vector<ConfigChange> changed_keys(const Config &before, const Config &after)
{
    const auto a = config_values(before), b = config_values(after);
    const auto shown = [](const std::string &v) { return v.empty() ? std::string("\"\"") : v; };
    std::vector<ConfigChange> changed;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i].second != b[i].second)
            changed.push_back({a[i].first, shown(a[i].second), shown(b[i].second)});
    return changed;
}

std::vector<std::string> check_config(const Config &c)
{
    std::vector<std::string> problems;
    if (c.interface.empty())
        problems.push_back("interface: required (the NIC to attach the fast path to)");
    if (c.bpffs_dir.empty() || c.bpffs_dir[0] != '/')
        problems.push_back("bpffs_dir: must be an absolute path");
    if (c.state_dir.empty() || c.state_dir[0] != '/')
        problems.push_back("state_dir: must be an absolute path");
    if (c.host_slots_dir.empty() || c.host_slots_dir[0] != '/')
        problems.push_back("host_slots_dir: must be an absolute path");
    if (c.control_socket.empty() || c.control_socket[0] != '/')
        problems.push_back("control_socket: must be an absolute path");
    if (!c.control_tcp_address.empty() && c.control_token_file.empty())
        problems.push_back(
            "control_tcp_address: needs control_token_file (the API is not "
            "offered over TCP without a token)");
    if (!c.control_tcp_address.empty() && !c.control_tcp_plaintext &&
        (c.control_tls_cert.empty() || c.control_tls_key.empty()))
        problems.push_back(
            "control_tcp_address: needs control_tls_cert and control_tls_key (TLS), or "
            "control_tcp_plaintext = true to send the token in clear");
    if (!c.control_tenants_file.empty() && c.control_tcp_address.empty())
        problems.push_back(
            "control_tenants_file: needs control_tcp_address (tenant tokens are for TCP "
            "clients; the Unix socket is guarded by its file mode)");
    if (c.control_tcp_plaintext && !c.control_tls_cert.empty())
        problems.push_back("control_tcp_plaintext: true, but control_tls_cert is set: choose one");
    if (c.control_tls_cert.empty() != c.control_tls_key.empty())
        problems.push_back("control_tls_cert and control_tls_key: give both or neither");
    if (!c.etcd_endpoint.empty() && c.advertise_address.empty())
        problems.push_back(
            "etcd_endpoint: needs advertise_address (the IPv4 workers send this node's chunks to)");
    return problems;
}

std::vector<std::string> validate_config_file(const std::string &path, Config *parsed)
{
    auto problems = check_config_file(path);
    if (!problems.empty())
        return problems;
    Config local;
    Config &config = parsed ? *parsed : local;
    auto app = make_cli(config);
    std::ifstream in(path);
    try {
        app->parse_from_stream(in);
    } catch (const CLI::Error &e) {
        return {path + ": " + e.what()};
    }
    problems = check_config(config);
    if (problems.empty() && !config.control_token_file.empty()) {
        try {
            const std::string admin = read_token_file(config.control_token_file);
            if (!config.control_tenants_file.empty())
                read_tenants_file(config.control_tenants_file, admin);
        } catch (const std::runtime_error &e) {
            problems.push_back(e.what());
        }
    }
    return problems;
}

uint32_t resolve_default_chunk_elems(const std::string &setting, bool jumbo_fits)
{
    if (setting == "auto")
        return jumbo_fits ? XAGG_JUMBO_CHUNK_ELEMS : XAGG_CHUNK_ELEMS;
    return static_cast<uint32_t>(std::stoul(setting));
}

void require_private_file(const std::string &key, const std::string &path)
{
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        throw std::runtime_error(key + " " + path + ": " + std::strerror(errno));
    if (st.st_mode & S_IROTH)
        throw std::runtime_error(key + " " + path + " is readable by everyone; chmod o-r it");
}

std::string read_token_file(const std::string &path)
{
    require_private_file("control_token_file", path);
    std::ifstream in(path);
    std::string token;
    if (!in || !std::getline(in, token))
        throw std::runtime_error("control_token_file " + path + ": cannot be read");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
        token.pop_back();
    if (token.size() < 16)
        throw std::runtime_error("control_token_file " + path +
                                 ": the token must be at least 16 characters");
    return token;
}

}  // namespace xagg::daemon
