// SPDX-License-Identifier: MIT
#include "lib/etcd/etcd_client.hpp"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace xagg::etcd {
namespace {

using nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// proto3's JSON renders int64 as a string; absent means 0.
int64_t int64_field(const json &j, const char *name)
{
    if (!j.contains(name))
        return 0;
    const json &v = j.at(name);
    return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}

// The smallest key greater than every key with this prefix: etcd's range_end for a prefix.
std::string prefix_end(std::string prefix)
{
    while (!prefix.empty()) {
        if (static_cast<unsigned char>(prefix.back()) < 0xff) {
            prefix.back() = static_cast<char>(prefix.back() + 1);
            return prefix;
        }
        prefix.pop_back();
    }
    return std::string(1, '\0');  // every key
}

KeyValue key_value(const json &kv)
{
    return {base64_decode(kv.value("key", "")), base64_decode(kv.value("value", "")),
            int64_field(kv, "mod_revision"), int64_field(kv, "lease")};
}

}  // namespace

std::string base64_encode(const std::string &in)
{
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v =
            uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6)
            out += kAlphabet[v >> s & 63];
    }
    if (size_t rest = in.size() - i) {
        uint32_t v =
            uint32_t(uint8_t(in[i])) << 16 | (rest == 2 ? uint32_t(uint8_t(in[i + 1])) << 8 : 0);
        out += kAlphabet[v >> 18 & 63];
        out += kAlphabet[v >> 12 & 63];
        out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
        out += '=';
    }
    return out;
}

std::string base64_decode(const std::string &in)
{
    std::string out;
    uint32_t v = 0;
    int bits = 0;
    for (char c : in) {
        if (c == '=')
            break;
        const char *p = std::char_traits<char>::find(kAlphabet, 64, c);
        if (!p)
            throw Error("etcd sent a value that is not base64");
        v = v << 6 | uint32_t(p - kAlphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>(v >> bits & 0xff);
        }
    }
    return out;
}

Client::Client(const std::string &endpoint) : endpoint_(endpoint)
{
    std::string hostport = endpoint;
    if (hostport.rfind("http://", 0) == 0)
        hostport = hostport.substr(7);
    while (!hostport.empty() && hostport.back() == '/')
        hostport.pop_back();
    auto colon = hostport.rfind(':');
    if (colon == std::string::npos || colon == 0)
        throw Error("etcd endpoint '" + endpoint + "' is not http://HOST:PORT");
    int port = 0;
    try {
        port = std::stoi(hostport.substr(colon + 1));
    } catch (const std::exception &) {
        throw Error("etcd endpoint '" + endpoint + "' has no port number");
    }
    http_ = std::make_unique<httplib::Client>(hostport.substr(0, colon), port);
    http_->set_connection_timeout(2);
    http_->set_read_timeout(5);
    http_->set_write_timeout(5);
}

Client::~Client() = default;

std::string Client::call(const std::string &path, const std::string &body)
{
    auto res = http_->Post(path, body, "application/json");
    if (!res)
        throw Error("etcd at " + endpoint_ + ": " + path + ": " + httplib::to_string(res.error()));
    if (res->status != 200)
        throw Error("etcd at " + endpoint_ + ": " + path + ": HTTP " + std::to_string(res->status) +
                    ": " + res->body);
    return res->body;
}

int64_t Client::grant(int ttl_seconds)
{
    json r = json::parse(call("/v3/lease/grant", json{{"TTL", ttl_seconds}}.dump()));
    int64_t id = int64_field(r, "ID");
    if (!id)
        throw Error("etcd at " + endpoint_ + " granted no lease: " + r.dump());
    return id;
}

bool Client::keepalive(int64_t lease)
{
    json r = json::parse(call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
    // An expired lease comes back without a TTL.
    return r.contains("result") && int64_field(r["result"], "TTL") > 0;
}

void Client::revoke(int64_t lease)
{
    call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
}

void Client::put(const std::string &key, const std::string &value, int64_t lease)
{
    json req{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease)
        req["lease"] = std::to_string(lease);
    call("/v3/kv/put", req.dump());
}

std::optional<KeyValue> Client::get(const std::string &key)
{
    json r = json::parse(call("/v3/kv/range", json{{"key", base64_encode(key)}}.dump()));
    if (!r.contains("kvs") || r["kvs"].empty())
        return std::nullopt;
    return key_value(r["kvs"][0]);
}

std::vector<KeyValue> Client::range(const std::string &prefix)
{
    json r = json::parse(call("/v3/kv/range", json{{"key", base64_encode(prefix)},
                                                   {"range_end", base64_encode(prefix_end(prefix))}}
                                                  .dump()));
    std::vector<KeyValue> out;
    for (const json &kv : r.value("kvs", json::array()))
        out.push_back(key_value(kv));
    return out;
}

void Client::erase(const std::string &key)
{
    call("/v3/kv/deleterange", json{{"key", base64_encode(key)}}.dump());
}

bool Client::put_if_revision(const std::string &key, const std::string &value, int64_t expected)
{
    json compare{{"key", base64_encode(key)},
                 {"target", "MOD"},
                 {"result", "EQUAL"},
                 {"mod_revision", std::to_string(expected)}};
    json req{
        {"compare", json::array({compare})},
        {"success",
         json::array({json{
             {"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}}})}};
    json r = json::parse(call("/v3/kv/txn", req.dump()));
    return r.value("succeeded", false);
}

}  // namespace xagg::etcd
