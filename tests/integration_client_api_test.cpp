// SPDX-License-Identifier: MIT
// The client library's API in-process, against a real daemon: priorities decide what is sent
// first, and each failure reaches the caller as the error it is.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "xagg/proto.h"
#include "lib/sys/netns.hpp"
#include "client/quantize.hpp"
#include "tests/support/daemon.hpp"
#include "tests/support/topology.hpp"
#include "xagg/client.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ClientApi : public DaemonTest {
protected:
    void SetUp() override
    {
        DaemonTest::SetUp();
        if (IsSkipped())
            return;
        topo_ = std::make_unique<Topology>("p", 2);
        daemon_ = start_daemon(write_config(*topo_), "xaggd.log");
        ASSERT_EQ(control(socket_, {{"op", "create_job"},
                                    {"id", 7},
                                    {"workers", 2},
                                    {"gradient_elems", 8192 * XAGG_CHUNK_ELEMS}})["ok"],
                  true);
    }

    ClientOptions options(unsigned rank, uint32_t job = 7) const
    {
        ClientOptions o;
        Aggregator a;
        a.control_socket = socket_;
        a.address = kAggAddr;
        a.job = job;
        o.aggregators = {a};
        o.rank = rank;
        o.local_address = worker_addr(rank);
        o.timeout = 10ms;
        o.max_retries = 20;
        return o;
    }

    // A client for `rank`, made in that worker's namespace (its socket and thread live there).
    std::unique_ptr<Client> client(unsigned rank) const
    {
        std::unique_ptr<Client> c;
        sys::run_in_netns(topo_->worker(rank),
                          [&] { c = std::make_unique<Client>(options(rank)); });
        return c;
    }

    // Both workers all-reduce their buffer (started together: the sum needs both).
    template <typename T>
    static void sum_on_both(Client &c0, std::vector<T> &a, Client &c1, std::vector<T> &b)
    {
        AllReduce h0 = c0.allreduce_async(std::span(a)), h1 = c1.allreduce_async(std::span(b));
        h0.wait();
        h1.wait();
    }

    // The ClientError `fn` throws; a test failure saying `expected` if it throws none.
    static ClientError error_of(const std::function<void()> &fn, const std::string &expected)
    {
        try {
            fn();
        } catch (const ClientError &e) {
            return e;
        }
        ADD_FAILURE() << expected;
        return ClientError(ClientError::Kind::closed, "no error");
    }

    static ClientError::Kind failure_of(AllReduce &op)
    {
        return error_of([&] { op.wait(); }, "the all-reduce did not fail").kind();
    }

    std::unique_ptr<Topology> topo_;
    std::unique_ptr<Process> daemon_;
};

TEST_F(ClientApi, AHigherPriorityTensorOvertakesALargeOneAlreadyInFlight)
{
    auto c0 = client(0), c1 = client(1);
    std::vector<float> big0(4 << 20, 1.0f), big1(4 << 20, 2.0f), small0(1000, 0.5f),
        small1(1000, 0.25f);
    AllReduce b0 = c0->allreduce_async(std::span(big0), 0);
    AllReduce b1 = c1->allreduce_async(std::span(big1), 0);
    AllReduce s0 = c0->allreduce_async(std::span(small0), 5);
    AllReduce s1 = c1->allreduce_async(std::span(small1), 5);
    s0.wait();
    s1.wait();
    EXPECT_FALSE(b0.ready()) << "the large tensor was not overtaken";
    EXPECT_EQ(small0, std::vector<float>(1000, 0.75f));
    b0.wait();
    b1.wait();
    EXPECT_EQ(big0, std::vector<float>(4 << 20, 3.0f));
    EXPECT_EQ(big1, big0);
}

// A barrier returns on both workers once both called it, and takes nothing from the all-reduces
// around it: their sums stay exact. As a first call too, made before the other worker has even
// joined: it waits for the other to join, as an all-reduce does, rather than sending a round
// the other would not know of.
// DDP's pattern through the hook: every step, several large calls at once, each later one of a
// higher priority, on a job much smaller than them (so their rounds queue on every index). Under
// congestion control the credit starts small; picked by priority, each worker's credit once
// filled with chunks the other had not picked, and only 20 ms timers moved them on, until a
// chunk ran out of retransmissions (resnet18 through the hook failed this way). Now the credit
// counts only the chunks in flight of the next one's priority or higher, and the oldest chunks
// go whatever it holds, so the workers' picks meet.
TEST_F(ClientApi, CallsOfRisingPriorityLargerThanTheJobAllFinishExactly)
{
    ASSERT_EQ(control(socket_, {{"op", "create_job"},
                                {"id", 8},
                                {"workers", 2},
                                {"gradient_elems", 342 * XAGG_CHUNK_ELEMS}})["ok"],
              true);
    // With the library's own loss budget (the fixture's is tight, to fail fast elsewhere): a
    // chunk that is not lost but waits for a peer that has not picked it must not run out of it.
    std::unique_ptr<Client> clients[2];
    for (unsigned r = 0; r < 2; r++) {
        ClientOptions o = options(r, 8);
        o.timeout = ClientOptions{}.timeout;
        o.max_retries = ClientOptions{}.max_retries;
        sys::run_in_netns(topo_->worker(r), [&] { clients[r] = std::make_unique<Client>(o); });
    }
    const size_t sizes[] = {300000, 1600000, 1000000};
    std::vector<std::string> wrong[2];
    auto steps = [&](unsigned rank) {
        std::vector<std::vector<int32_t>> tensors;
        for (size_t n : sizes)
            tensors.emplace_back(n);
        for (int32_t step = 0; step < 10; step++) {
            std::vector<AllReduce> calls;
            for (size_t i = 0; i < tensors.size(); i++) {
                std::fill(tensors[i].begin(), tensors[i].end(), int32_t(rank + step * 7 + i));
                calls.push_back(clients[rank]->allreduce_async(std::span(tensors[i]), int(i)));
            }
            for (auto &c : calls)
                c.wait();
            for (size_t i = 0; i < tensors.size(); i++) {
                const int32_t sum = int32_t(1 + 2 * (step * 7 + i));
                if (std::count(tensors[i].begin(), tensors[i].end(), sum) != ptrdiff_t(sizes[i]))
                    wrong[rank].push_back("step " + std::to_string(step) + " call " +
                                          std::to_string(i));
            }
        }
    };
    std::exception_ptr failed[2];
    std::thread workers[2];
    for (unsigned r = 0; r < 2; r++)
        workers[r] = std::thread([&, r] {
            try {
                steps(r);
            } catch (...) {
                failed[r] = std::current_exception();
            }
        });
    for (auto &w : workers)
        w.join();
    for (unsigned r = 0; r < 2; r++) {
        if (failed[r]) {
            try {
                std::rethrow_exception(failed[r]);
            } catch (const ClientError &e) {
                ADD_FAILURE() << "rank " << r << ": " << e.what();
            }
        }
        EXPECT_TRUE(wrong[r].empty()) << "rank " << r << " summed wrong: " << wrong[r].front();
    }
}

TEST_F(ClientApi, ABarrierPassesBothWorkersAndLeavesTheSumsExact)
{
    auto c0 = client(0);
    std::thread first([&] { c0->barrier(); });
    json job = control(socket_, {{"op", "show_job"}, {"job", 7}})["job"];
    EXPECT_EQ(job["members"].size(), 1u) << "only rank 0 has joined: its barrier waits";
    auto c1 = client(1);
    c1->barrier();
    first.join();
    std::vector<int32_t> a(5000, 3), b(5000, 4);
    sum_on_both(*c0, a, *c1, b);
    std::thread other([&] { c1->barrier(); });
    c0->barrier();
    other.join();
    std::vector<int32_t> x(5000, -1), y(5000, 10);
    sum_on_both(*c0, x, *c1, y);
    EXPECT_EQ(a, std::vector<int32_t>(5000, 7));
    EXPECT_EQ(x, std::vector<int32_t>(5000, 9));
    EXPECT_EQ(y, x);
}

TEST_F(ClientApi, AnEvictedWorkerIsToldSoAndTheOtherGoesOnAlone)
{
    auto c0 = client(0), c1 = client(1);
    std::vector<int32_t> a(5000, 1), b(5000, 2);
    sum_on_both(*c0, a, *c1, b);
    EXPECT_EQ(a, std::vector<int32_t>(5000, 3));
    ASSERT_EQ(control(socket_, {{"op", "evict"}, {"job", 7}, {"rank", 1}})["ok"], true);
    std::vector<int32_t> a2(5000, 10), b2(5000, 20);
    AllReduce r1 = c1->allreduce_async(std::span(b2));
    AllReduceReport r0 = c0->allreduce(std::span(a2));
    EXPECT_EQ(a2, std::vector<int32_t>(5000, 10));  // rank 0's alone, and said so:
    EXPECT_EQ(r0.contributors, 1u);
    EXPECT_EQ(r0.partial_chunks, r0.chunks);
    EXPECT_EQ(failure_of(r1), ClientError::Kind::evicted);
    // Once failed, the client says so at once.
    EXPECT_THROW(c1->allreduce(std::span(b2)), ClientError);
}

TEST_F(ClientApi, ASecondSessionOnAUsedJobGetsItsOwnSumsNotTheOldOnes)
{
    {
        auto c0 = client(0), c1 = client(1);
        std::vector<int32_t> a(3000, 1), b(3000, 2);
        sum_on_both(*c0, a, *c1, b);
        EXPECT_EQ(a, std::vector<int32_t>(3000, 3));
    }
    // The same job, new clients: round 0 of these chunks is complete in the slots with the old
    // sum; a new session must not be answered with it.
    auto c0 = client(0), c1 = client(1);
    std::vector<int32_t> a(3000, 5), b(3000, 7);
    sum_on_both(*c0, a, *c1, b);
    EXPECT_EQ(a, std::vector<int32_t>(3000, 12));
    EXPECT_EQ(b, std::vector<int32_t>(3000, 12));
}

TEST_F(ClientApi, ADeletedJobFailsWhatIsPendingAsJobDeleted)
{
    auto c0 = client(0);
    ASSERT_EQ(control(socket_, {{"op", "delete_job"}, {"job", 7}})["ok"], true);
    std::vector<float> v(3000, 1.0f);
    // The rendezvous before the first all-reduce finds the job gone.
    ClientError e = error_of([&] { c0->allreduce_async(std::span(v)); },
                             "an all-reduce started on a deleted job");
    EXPECT_EQ(e.kind(), ClientError::Kind::job_deleted) << e.what();
}

TEST_F(ClientApi, JoiningFailsClearly)
{
    ClientOptions o = options(0);
    o.aggregators[0].control_socket = dir_ + "/nobody.sock";
    ClientError e = error_of([&] { Client c(o); }, "joined without a daemon");
    EXPECT_EQ(e.kind(), ClientError::Kind::unreachable) << e.what();
    EXPECT_NE(std::string(e.what()).find("is it running?"), std::string::npos) << e.what();
    o = options(2);
    e = error_of([&] { Client c(o); }, "joined with rank 2 of 2");
    EXPECT_EQ(e.kind(), ClientError::Kind::invalid) << e.what();
    auto c0 = client(0);
    o = options(0);
    o.local_address = worker_addr(1);  // rank 0 is taken, from another address
    e = error_of([&] { Client c(o); }, "took a taken rank");
    EXPECT_EQ(e.kind(), ClientError::Kind::refused) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 is taken"), std::string::npos) << e.what();
}

// A job of jumbo chunks (2048 values, 8274-byte frames): ints exact, floats bit for bit what the
// documented quantization with 2048-value blocks gives; and a worker whose interface cannot
// carry such a frame is told so before it joins.
TEST_F(ClientApi, AJobOfJumboChunksAllReducesExactly)
{
    constexpr size_t kValues = 40 * XAGG_JUMBO_CHUNK_ELEMS + 100;  // a ragged last chunk
    ASSERT_EQ(control(socket_, {{"op", "create_job"},
                                {"id", 8},
                                {"workers", 2},
                                {"gradient_elems", 64 * XAGG_JUMBO_CHUNK_ELEMS},
                                {"chunk_elems", XAGG_JUMBO_CHUNK_ELEMS}})["ok"],
              true);
    auto jumbo_client = [&](unsigned rank) {
        ClientOptions o = options(rank);
        o.aggregators[0].job = 8;
        std::unique_ptr<Client> c;
        sys::run_in_netns(topo_->worker(rank), [&] { c = std::make_unique<Client>(o); });
        return c;
    };
    auto c0 = jumbo_client(0), c1 = jumbo_client(1);
    EXPECT_EQ(c0->chunk_elems(), size_t{XAGG_JUMBO_CHUNK_ELEMS});

    std::vector<int32_t> a(kValues), b(kValues), want(kValues);
    for (size_t i = 0; i < kValues; i++) {
        a[i] = static_cast<int32_t>(i * 3) - 7;
        b[i] = 11 - static_cast<int32_t>(i * 5);
        want[i] = a[i] + b[i];
    }
    sum_on_both(*c0, a, *c1, b);
    EXPECT_EQ(a, want);
    EXPECT_EQ(b, want);

    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-4, 4);
    std::vector<float> f0(kValues), f1(kValues);
    for (size_t i = 0; i < kValues; i++) {
        f0[i] = std::ldexp(u(rng), static_cast<int>(i % 13) - 6);
        f1[i] = std::ldexp(u(rng), static_cast<int>(i % 7) - 3);
    }
    const std::vector<std::span<const float>> views = {f0, f1};
    const client::Expected expected = client::expected_allreduce(views, XAGG_JUMBO_CHUNK_ELEMS);
    sum_on_both(*c0, f0, *c1, f1);
    EXPECT_EQ(f0, expected.values);
    EXPECT_EQ(f1, expected.values);

    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_GT(stats["counters"]["completed"], 0) << stats;
    EXPECT_EQ(stats["counters"]["drop_bad_length"], 0) << stats;

    c1.reset();
    ASSERT_EQ(run_command("ip -n " + topo_->worker(1) + " link set eth0 mtu 4000 && echo ok"),
              "ok\n");
    ClientError e = error_of([&] { jumbo_client(1); }, "joined a jumbo job at MTU 4000");
    EXPECT_EQ(e.kind(), ClientError::Kind::invalid) << e.what();
    EXPECT_EQ(std::string(e.what()),
              "job 8: interface eth0 has MTU 4000; a job of jumbo chunks needs at least 8260 (ip "
              "link set dev eth0 mtu 9000, and the same on every link between workers and "
              "aggregator)");
}

TEST_F(ClientApi, AWorkerWhoseInterfaceCannotCarryAChunkIsToldBeforeItJoins)
{
    ASSERT_EQ(run_command("ip -n " + topo_->worker(1) + " link set eth0 mtu 1500 && echo ok"),
              "ok\n");
    ClientError e = error_of([&] { client(1); }, "joined through an interface of MTU 1500");
    EXPECT_EQ(e.kind(), ClientError::Kind::invalid) << e.what();
    EXPECT_EQ(std::string(e.what()),
              "interface eth0 has MTU 1500; xagg's frames need at least 3140 (ip link set dev "
              "eth0 mtu 9000, and the same on every link between workers and aggregator)");
    json job = control(socket_, {{"op", "show_job"}, {"job", 7}})["job"];
    EXPECT_EQ(job["members"].size(), 0u) << job;  // it never joined
}

}  // namespace
}  // namespace xagg::test
