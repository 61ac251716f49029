// SPDX-License-Identifier: MIT
// lib/etcd against a real etcd on loopback: keys, prefixes, leases, compare-and-put.
#include <gtest/gtest.h>
#include <unistd.h>

#include "lib/etcd/etcd_client.hpp"
#include "tests/support/etcd.hpp"

namespace xagg::test {
namespace {

class EtcdClientTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir_ = "/tmp/xaggt-etcd-" + std::to_string(getpid());
        // A port of its own per process, so parallel test runs do not meet.
        server_ = std::make_unique<EtcdServer>(dir_, "127.0.0.1", 20000 + getpid() % 20000 * 2);
    }
    void TearDown() override
    {
        server_.reset();
        std::filesystem::remove_all(dir_);
    }
    std::string dir_;
    std::unique_ptr<EtcdServer> server_;
};

TEST_F(EtcdClientTest, KeysPrefixesAndDeletes)
{
    etcd::Client c(server_->endpoint());
    EXPECT_EQ(c.get("/xagg/nodes/a"), std::nullopt);
    c.put("/xagg/nodes/a", "{\"x\":1}");
    c.put("/xagg/nodes/b", std::string("bin\0ary\xff", 8));
    c.put("/xagg/nodesX", "not under the prefix");
    auto a = c.get("/xagg/nodes/a");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->value, "{\"x\":1}");
    EXPECT_GT(a->mod_revision, 0);
    auto all = c.range("/xagg/nodes/");
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].key, "/xagg/nodes/a");
    EXPECT_EQ(all[1].value, std::string("bin\0ary\xff", 8));
    c.erase("/xagg/nodes/a");
    EXPECT_EQ(c.range("/xagg/nodes/").size(), 1u);
}

TEST_F(EtcdClientTest, AKeyUnderALeaseGoesWithIt)
{
    etcd::Client c(server_->endpoint());
    int64_t lease = c.grant(5);
    c.put("/xagg/nodes/n1", "alive", lease);
    EXPECT_EQ(c.get("/xagg/nodes/n1")->lease, lease);
    EXPECT_TRUE(c.keepalive(lease));
    c.revoke(lease);
    EXPECT_EQ(c.get("/xagg/nodes/n1"), std::nullopt);
    EXPECT_FALSE(c.keepalive(lease));
}

TEST_F(EtcdClientTest, PutIfRevisionLetsOneOfTwoWritersWin)
{
    etcd::Client c(server_->endpoint());
    EXPECT_TRUE(c.put_if_revision("/xagg/placement/7", "first", 0));  // absent: created
    EXPECT_FALSE(c.put_if_revision("/xagg/placement/7", "again", 0));
    int64_t rev = c.get("/xagg/placement/7")->mod_revision;
    EXPECT_TRUE(c.put_if_revision("/xagg/placement/7", "second", rev));
    EXPECT_FALSE(c.put_if_revision("/xagg/placement/7", "stale", rev));  // someone wrote since
    EXPECT_EQ(c.get("/xagg/placement/7")->value, "second");
}

TEST(EtcdBase64Test, RoundTripsEveryLength)
{
    EXPECT_EQ(etcd::base64_encode("/xagg"), "L3hhZ2c=");
    EXPECT_EQ(etcd::base64_encode("ab"), "YWI=");
    EXPECT_EQ(etcd::base64_encode("abc"), "YWJj");
    for (size_t n = 0; n < 10; n++) {
        std::string s;
        for (size_t i = 0; i < n; i++)
            s += static_cast<char>(i * 37 + 200);
        EXPECT_EQ(etcd::base64_decode(etcd::base64_encode(s)), s) << n;
    }
    EXPECT_THROW(etcd::base64_decode("a*b"), etcd::Error);
}

TEST(EtcdEndpointTest, ABadEndpointIsRefusedClearly)
{
    EXPECT_THROW(etcd::Client("localhost"), etcd::Error);
    etcd::Client nobody("http://127.0.0.1:1");
    try {
        nobody.get("/x");
        ADD_FAILURE() << "no error from a closed port";
    } catch (const etcd::Error &e) {
        EXPECT_NE(std::string(e.what()).find("etcd at http://127.0.0.1:1: /v3/kv/range"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace xagg::test
