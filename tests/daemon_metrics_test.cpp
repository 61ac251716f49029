// SPDX-License-Identifier: MIT
// The metrics exposition: exact samples for a known snapshot, and Prometheus's own promtool
// accepts it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "metrics.hpp"
#include "support/process.hpp"

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
    Job j;
    j.id = 7;
    j.workers = 3;
    j.chunks = 100;
    j.region_chunks = 60;
    j.members[0] = Member{};
    s.jobs.push_back(j);
    s.capacity_chunks = 1000;
    s.used_chunks = 60;
    s.api_requests = 5;
    s.api_errors = 1;
    s.uptime_seconds = 1.5;
    return s;
}

TEST(MetricsTest, SamplesAreExact)
{
    std::string text = render_metrics(example());
    for (const char *line : {
             "xagg_packets_total{path=\"fast\",outcome=\"aggregated\"} 20\n",
             "xagg_packets_total{path=\"fast\",outcome=\"drop_bad_magic\"} 3\n",
             "xagg_packets_total{path=\"host\",outcome=\"completed_fanout\"} 2\n",
             "xagg_fanout_copies_total{path=\"host\"} 6\n",
             "xagg_aggregated_bytes_total{path=\"fast\"} 92160\n",
             "xagg_aggregated_bytes_total{path=\"host\"} 6144\n",
             "xagg_chunks_completed_total{path=\"fast\"} 10\n",
             "xagg_chunks_completed_total{path=\"host\"} 2\n",
             "xagg_jobs 1\n",
             "xagg_job_members{job=\"7\"} 1\n",
             "xagg_job_chunks{job=\"7\",path=\"fast\"} 60\n",
             "xagg_job_chunks{job=\"7\",path=\"host\"} 40\n",
             "xagg_api_request_errors_total 1\n",
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
