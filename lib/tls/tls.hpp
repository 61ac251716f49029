// SPDX-License-Identifier: MIT
// TLS for the control API over TCP (OpenSSL): the contexts of the daemon's listener and of its
// clients, built from PEM files, and the library's errors as text. The connections themselves
// are driven by their users: the daemon's non-blocking poll loop, the client's blocking call.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace xagg::tls {

// OpenSSL's error queue (emptied) as one line, "" when empty.
std::string last_error();

class TlsError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ContextDeleter {
    void operator()(SSL_CTX *ctx) const;
};
using Context = std::unique_ptr<SSL_CTX, ContextDeleter>;

struct SslDeleter {
    void operator()(SSL *ssl) const;
};
using Connection = std::unique_ptr<SSL, SslDeleter>;

// The daemon's side: its certificate chain and key (PEM), TLS 1.2 at least. With `client_ca`,
// a client must present a certificate that CA signed. Throws TlsError naming the file.
Context server_context(const std::string &cert_file, const std::string &key_file,
                       const std::string &client_ca_file = {});

// A client's side: the server's certificate is verified against `ca_file` (the system's store
// when empty) and must name the host connected to; `cert_file` and `key_file`, when given, are
// the client's own certificate for a daemon that asks for one.
Context client_context(const std::string &ca_file, const std::string &cert_file = {},
                       const std::string &key_file = {});

}  // namespace xagg::tls
