// SPDX-License-Identifier: MIT
// A small client for etcd's v3 API through its JSON gateway (etcd 3.4, Debian's etcd-server):
// the key-value calls, leases and one compare-and-put. xagg keeps its node registry and job
// placements in etcd and relies on it for consistency (leases for liveness, revisions for
// concurrent writers); nothing here is a consensus of its own. One request per call, blocking,
// with a short timeout; every failure throws etcd::Error saying which call and why.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace httplib {
class Client;
}

namespace xagg::etcd {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct KeyValue {
    std::string key, value;
    int64_t mod_revision = 0;
    int64_t lease = 0;
};

class Client {
public:
    // `endpoint`: "http://HOST:PORT" or "HOST:PORT".
    explicit Client(const std::string &endpoint);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    const std::string &endpoint() const { return endpoint_; }

    // A lease of `ttl_seconds`: keys put under it vanish when it is not kept alive.
    int64_t grant(int ttl_seconds);
    // Renews the lease; false when it has expired (its keys are gone).
    bool keepalive(int64_t lease);
    void revoke(int64_t lease);

    void put(const std::string &key, const std::string &value, int64_t lease = 0);
    std::optional<KeyValue> get(const std::string &key);
    // Every key that starts with `prefix`, in key order.
    std::vector<KeyValue> range(const std::string &prefix);
    void erase(const std::string &key);
    // Puts only if the key's mod revision is still `expected` (0: the key must not exist);
    // whether it did. The way concurrent writers agree without a lock.
    bool put_if_revision(const std::string &key, const std::string &value, int64_t expected);

private:
    std::string call(const std::string &path, const std::string &body);

    std::string endpoint_;
    std::unique_ptr<httplib::Client> http_;
};

// Base64 as the gateway wants keys and values (standard alphabet, padded).
std::string base64_encode(const std::string &in);
std::string base64_decode(const std::string &in);

}  // namespace xagg::etcd
