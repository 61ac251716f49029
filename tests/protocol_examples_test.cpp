// SPDX-License-Identifier: MIT
// docs/PROTOCOL.md is executable: its example frames (```xagg-frame blocks) are read from the
// document and run, in order, through the XDP program (BPF_PROG_TEST_RUN) and, as datagrams,
// through the host-side parameter server. Each says what must happen to it (action=, counter=)
// and which frame must come back (reply=). Change the wire format without the document, or
// the document without the code, and this test fails.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/jobs/job_entry.hpp"
#include "daemon/datapath/host_ps.hpp"
#include "lib/fastpath/fastpath.hpp"
#include "tests/support/fastpath_fixture.hpp"
#include "tests/support/packet_builder.hpp"

namespace xagg::test {
namespace {

struct ExampleFrame {
    std::string name;
    std::map<std::string, std::string> attrs;  // action, counter, reply
    Bytes bytes;
    int line = 0;  // of the block's opening fence, for messages
};

// One line of a block: hex bytes, optionally "* N" to repeat them N times in all.
Bytes parse_line(const std::string &text, int line)
{
    std::string body = text.substr(0, text.find('#'));
    size_t repeat = 1;
    if (auto star = body.find('*'); star != std::string::npos) {
        repeat = std::stoul(body.substr(star + 1));
        body = body.substr(0, star);
    }
    Bytes once;
    std::istringstream in(body);
    for (std::string tok; in >> tok;) {
        if (tok.size() != 2 || !std::isxdigit(tok[0]) || !std::isxdigit(tok[1]))
            throw std::runtime_error("PROTOCOL.md:" + std::to_string(line) + ": '" + tok +
                                     "' is not a hex byte");
        once.push_back(static_cast<uint8_t>(std::stoul(tok, nullptr, 16)));
    }
    Bytes out;
    for (size_t i = 0; i < repeat; i++)
        out.insert(out.end(), once.begin(), once.end());
    return out;
}

std::vector<ExampleFrame> read_examples(const std::string &path)
{
    std::ifstream in(path);
    std::vector<ExampleFrame> frames;
    const std::regex fence(R"(^```xagg-frame ([a-z0-9-]+)(.*)$)");
    std::string text;
    ExampleFrame *open = nullptr;
    for (int line = 1; std::getline(in, text); line++) {
        std::smatch m;
        if (!open && std::regex_match(text, m, fence)) {
            open = &frames.emplace_back();
            open->name = m[1];
            open->line = line;
            std::istringstream attrs(m[2]);
            for (std::string kv; attrs >> kv;)
                open->attrs[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
        } else if (open && text == "```") {
            open = nullptr;
        } else if (open) {
            Bytes b = parse_line(text, line);
            open->bytes.insert(open->bytes.end(), b.begin(), b.end());
        }
    }
    return frames;
}

// The setup every example assumes (PROTOCOL.md, "Example frames"): a job of standard chunks and
// one of jumbo chunks, with the keys the frames carry.
struct ExampleJob {
    uint32_t id;
    uint64_t key;
    const char *group;
    uint16_t chunk_elems;
    uint32_t region_base, region_positions;  // slot positions: four chunks of either size
};
constexpr ExampleJob kJobs[] = {
    {7, 0x5ec2e79a41b03d16, "239.1.0.7", XAGG_CHUNK_ELEMS, 0, 4},
    {9, 0x41b03d165ec2e79a, "239.1.0.9", XAGG_JUMBO_CHUNK_ELEMS, 4, 4 * XAGG_JUMBO_SLOT_PARTS},
};
constexpr uint16_t kGroupPort = 9872;

enum xagg_counter counter_named(const std::string &name)
{
    for (int c = 0; c < XAGG_CNT_MAX; c++)
        if (name == counter_name(static_cast<xagg_counter>(c)))
            return static_cast<xagg_counter>(c);
    throw std::runtime_error("no counter named '" + name + "'");
}

class ProtocolExamplesTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "BPF_PROG_TEST_RUN needs root (CAP_BPF + CAP_NET_ADMIN)";
        if (std::string why = untestable_variant(); !why.empty())
            GTEST_SKIP() << why;
        examples_ = read_examples(XAGG_SOURCE_DIR "/docs/PROTOCOL.md");
        for (const auto &f : examples_)
            by_name_[f.name] = &f;
        fast_ = std::make_unique<FastPath>(test_fastpath_config(4, 16));
        fast_->load();
        // The host path serves the same jobs whole (no fast-path region).
        host_ = std::make_unique<daemon::HostPs>(XAGG_DEFAULT_PORT, "lo", 0);
        for (const ExampleJob &example : kJobs) {
            daemon::Job job;
            job.id = example.id;
            job.workers = 2;
            job.chunk_elems = example.chunk_elems;
            job.positions = example.region_positions;
            job.tag = example.id;
            job.key = example.key;
            job.group.s_addr = htonl(ip4(example.group));
            job.group_port = kGroupPort;
            job.members[0] = {0, in_addr{htonl(ip4("10.0.0.1"))}, 5000};
            job.members[1] = {1, in_addr{htonl(ip4("10.0.0.2"))}, 5001};
            host_->put_job(job);
            // The fast path's entry is the daemon's own translation of the job, with a region.
            JobSpec spec = daemon::job_spec(job);
            spec.region_base = example.region_base;
            spec.region_positions = example.region_positions;
            fast_->put_job(spec);
            for (const auto &[rank, m] : job.members)
                fast_->put_member(job.id, rank, m.addr, m.port);
        }
    }

    std::vector<ExampleFrame> examples_;
    std::map<std::string, const ExampleFrame *> by_name_;
    std::unique_ptr<FastPath> fast_;
    std::unique_ptr<daemon::HostPs> host_;
};

uint16_t be16_at(const Bytes &b, size_t at)
{
    return static_cast<uint16_t>(b[at] << 8 | b[at + 1]);
}

TEST_F(ProtocolExamplesTest, EveryExampleFrameDoesWhatTheDocumentSays)
{
    // The document keeps its examples: a contribution, a completion with its result, a re-send,
    // and refusals.
    std::map<std::string, int> seen;
    for (const auto &f : examples_)
        if (f.attrs.count("counter"))
            seen[f.attrs.at("counter")]++;
    ASSERT_GE(seen["aggregated"], 1) << "PROTOCOL.md lost its example contribution";
    ASSERT_GE(seen["completed"], 1) << "PROTOCOL.md lost its example result";
    ASSERT_GE(seen["resent"], 1) << "PROTOCOL.md lost its example re-send";
    ASSERT_GE(examples_.size(), 10u);
    ASSERT_GE(std::count_if(
                  examples_.begin(), examples_.end(),
                  [](const ExampleFrame &f) { return f.bytes.size() == XAGG_JUMBO_FRAME_BYTES; }),
              3)
        << "PROTOCOL.md lost its jumbo exchange";

    for (const ExampleFrame &f : examples_) {
        if (!f.attrs.count("action"))
            continue;  // a frame the aggregator sends, checked as some input's reply
        SCOPED_TRACE("PROTOCOL.md:" + std::to_string(f.line) + " frame " + f.name);
        ASSERT_GE(f.bytes.size(), off::payload) << "shorter than the headers";
        const enum xagg_counter want = counter_named(f.attrs.at("counter"));
        const ExampleFrame *reply = nullptr;
        if (f.attrs.count("reply")) {
            ASSERT_EQ(by_name_.count(f.attrs.at("reply")), 1u)
                << "no frame " << f.attrs.at("reply");
            reply = by_name_.at(f.attrs.at("reply"));
        }

        // The fast path: the action, exactly that counter, and the reply byte for byte.
        Bytes out(f.bytes.size() + 256);
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f.bytes.data(), .data_out = out.data(),
                    .data_size_in = static_cast<uint32_t>(f.bytes.size()),
                    .data_size_out = static_cast<uint32_t>(out.size()), .repeat = 1);
        const Counters before = fast_->counters();
        ASSERT_EQ(bpf_prog_test_run_opts(fast_->prog_fd(), &opts), 0);
        const Counters after = fast_->counters();
        out.resize(opts.data_size_out);
        const std::string &action = f.attrs.at("action");
        EXPECT_EQ(opts.retval, action == "tx"     ? XDP_TX
                               : action == "pass" ? XDP_PASS
                                                  : XDP_DROP)
            << "action=" << action;
        for (int c = 0; c < XAGG_CNT_MAX; c++)
            EXPECT_EQ(after[c] - before[c],
                      c == XAGG_CNT_SUMMED_VALUES ? (adds_values(want) ? nelem_of(f.bytes) : 0u)
                      : c == XAGG_CNT_CE_MARKED
                          ? (adds_values(want) && ce_marked(f.bytes) ? 1u : 0u)
                          : (c == want ? 1u : 0u))
                << counter_name(static_cast<xagg_counter>(c));
        if (reply) {
            EXPECT_EQ(out, reply->bytes) << "the reply is not frame " << reply->name;
        }

        // The host path, given the datagram from the same source: the same counter, and the
        // same reply datagram, marked FALLBACK, to the same destination. A frame marked
        // host=kernel never reaches it: its kernel drops it first (a bad UDP checksum).
        if (f.attrs.count("host") && f.attrs.at("host") == "kernel")
            continue;
        const size_t udp_len = be16_at(f.bytes, off::udp_len);
        const Bytes datagram(f.bytes.begin() + off::x, f.bytes.begin() + off::udp + udp_len);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        std::memcpy(&from.sin_addr.s_addr, &f.bytes[off::ip_src], 4);
        std::memcpy(&from.sin_port, &f.bytes[off::udp_sport], 2);
        std::vector<daemon::HostPs::Reply> replies;
        EXPECT_EQ(
            std::string(counter_name(host_->handle(datagram, from, f.bytes[off::ip_tos], replies))),
            counter_name(want));
        ASSERT_EQ(replies.size(), reply ? 1u : 0u);
        if (!reply)
            continue;
        Bytes want_datagram(reply->bytes.begin() + off::x, reply->bytes.end());
        want_datagram[off::x_flags - off::x] |= XAGG_F_FALLBACK;
        EXPECT_EQ(Bytes(replies[0].data.begin(), replies[0].data.begin() + replies[0].size),
                  want_datagram);
        EXPECT_EQ(std::memcmp(&replies[0].to.sin_addr.s_addr, &reply->bytes[off::ip_dst], 4), 0);
        EXPECT_EQ(std::memcmp(&replies[0].to.sin_port, &reply->bytes[off::udp_dport], 2), 0);
    }
}

}  // namespace
}  // namespace xagg::test
