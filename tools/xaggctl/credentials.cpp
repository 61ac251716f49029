// SPDX-License-Identifier: MIT
#include "tools/xaggctl/credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lib/config/config.hpp"
#include "lib/config/tenants.hpp"
#include "lib/tls/issue.hpp"
#include "lib/tls/tls.hpp"
#include "tools/xaggctl/exit_codes.hpp"

namespace xagg::ctl {
namespace {

using daemon::Tenant;
using nlohmann::json;

// A problem with the files or the arguments: said, and exit code 1 (nothing was half-done
// that the message does not name).
class CredentialError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// "NAME=FIRST-LAST" of --tenant.
Tenant parse_tenant(const std::string &text)
{
    const size_t eq = text.find('=');
    if (eq == std::string::npos)
        throw CredentialError("--tenant " + text + ": expected NAME=FIRST-LAST");
    Tenant t{text.substr(0, eq), 0, 0, daemon::new_token()};
    try {
        daemon::parse_job_range(text.substr(eq + 1), t.first_job, t.last_job);
    } catch (const std::invalid_argument &e) {
        throw CredentialError("--tenant " + text + ": " + e.what());
    }
    return t;
}

// Writes `text` to `path` with `mode`, replacing it only once it is whole (a reload that reads
// it meanwhile sees the old file or the new one).
void write_file(const std::string &path, const std::string &text, mode_t mode, bool replace)
{
    if (!replace && std::filesystem::exists(path))
        throw CredentialError(path + " exists (not replaced; remove it first to make a new one)");
    const std::string tmp = path + ".new";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        throw CredentialError(tmp + ": " + std::strerror(errno));
    fchmod(fd, mode);  // O_CREAT's mode passes the umask; a file that existed keeps its own
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const bool synced = fsync(fd) == 0;
    close(fd);
    if (!written || !synced || rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        unlink(tmp.c_str());
        throw CredentialError(path + ": " + why);
    }
}

std::string read_file(const std::string &path)
{
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string admin_token_of(const std::string &file)
{
    if (file.empty())
        return {};
    try {
        return daemon::read_token_file(file);
    } catch (const std::runtime_error &e) {
        throw CredentialError(std::string("--admin-token-file: ") + e.what());
    }
}

// The tenants file after a change, checked by the rules xaggd reads it with before it replaces
// the old one.
void write_tenants(const std::string &path, const std::string &text, const std::string &admin)
{
    std::istringstream in(text);
    try {
        daemon::parse_tenants(in, path, admin);
    } catch (const std::runtime_error &e) {
        throw CredentialError(e.what());
    }
    write_file(path, text, 0600, true);
}

json tenant_json(const Tenant &t)
{
    return {{"tenant", t.name}, {"jobs", t.jobs_text()}, {"token", t.token}};
}

// Runs a credential verb: its errors are exit code 1 with the reason.
int guarded(const std::function<int()> &verb)
{
    try {
        return verb();
    } catch (const CredentialError &e) {
        std::cerr << "xaggctl: " << e.what() << "\n";
    } catch (const tls::TlsError &e) {
        std::cerr << "xaggctl: " << e.what() << "\n";
    }
    return kUsage;
}

int tls_init(const Globals &g, const Args &a)
{
    const auto &o = a.tls;
    if (o.ips.empty() && o.dns.empty())
        throw CredentialError(
            "give the addresses workers connect to xaggd at: --ip ADDRESS (and/or --dns NAME); "
            "the certificate is refused for any other");
    std::vector<Tenant> tenants;
    for (const std::string &t : o.tenants)
        tenants.push_back(parse_tenant(t));
    std::filesystem::create_directories(o.dir);
    const std::string d = o.dir + "/";
    // Nothing is replaced: an existing CA would be overwritten only by mistake.
    for (const char *name : {"ca.pem", "ca.key", "server.pem", "server.key", "token", "tenants"})
        if (std::filesystem::exists(d + name))
            throw CredentialError(d + name +
                                  " exists (not replaced; remove it first to make a new one)");
    std::vector<std::string> sans;
    for (const std::string &ip : o.ips)
        sans.push_back("IP:" + ip);
    for (const std::string &name : o.dns)
        sans.push_back("DNS:" + name);
    const tls::Issued ca = tls::make_ca("xagg control CA", o.days);
    const tls::Issued server = tls::issue(ca, "xaggd", sans, tls::Usage::server, o.days);
    std::vector<tls::Issued> clients;
    for (const std::string &name : o.clients)
        clients.push_back(tls::issue(ca, name, {}, tls::Usage::client, o.days));
    // All made before anything is written: a bad --ip leaves no half-made directory.
    const std::string admin = daemon::new_token();
    std::string tenant_text = "# NAME FIRST-LAST TOKEN (xaggctl tls init)\n";
    for (const Tenant &t : tenants)
        tenant_text += daemon::tenant_line(t) + "\n";
    tls::write_cert(ca, d + "ca.pem");
    tls::write_key(ca, d + "ca.key");
    tls::write_cert(server, d + "server.pem");
    tls::write_key(server, d + "server.key");
    write_file(d + "token", admin + "\n", 0600, false);
    if (!tenants.empty())
        write_tenants(d + "tenants", tenant_text, admin);
    json files = {{"ca", d + "ca.pem"},
                  {"ca_key", d + "ca.key"},
                  {"cert", d + "server.pem"},
                  {"key", d + "server.key"},
                  {"token", d + "token"}};
    if (!tenants.empty())
        files["tenants"] = d + "tenants";
    json client_files = json::array();
    for (size_t i = 0; i < clients.size(); i++) {
        const std::string base = d + "client-" + o.clients[i];
        tls::write_cert(clients[i], base + ".pem");
        tls::write_key(clients[i], base + ".key");
        client_files.push_back(
            {{"name", o.clients[i]}, {"cert", base + ".pem"}, {"key", base + ".key"}});
    }
    json out = {
        {"files", files}, {"names", sans}, {"clients", client_files}, {"tenants", json::array()}};
    for (const Tenant &t : tenants)
        out["tenants"].push_back(tenant_json(t));
    return print(g, out, [&] {
        std::string text = "made in " + o.dir +
                           ":\n  ca.pem, ca.key      the CA (keep ca.key off "
                           "the aggregator once done; workers and xaggctl need ca.pem)\n"
                           "  server.pem, server.key  xaggd's certificate for";
        for (const std::string &san : sans)
            text += " " + san;
        text +=
            "\n  token               the admin token (everything; for operators, never for "
            "workers)\n";
        if (!tenants.empty())
            text += "  tenants             one token per tenant, each for its own job ids\n";
        for (const json &c : client_files)
            text += "  " + c["cert"].get<std::string>() + " (+ .key)  client certificate " +
                    c["name"].get<std::string>() + "\n";
        text += "\nin xaggd.conf:\n  control_tls_cert = " + d +
                "server.pem\n  control_tls_key = " + d + "server.key\n  control_token_file = " + d +
                "token\n";
        if (!tenants.empty())
            text += "  control_tenants_file = " + d + "tenants\n";
        if (!clients.empty())
            text += "  control_tls_client_ca = " + d + "ca.pem\n";
        for (const Tenant &t : tenants)
            text += "\ntenant " + t.name + " (jobs " + t.jobs_text() + "): XAGG_TOKEN=" + t.token +
                    "\n";
        return text;
    });
}

int token_tenant(const Globals &g, const Args &a)
{
    Tenant t = parse_tenant(a.token.name + "=" + a.token.jobs);
    const std::string &path = a.file;
    std::string text = std::filesystem::exists(path)
                           ? read_file(path)
                           : std::string("# NAME FIRST-LAST TOKEN (xaggctl token tenant)\n");
    if (!text.empty() && text.back() != '\n')
        text += '\n';
    text += daemon::tenant_line(t) + "\n";
    write_tenants(path, text, admin_token_of(a.token.admin_token_file));
    return print(g, tenant_json(t), [&] {
        return "tenant " + t.name + " (jobs " + t.jobs_text() + ") added to " + path +
               "; its token:\n" + t.token +
               "\nsystemctl reload xaggd applies it; give it to that tenant's workers as "
               "XAGG_TOKEN\n";
    });
}

int token_revoke(const Globals &g, const Args &a)
{
    const std::string &path = a.file;
    if (!std::filesystem::exists(path))
        throw CredentialError(path + ": no such file");
    // Keeps every line but the tenant's (comments included), as the operator wrote them.
    std::istringstream in(read_file(path));
    std::string line, kept;
    bool found = false;
    while (std::getline(in, line)) {
        std::istringstream words(line.substr(0, line.find('#')));
        std::string first;
        if (words >> first && first == a.token.name) {
            found = true;
            continue;
        }
        kept += line + "\n";
    }
    if (!found)
        throw CredentialError("no tenant " + a.token.name + " in " + path);
    write_tenants(path, kept, admin_token_of(a.token.admin_token_file));
    return print(g, {{"revoked", a.token.name}, {"file", path}}, [&] {
        return "tenant " + a.token.name + " removed from " + path +
               "; systemctl reload xaggd makes its token fail from then on\n";
    });
}

}  // namespace

void add_tls(CLI::App &app, Cli &cli)
{
    auto *tls = app.add_subcommand("tls", "Make the TLS files and tokens of the TCP control API");
    tls->require_subcommand(1);
    auto &o = cli.args.tls;
    auto *init = tls->add_subcommand(
        "init",
        "Make a CA, xaggd's certificate for the addresses workers connect to, the admin token "
        "and tenant tokens in DIR (nothing there is replaced)");
    init->add_option("--dir", o.dir, "Where to write them (e.g. /etc/xagg)")
        ->required()
        ->type_name("PATH");
    init->add_option("--ip", o.ips, "An IPv4 address clients connect to (control_tcp_address's)")
        ->check(CLI::ValidIPV4);
    init->add_option("--dns", o.dns, "A DNS name clients connect to");
    init->add_option("--tenant", o.tenants,
                     "NAME=FIRST-LAST: a tenant token for the job ids FIRST..LAST (repeatable)");
    init->add_option("--client", o.clients,
                     "NAME: also a client certificate (for control_tls_client_ca), repeatable");
    init->add_option("--days", o.days, "Validity of every certificate")
        ->check(CLI::Range(1u, 3650u))
        ->capture_default_str();
    init->footer(
        "Example: xaggctl tls init --dir /etc/xagg --ip 10.0.0.5 --tenant vision=100-199 "
        "--tenant speech=200-299");
    init->callback([&cli] {
        cli.action = [&cli] { return guarded([&] { return tls_init(cli.globals, cli.args); }); };
    });
}

void add_token(CLI::App &app, Cli &cli)
{
    auto *token = app.add_subcommand("token", "Add or revoke tenant tokens in a tenants file");
    token->require_subcommand(1);
    auto &t = cli.args.token;
    auto *tenant = token->add_subcommand(
        "tenant", "Add a tenant with a fresh token for its job ids; prints the token");
    tenant->add_option("NAME", t.name, "Tenant name: 1-32 of a-z, 0-9, '_', '-'")->required();
    tenant->add_option("--jobs", t.jobs, "FIRST-LAST: the job ids that are the tenant's")
        ->required();
    auto *revoke = token->add_subcommand("revoke", "Remove a tenant and its token");
    revoke->add_option("NAME", t.name, "Tenant name")->required();
    for (auto *cmd : {tenant, revoke}) {
        cmd->add_option("--file", cli.args.file, "The tenants file (control_tenants_file)")
            ->required()
            ->type_name("PATH");
        cmd->add_option("--admin-token-file", t.admin_token_file,
                        "control_token_file, so that no tenant's token can equal it")
            ->type_name("PATH");
    }
    tenant->footer(
        "Example: xaggctl token tenant vision --jobs 100-199 --file /etc/xagg/tenants "
        "--admin-token-file /etc/xagg/token && systemctl reload xaggd");
    tenant->callback([&cli] {
        cli.action = [&cli] {
            return guarded([&] { return token_tenant(cli.globals, cli.args); });
        };
    });
    revoke->callback([&cli] {
        cli.action = [&cli] {
            return guarded([&] { return token_revoke(cli.globals, cli.args); });
        };
    });
}

}  // namespace xagg::ctl
