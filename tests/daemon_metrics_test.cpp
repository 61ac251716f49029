// SPDX-License-Identifier: MIT
// The metrics exposition: exact samples for a known snapshot, and Prometheus's own promtool
// accepts it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/metrics.hpp"
#include "tests/support/process.hpp"

namespace xagg::daemon {
namespace {

MetricsSnapshot example()
{
    MetricsSnapshot s;
    s.fast[XAGG_CNT_AGGREGATED] = 20;
    s.fast[XAGG_CNT_COMPLETED] = 10;
    s.fast[XAGG_CNT_DROP_BAD_MAGIC] = 3;
    s.host[XAGG_CNT_COMPLETED_FANOUT] = 2;
    s.host[XAGG_CNT_FANOUT_COPIES] = 6;
    // Bytes come from the values summed, not from a chunk size: on the fast path 20 standard
    // contributions and 10 jumbo ones, on the host path 2 jumbo ones.
    s.fast[XAGG_CNT_SUMMED_VALUES] = 20 * XAGG_CHUNK_ELEMS + 10 * XAGG_JUMBO_CHUNK_ELEMS;
    s.host[XAGG_CNT_SUMMED_VALUES] = 2 * XAGG_JUMBO_CHUNK_ELEMS;
    s.fast[XAGG_CNT_CE_MARKED] = 4;
    Job j;
    j.id = 7;
    j.workers = 3;
    j.positions = 100;
    j.region_positions = 60;
    j.members[0] = Member{};
    s.jobs.push_back(j);
    s.capacity_positions = 1000;
    s.used_positions = 60;
    s.api_requests = 5;
    s.api_errors = 1;
    s.uptime_seconds = 1.5;
    s.kernel = {"6.1.0-57-amd64", "copy", "interface eth0 has MTU 3200"};
    return s;
}

// The xagg_* metric names a file of monitoring/ uses.
std::set<std::string> metric_names_in(const std::string &path)
{
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    const std::string r = all.str();
    std::set<std::string> used;
    for (size_t at = r.find("xagg_"); at != std::string::npos; at = r.find("xagg_", at + 1)) {
        if (at > 0 && (std::isalnum(static_cast<unsigned char>(r[at - 1])) || r[at - 1] == '-'))
            continue;  // inside another word (a file name, the dashboard's uid)
        size_t end = r.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", at);
        // A label, not a metric: xagg_job="7", {{xagg_job}}, $labels.xagg_job, by (xagg_job).
        const bool label = (end < r.size() && std::strchr("=,}", r[end])) ||
                           (at > 0 && r[at - 1] == '.') ||
                           (at >= 4 && r.compare(at - 4, 4, "by (") == 0);
        if (label)
            continue;
        used.insert(r.substr(at, end - at));
    }
    return used;
}

TEST(MetricsTest, EveryMetricTheAlertsAndTheDashboardUseIsServed)
{
    MetricsSnapshot s = example();
    s.straggler_events[7] = 1;  // a family with no job has no samples
    const std::string text = render_metrics(s);
    for (const char *file : {"prometheus/xagg-rules.yml", "grafana/xagg-dashboard.json"}) {
        std::set<std::string> used =
            metric_names_in(std::string(XAGG_SOURCE_DIR "/monitoring/") + file);
        EXPECT_GE(used.size(), 7u) << file;
        for (const std::string &name : used)
            EXPECT_TRUE(text.find("\n" + name + "{") != std::string::npos ||
                        text.find("\n" + name + " ") != std::string::npos)
                << name << " is in " << file << " but xaggd does not serve it";
    }
}

TEST(MetricsTest, SamplesAreExact)
{
    std::string text = render_metrics(example());
    for (const char *line : {
             "xagg_packets_total{path=\"fast\",outcome=\"aggregated\"} 20\n",
             "xagg_packets_total{path=\"fast\",outcome=\"drop_bad_magic\"} 3\n",
             "xagg_packets_total{path=\"host\",outcome=\"completed_fanout\"} 2\n",
             "xagg_fanout_copies_total{path=\"host\"} 6\n",
             "xagg_aggregated_bytes_total{path=\"fast\"} 143360\n",
             "xagg_aggregated_bytes_total{path=\"host\"} 16384\n",
             "xagg_chunks_completed_total{path=\"fast\"} 10\n",
             "xagg_ecn_marked_total{path=\"fast\"} 4\n",
             "xagg_ecn_marked_total{path=\"host\"} 0\n",
             "xagg_chunks_completed_total{path=\"host\"} 2\n",
             "xagg_jobs 1\n",
             "xagg_job_members{xagg_job=\"7\"} 1\n",
             "xagg_job_chunks{xagg_job=\"7\",path=\"fast\"} 60\n",
             "xagg_job_chunks{xagg_job=\"7\",path=\"host\"} 40\n",
             "xagg_api_request_errors_total 1\n",
             "xagg_kernel_info{release=\"6.1.0-57-amd64\",fastpath_variant=\"copy\","
             "jumbo_chunks=\"no\"} 1\n",
         })
        EXPECT_NE(text.find(line), std::string::npos) << line << "in:\n" << text;
    // Two slots per chunk.
    std::string used = "xagg_fastpath_memory_bytes{state=\"used\"} " +
                       std::to_string(60 * 2 * sizeof(xagg_slot)) + "\n";
    EXPECT_NE(text.find(used), std::string::npos) << text;
}

TEST(MetricsTest, PromtoolAcceptsTheExposition)
{
    if (test::run_command("command -v promtool").empty())
        GTEST_FAIL()
            << "promtool is missing: scripts/install-deps installs it (Debian's prometheus)";
    std::string path = ::testing::TempDir() + "xagg-metrics-" + std::to_string(getpid()) + ".txt";
    std::ofstream(path) << render_metrics(example());
    std::string out = test::run_command("promtool check metrics < " + path + "; echo rc=$?");
    unlink(path.c_str());
    EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
}

}  // namespace
}  // namespace xagg::daemon
