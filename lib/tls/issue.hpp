// SPDX-License-Identifier: MIT
// A small PKI for the control API (`xaggctl tls init`): a CA, and certificates it signs for
// xaggd (with the addresses clients connect to as subjectAltNames) and for clients (mutual
// TLS). ECDSA P-256 keys, SHA-256 signatures, X.509 v3 with the extensions a verifier checks.
#pragma once

#include <memory>
#include <string>
#include <vector>

typedef struct evp_pkey_st EVP_PKEY;
typedef struct x509_st X509;

namespace xagg::tls {

struct KeyDeleter {
    void operator()(EVP_PKEY *key) const;
};
struct CertDeleter {
    void operator()(X509 *cert) const;
};

// A certificate and its private key.
struct Issued {
    std::unique_ptr<X509, CertDeleter> cert;
    std::unique_ptr<EVP_PKEY, KeyDeleter> key;
};

enum class Usage { server, client };

// A self-signed CA named `common_name`, valid for `days`. Throws TlsError.
Issued make_ca(const std::string &common_name, unsigned days);

// A certificate the CA signs: for a server, every `sans` entry ("IP:10.0.0.5" or
// "DNS:agg1.example") is a name clients may connect to; a client's names only identify it.
// Throws TlsError (a malformed name among them).
Issued issue(const Issued &ca, const std::string &common_name, const std::vector<std::string> &sans,
             Usage usage, unsigned days);

// Writes the certificate (PEM) with mode 0644 and the key (PEM, unencrypted) with mode 0600;
// refuses to replace a file that exists. Throws TlsError naming the file.
void write_cert(const Issued &issued, const std::string &path);
void write_key(const Issued &issued, const std::string &path);

}  // namespace xagg::tls
