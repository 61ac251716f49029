// SPDX-License-Identifier: MIT
// xaggd's configuration: every key a flag, bad lines refused with file, line and reason.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "lib/config/config.hpp"
#include "lib/config/tenants.hpp"
#include "lib/config/preflight.hpp"
#include "tests/support/tls.hpp"

namespace xagg::daemon {
namespace {

class ConfigFileTest : public ::testing::Test {
protected:
    std::string write(const std::string &text)
    {
        path_ = ::testing::TempDir() + "xaggd-" + std::to_string(getpid()) + ".conf";
        std::ofstream(path_) << text;
        return path_;
    }
    void TearDown() override { unlink(path_.c_str()); }
    std::string path_;
};

TEST_F(ConfigFileTest, AGoodFileHasNoProblemsAndParsesIntoTheConfig)
{
    std::string path = write(
        "# an aggregator node\n"
        "interface = ens1f0\n"
        "port = 9999\n"
        "\n"
        "max_positions = 1024\n"
        "log_level = debug\n");
    EXPECT_TRUE(check_config_file(path).empty());
    Config c;
    auto app = make_cli(c);
    const char *argv[] = {"xaggd", "--config", path.c_str()};
    app->parse(3, argv);
    EXPECT_EQ(c.interface, "ens1f0");
    EXPECT_EQ(c.port, 9999);
    EXPECT_EQ(c.max_positions, 1024u);
    EXPECT_EQ(c.log_level, "debug");
    EXPECT_EQ(c.xdp_mode, "native");  // untouched keys keep their defaults
}

TEST_F(ConfigFileTest, UnknownKeyIsNamedWithItsLine)
{
    std::string path = write("interface = eth0\nprot = 9871\n");
    auto problems = check_config_file(path);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0], path + ":2: unknown key 'prot'");
}

TEST_F(ConfigFileTest, BadValuesAreNamedWithTheirLinesAndReasons)
{
    std::string path = write(
        "port = 70000\n"
        "xdp_mode = turbo\n"
        "interface = eth0\n"
        "group_base = 10.0.0.1\n"
        "just some words\n"
        "[section]\n");
    auto problems = check_config_file(path);
    ASSERT_EQ(problems.size(), 5u);
    EXPECT_TRUE(problems[0].starts_with(path + ":1: ")) << problems[0];
    EXPECT_NE(problems[0].find("70000"), std::string::npos) << problems[0];
    EXPECT_TRUE(problems[1].starts_with(path + ":2: ")) << problems[1];
    EXPECT_NE(problems[1].find("turbo"), std::string::npos) << problems[1];
    EXPECT_EQ(problems[2], path + ":4: --group_base: must be an IPv4 multicast address");
    EXPECT_EQ(problems[3], path + ":5: expected `key = value`");
    EXPECT_EQ(problems[4], path + ":6: sections are not used; write keys at the top level");
}

TEST_F(ConfigFileTest, MissingFileIsReported)
{
    auto problems = check_config_file("/nonexistent/xaggd.conf");
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0], "/nonexistent/xaggd.conf: cannot be read");
}

TEST_F(ConfigFileTest, MemoryKeysKeepTheirOldNamesAsAliases)
{
    // Memory is counted in slot positions; the keys' names before that still configure it.
    std::string path = write("interface = eth0\nmax_chunks = 2048\nmin_job_chunks = 16\n");
    Config c;
    EXPECT_EQ(validate_config_file(path, &c), std::vector<std::string>{});
    EXPECT_EQ(c.max_positions, 2048u);
    EXPECT_EQ(c.min_job_positions, 16u);
}

TEST_F(ConfigFileTest, AKeySetTwiceOrUnderBothNamesIsNamedWithItsLine)
{
    std::string path = write("interface = eth0\nmax_positions = 8\nmax_chunks = 9\n");
    EXPECT_EQ(check_config_file(path),
              std::vector<std::string>{path +
                                       ":3: max_chunks is set already as max_positions on line 2"});
    path = write("port = 1\ninterface = eth0\nport = 2\n");
    EXPECT_EQ(check_config_file(path),
              std::vector<std::string>{path + ":3: port is set already on line 1"});
}

TEST(ConfigTest, HelpListsEveryKey)
{
    Config c;
    auto app = make_cli(c);
    std::string help = app->help();
    for (const char *key :
         {"--interface", "--xdp_mode", "--port", "--max_positions", "--max_jobs", "--bpffs_dir",
          "--state_dir", "--host_slots_dir", "--control_socket", "--control_socket_mode",
          "--group_base", "--log_level", "--netns", "--config"})
        EXPECT_NE(help.find(key), std::string::npos) << key;
}

TEST(ConfigTest, InterfaceAloneIsEnough)
{
    Config c;
    auto app = make_cli(c);
    const char *argv[] = {"xaggd", "--interface", "eth0"};
    app->parse(3, argv);
    EXPECT_TRUE(check_config(c).empty());
    Config none;
    auto problems = check_config(none);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0], "interface: required (the NIC to attach the fast path to)");
}

TEST_F(ConfigFileTest, ValidationAddsWhatOnlyTheWholeFileShows)
{
    EXPECT_EQ(validate_config_file(write("interface = eth0\n")), std::vector<std::string>{});
    EXPECT_EQ(validate_config_file(write("max_positions = 8\n")),
              std::vector<std::string>{"interface: required (the NIC to attach the fast path to)"});
    // A bad line is reported as the line alone, as xaggd does before it parses the whole.
    auto problems = validate_config_file(write("interface = eth0\nport = 0\n"));
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].rfind(path_ + ":2: ", 0), 0u) << problems[0];
}

TEST_F(ConfigFileTest, TokenFileMustBePrivateAndLongEnough)
{
    std::string token = ::testing::TempDir() + "xaggd-token-" + std::to_string(getpid());
    std::ofstream(token) << "short\n";
    chmod(token.c_str(), 0600);
    std::string conf = write(
        "interface = eth0\ncontrol_tcp_address = 0.0.0.0:9874\ncontrol_tcp_plaintext = true\n"
        "control_token_file = " +
        token + "\n");
    EXPECT_EQ(validate_config_file(conf),
              std::vector<std::string>{"control_token_file " + token +
                                       ": the token must be at least 16 characters"});
    std::ofstream(token) << "0123456789abcdef  \n";
    EXPECT_EQ(read_token_file(token), "0123456789abcdef");
    EXPECT_EQ(validate_config_file(conf), std::vector<std::string>{});
    chmod(token.c_str(), 0644);
    EXPECT_EQ(validate_config_file(conf),
              std::vector<std::string>{"control_token_file " + token +
                                       " is readable by everyone; chmod o-r it"});
    unlink(token.c_str());
}

// The tenants file, line by line: each mistake named with its line, and a good file read
// whole (comments and blank lines skipped). validate_config_file checks it against the admin
// token, as xaggd does at start.
TEST_F(ConfigFileTest, TenantsFileNamesTheLineOfEachMistake)
{
    const std::string dir = ::testing::TempDir() + "xaggd-tenants-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    const std::string admin = dir + "/token", tenants = dir + "/tenants";
    std::ofstream(admin) << "admin-0123456789\n";
    chmod(admin.c_str(), 0600);
    const auto read = [&](const std::string &text) -> std::string {
        std::ofstream(tenants) << text;
        chmod(tenants.c_str(), 0600);
        try {
            std::string out;
            for (const Tenant &t : read_tenants_file(tenants, "admin-0123456789"))
                out += tenant_line(t) + ";";
            return out;
        } catch (const std::runtime_error &e) {
            return e.what();
        }
    };
    const std::string good =
        "# tenants\nvision 100-199 vision-0123456789  # the team\n\n"
        "speech 200 speech-0123456789\n";
    EXPECT_EQ(read(good), "vision 100-199 vision-0123456789;speech 200-200 speech-0123456789;");
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"vision 100-199\n", ":1: expected NAME FIRST-LAST TOKEN"},
        {"vision 100-199 vision-0123456789 extra\n", ":1: expected NAME FIRST-LAST TOKEN"},
        {"\nVision 100-199 vision-0123456789\n",
         ":2: tenant name 'Vision': 1-32 of a-z, 0-9, '_' and '-'"},
        {"vision 0-199 vision-0123456789\n", ":1: tenant vision: job ids are 1..65535"},
        {"vision 100-70000 vision-0123456789\n", ":1: tenant vision: job ids are 1..65535"},
        {"vision 1x vision-0123456789\n", ":1: tenant vision: '1x' is not a job id"},
        {"vision 199-100 vision-0123456789\n",
         ":1: tenant vision: '199-100': the range ends before it starts"},
        {"vision 100-199 short\n", ":1: tenant vision: the token must be at least 16 characters"},
        {"vision 100-199 admin-0123456789\n",
         ":1: tenant vision: the token is the admin token (control_token_file)"},
        {good + "vision 300-399 other-0123456789\n", ":5: tenant vision is named twice"},
        {good + "music 300-399 vision-0123456789\n",
         ":5: tenant music has the token of tenant vision"},
        {good + "music 150-250 music-0123456789\n",
         ":5: tenant music's jobs 150-250 overlap tenant vision's 100-199"},
    };
    for (const auto &[text, why] : bad)
        EXPECT_EQ(read(text), tenants + why) << text;
    std::ofstream(tenants) << good;
    std::string conf = write(
        "interface = eth0\ncontrol_tcp_address = 0.0.0.0:9874\ncontrol_tcp_plaintext = true\n"
        "control_token_file = " +
        admin + "\ncontrol_tenants_file = " + tenants + "\n");
    EXPECT_EQ(validate_config_file(conf), std::vector<std::string>{});
    chmod(tenants.c_str(), 0644);
    EXPECT_EQ(validate_config_file(conf),
              std::vector<std::string>{"control_tenants_file " + tenants +
                                       " is readable by everyone; chmod o-r it"});
    std::filesystem::remove_all(dir);
    EXPECT_EQ(new_token().size(), 32u);
    EXPECT_NE(new_token(), new_token());
}

TEST_F(ConfigFileTest, TcpNeedsTlsUnlessPlaintextIsSaidOutright)
{
    Config c;
    c.interface = "eth0";
    c.control_tcp_address = "0.0.0.0:9874";
    c.control_token_file = "/etc/xagg/token";
    EXPECT_EQ(check_config(c),
              std::vector<std::string>{"control_tcp_address: needs control_tls_cert and "
                                       "control_tls_key (TLS), or control_tcp_plaintext = true to "
                                       "send the token in clear"});
    c.control_tls_cert = "/etc/xagg/cert.pem";  // a certificate without its key
    EXPECT_EQ(check_config(c).size(), 2u);
    EXPECT_EQ(check_config(c)[1], "control_tls_cert and control_tls_key: give both or neither");
    c.control_tls_key = "/etc/xagg/key.pem";
    EXPECT_EQ(check_config(c), std::vector<std::string>{});
    c.control_tcp_plaintext = true;
    EXPECT_EQ(check_config(c), std::vector<std::string>{"control_tcp_plaintext: true, but "
                                                        "control_tls_cert is set: choose one"});
    c.control_tls_cert = c.control_tls_key = "";
    EXPECT_EQ(check_config(c), std::vector<std::string>{});
}

// SIGHUP names every changed key, so config_values() must know every key: the same set as the
// command line's (and the file's).
TEST(ConfigTest, EveryKeyHasAValueToCompareOnReload)
{
    Config c;
    auto app = make_cli(c);
    std::set<std::string> keys, options;
    for (const auto &[key, value] : config_values(c))
        keys.insert(key);
    for (const CLI::Option *o : app->get_options()) {
        const std::string name = o->get_name();
        if (name != "--help" && name != "--config" && name.rfind("--", 0) == 0)
            options.insert(name.substr(2));
    }
    EXPECT_EQ(keys, options);
    Config d = c;
    d.log_level = "debug";
    d.control_tls_cert = "/etc/xagg/new.pem";
    std::vector<std::string> changed;
    for (const ConfigChange &change : changed_keys(c, d))
        changed.push_back(change.key + ": " + change.before + " -> " + change.after);
    EXPECT_EQ(changed, (std::vector<std::string>{"control_tls_cert: \"\" -> /etc/xagg/new.pem",
                                                 "log_level: info -> debug"}));
}

TEST(ConfigTest, EtcdNeedsTheAddressWorkersReachThisNodeAt)
{
    Config c;
    c.interface = "eth0";
    c.etcd_endpoint = "http://10.0.0.250:2379";
    EXPECT_EQ(check_config(c),
              std::vector<std::string>{"etcd_endpoint: needs advertise_address (the IPv4 "
                                       "workers send this node's chunks to)"});
    c.advertise_address = "10.0.0.100";
    EXPECT_EQ(check_config(c), std::vector<std::string>{});
}

// What xaggd checks against the host before it starts, and `xaggctl config check` with it:
// addresses it cannot listen on here, TLS files it cannot load, each named with its key.
TEST_F(ConfigFileTest, TheHostChecksNameTheAddressesAndFilesXaggdCouldNotUse)
{
    Config c;
    c.interface = "lo";  // 65536: carries every chunk
    c.metrics_address = "127.0.0.1:9873";
    EXPECT_EQ(check_host(c), std::vector<std::string>{});
    c.metrics_address = "192.0.2.1:9873";  // TEST-NET-1: no host has it
    c.control_tcp_address = "127.0.0.1:99999";
    c.control_token_file = "/nonexistent";
    c.control_tls_cert = "/nonexistent/cert.pem";
    c.control_tls_key = "/nonexistent/key.pem";
    const auto problems = check_host(c);
    ASSERT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
    EXPECT_EQ(problems[0].rfind("metrics_address = 192.0.2.1:9873: cannot listen on 192.0.2.1 "
                                "here",
                                0),
              0u)
        << problems[0];
    EXPECT_EQ(problems[1], "control_tcp_address = 127.0.0.1:99999: the port must be 1-65535");
    EXPECT_EQ(problems[2].rfind("control_tls_cert/control_tls_key: ", 0), 0u) << problems[2];
    EXPECT_NE(problems[2].find("/nonexistent/cert.pem"), std::string::npos) << problems[2];

    // With real files: no problem; validate_for_start() runs the same check from a file.
    const std::string dir = ::testing::TempDir() + "xagg-pki-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    const test::TestPki pki = test::make_test_pki(dir, "127.0.0.1");
    const std::string token = dir + "/token";
    std::ofstream(token) << "0123456789abcdef0123\n";
    chmod(token.c_str(), 0600);
    const std::string good =
        "interface = lo\ncontrol_tcp_address = 127.0.0.1:9874\n"
        "control_token_file = " +
        token + "\ncontrol_tls_cert = " + pki.server_cert +
        "\ncontrol_tls_key = " + pki.server_key + "\n";
    EXPECT_EQ(validate_for_start(write(good)), std::vector<std::string>{});
    const auto bad = validate_for_start(write(good + "metrics_address = 192.0.2.1:9873\n"));
    ASSERT_EQ(bad.size(), 1u) << ::testing::PrintToString(bad);
    EXPECT_EQ(bad[0].rfind("metrics_address = 192.0.2.1:9873", 0), 0u) << bad[0];
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace xagg::daemon
