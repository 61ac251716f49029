// SPDX-License-Identifier: MIT
#include "lib/tls/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace xagg::tls {

std::string last_error()
{
    std::string out;
    while (unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out;
}

void ContextDeleter::operator()(SSL_CTX *ctx) const
{
    SSL_CTX_free(ctx);
}

void SslDeleter::operator()(SSL *ssl) const
{
    SSL_free(ssl);
}

namespace {

Context new_context(const SSL_METHOD *method)
{
    Context ctx(SSL_CTX_new(method));
    if (!ctx)
        throw TlsError("cannot create a TLS context: " + last_error());
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    // Writes may complete in parts, from a buffer that moved: the daemon's reply strings.
    SSL_CTX_set_mode(ctx.get(),
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

void use_certificate(SSL_CTX *ctx, const std::string &cert_file, const std::string &key_file)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1)
        throw TlsError("cannot use the certificate " + cert_file + ": " + last_error());
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1)
        throw TlsError("cannot use the private key " + key_file + ": " + last_error());
    if (SSL_CTX_check_private_key(ctx) != 1)
        throw TlsError("the private key " + key_file + " does not match the certificate " +
                       cert_file);
}

}  // namespace

Context server_context(const std::string &cert_file, const std::string &key_file,
                       const std::string &client_ca_file)
{
    Context ctx = new_context(TLS_server_method());
    use_certificate(ctx.get(), cert_file, key_file);
    if (!client_ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(ctx.get(), client_ca_file.c_str(), nullptr) != 1)
            throw TlsError("cannot read the client CA " + client_ca_file + ": " + last_error());
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    return ctx;
}

Context client_context(const std::string &ca_file, const std::string &cert_file,
                       const std::string &key_file)
{
    Context ctx = new_context(TLS_client_method());
    if (ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) != 1
                        : SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1)
        throw TlsError("cannot read the CA " + (ca_file.empty() ? "store" : ca_file) + ": " +
                       last_error());
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (!cert_file.empty())
        use_certificate(ctx.get(), cert_file, key_file.empty() ? cert_file : key_file);
    return ctx;
}

}  // namespace xagg::tls
