// SPDX-License-Identifier: MIT
// The host's side of local-first reduction (client/local_group.hpp) over a real Unix socket,
// without an aggregator: the leader gathers each rank's call and sends back what it is handed;
// ranks that hang up, call with another size, or come twice, and a leader that goes away, each
// end in a clear error rather than a hang or a wrong result.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "client/engine.hpp"
#include "client/local_group.hpp"
#include "xagg/client.hpp"

namespace xagg::client {
namespace {

using namespace std::chrono_literals;

// A name of its own per test, so that tests never meet.
std::string name()
{
    return "xagg-test/" + std::to_string(getpid()) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// What the engine does when an op ends: done, with a report.
void finish(Op &op, unsigned contributors)
{
    std::lock_guard g(op.lock);
    op.report.contributors = contributors;
    op.done = true;
    op.finished.notify_all();
}

// A leader of `ranks` ranks and its other ranks, all on this test's socket.
struct Group {
    std::unique_ptr<LocalLeader> leader;
    std::vector<std::unique_ptr<LocalMember>> members;  // local ranks 1, 2, ...
};
Group start_group(const std::string &n, unsigned ranks, uint32_t members = 1)
{
    Group g;
    std::thread accept([&] {
        g.leader = std::make_unique<LocalLeader>(n, ranks, LocalHello{members, 768}, 10s);
    });
    for (unsigned r = 1; r < ranks; r++)
        g.members.push_back(std::make_unique<LocalMember>(n, r, 10s));
    accept.join();
    return g;
}

AllReduceReport wait(const std::shared_ptr<Op> &op)
{
    std::unique_lock g(op->lock);
    op->finished.wait(g, [&] { return op->done; });
    if (op->error)
        std::rethrow_exception(op->error);
    return op->report;
}

TEST(LocalGroupTest, TheLeaderGathersEachRanksCallAndHandsBackTheResult)
{
    Group g = start_group(name(), 3, 2);
    auto &leader = g.leader;
    LocalMember &one = *g.members[0], &two = *g.members[1];
    EXPECT_EQ(one.hello().members, 2u);
    EXPECT_EQ(two.hello().chunk_elems, 768u);

    for (float call = 0; call < 3; call++) {  // calls pair up in order
        std::vector<float> a(1000, 1.0f + call), b(1000, 2.0f + call);
        auto from_one = one.submit(a.data(), nullptr, a.size());
        auto from_two = two.submit(b.data(), nullptr, b.size());
        auto buffers = leader->gather(LocalKind::floats, 1000);
        ASSERT_EQ(buffers.size(), 2u);
        float got_one, got_two;
        std::memcpy(&got_one, buffers[0].data(), sizeof(float));
        std::memcpy(&got_two, buffers[1].data(), sizeof(float));
        EXPECT_EQ(got_one, 1.0f + call);
        EXPECT_EQ(got_two, 2.0f + call);
        // The engine writes the result into every buffer: here, a sum of 100 + call.
        const float sum = 100.0f + call;
        for (auto &buffer : buffers)
            for (auto &word : buffer)
                std::memcpy(&word, &sum, sizeof(float));
        auto op = std::make_shared<Op>();
        leader->scatter(op, std::move(buffers));
        finish(*op, 8);
        EXPECT_EQ(wait(from_one).contributors, 8u);
        EXPECT_EQ(wait(from_two).contributors, 8u);
        EXPECT_EQ(a, std::vector<float>(1000, sum));
        EXPECT_EQ(b, std::vector<float>(1000, sum));
    }
}

TEST(LocalGroupTest, TheLeadersErrorReachesEveryRank)
{
    Group g = start_group(name(), 2, 1);
    auto &leader = g.leader;
    LocalMember &one = *g.members[0];
    std::vector<int32_t> v(5, 7);
    auto call = one.submit(nullptr, v.data(), v.size());
    auto buffers = leader->gather(LocalKind::ints, 5);
    auto op = std::make_shared<Op>();
    leader->scatter(op, std::move(buffers));
    {
        std::lock_guard locked(op->lock);
        op->error =
            std::make_exception_ptr(ClientError(ClientError::Kind::evicted, "rank 0 was evicted"));
        op->done = true;
        op->finished.notify_all();
    }
    try {
        wait(call);
        FAIL() << "the leader's error did not reach the rank";
    } catch (const ClientError &e) {
        EXPECT_EQ(e.kind(), ClientError::Kind::evicted);
        EXPECT_STREQ(e.what(), "rank 0 was evicted");
    }
    EXPECT_EQ(v, std::vector<int32_t>(5, 7)) << "an unsummed buffer is left as it was";
}

// ... and the group ends: the rank's call fails too (it would otherwise wait for ever), and so
// does every later one.
TEST(LocalGroupTest, ACallOfAnotherSizeOrTypeIsRefusedSayingWhich)
{
    Group g = start_group(name(), 2, 1);
    auto &leader = g.leader;
    LocalMember &one = *g.members[0];
    std::vector<float> v(10);
    auto call = one.submit(v.data(), nullptr, v.size());
    try {
        leader->gather(LocalKind::floats, 12);
        FAIL() << "a call of another size was taken";
    } catch (const ClientError &e) {
        EXPECT_EQ(e.kind(), ClientError::Kind::invalid);
        EXPECT_NE(
            std::string(e.what()).find("local rank 1 all-reduces 10 floats where local rank 0 "
                                       "all-reduces 12 floats"),
            std::string::npos)
            << e.what();
    }
    EXPECT_THROW(wait(call), ClientError);
    EXPECT_THROW(leader->gather(LocalKind::floats, 10), ClientError);
}

TEST(LocalGroupTest, ARankThatHangsUpFailsTheLeadersNextCall)
{
    Group g = start_group(name(), 2, 1);
    auto &leader = g.leader;
    g.members[0].reset();
    try {
        leader->gather(LocalKind::floats, 4);
        FAIL() << "a gone rank's call was waited for";
    } catch (const ClientError &e) {
        EXPECT_EQ(e.kind(), ClientError::Kind::closed);
        EXPECT_NE(std::string(e.what()).find("local rank 1 hung up"), std::string::npos)
            << e.what();
    }
}

TEST(LocalGroupTest, ALeaderThatGoesAwayFailsTheRanksCallsInFlight)
{
    Group g = start_group(name(), 2, 1);
    auto &leader = g.leader;
    LocalMember &one = *g.members[0];
    std::vector<float> v(100, 1.0f);
    auto call = one.submit(v.data(), nullptr, v.size());
    leader.reset();
    try {
        wait(call);
        FAIL() << "a call outlived its leader";
    } catch (const ClientError &e) {
        EXPECT_EQ(e.kind(), ClientError::Kind::closed);
    }
    EXPECT_THROW(one.submit(v.data(), nullptr, v.size()), ClientError);
}

TEST(LocalGroupTest, StrangersAndASecondRankOfOneNumberAreNotLetIn)
{
    const std::string n = name();
    std::unique_ptr<LocalLeader> leader;
    std::thread accept([&] {
        leader = std::make_unique<LocalLeader>(n, 3, LocalHello{1, 768}, 10s);
    });
    // A stranger that connects and says nothing sensible is dropped without counting.
    {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path + 1, n.data(), n.size());
        for (int i = 0;
             i < 500 &&
             connect(fd, reinterpret_cast<sockaddr *>(&a),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n.size())) != 0;
             i++)
            std::this_thread::sleep_for(10ms);
        const char garbage[8] = "garbage";
        ASSERT_EQ(write(fd, garbage, sizeof(garbage)), static_cast<ssize_t>(sizeof(garbage)));
        close(fd);
    }
    LocalMember one(n, 1, 10s);
    EXPECT_THROW(LocalMember(n, 1, 2s), ClientError);  // rank 1 is in already
    LocalMember two(n, 2, 10s);
    accept.join();
    EXPECT_EQ(two.hello().members, 1u);
}

TEST(LocalGroupTest, ALeaderWaitsOnlySoLongForItsRanks)
{
    const std::string n = name();
    try {
        LocalLeader leader(n, 3, LocalHello{1, 768}, 1s);
        FAIL() << "a leader without its ranks started";
    } catch (const ClientError &e) {
        EXPECT_EQ(e.kind(), ClientError::Kind::timeout);
        EXPECT_NE(std::string(e.what()).find("only 1 of this host's 3 ranks"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace xagg::client
