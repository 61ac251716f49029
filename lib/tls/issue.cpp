// SPDX-License-Identifier: MIT
#include "lib/tls/issue.hpp"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lib/tls/tls.hpp"

namespace xagg::tls {

void KeyDeleter::operator()(EVP_PKEY *key) const
{
    EVP_PKEY_free(key);
}
void CertDeleter::operator()(X509 *cert) const
{
    X509_free(cert);
}

namespace {

void check(bool ok, const std::string &what)
{
    if (!ok)
        throw TlsError(what + ": " + last_error());
}

std::unique_ptr<EVP_PKEY, KeyDeleter> new_key()
{
    std::unique_ptr<EVP_PKEY, KeyDeleter> key(EVP_EC_gen("P-256"));
    check(key != nullptr, "generating an ECDSA P-256 key");
    return key;
}

// A certificate for `key`, named `common_name`, with a random 128-bit serial (RFC 5280 asks for
// unique serials per CA; random ones need no state), valid from now for `days`.
std::unique_ptr<X509, CertDeleter> new_cert(EVP_PKEY *key, const std::string &common_name,
                                            unsigned days)
{
    std::unique_ptr<X509, CertDeleter> cert(X509_new());
    check(cert != nullptr, "X509_new");
    check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");  // v3
    std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
    check(serial && BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1,
          "a random serial");
    check(BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr,
          "the serial");
    check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) != nullptr, "notBefore");
    check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) != nullptr, "notAfter");
    X509_NAME *name = X509_get_subject_name(cert.get());
    check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                     reinterpret_cast<const unsigned char *>(common_name.c_str()),
                                     -1, -1, 0) == 1,
          "the common name '" + common_name + "'");
    check(X509_set_pubkey(cert.get(), key) == 1, "X509_set_pubkey");
    return cert;
}

// One extension, in openssl's config syntax ("critical,CA:TRUE"), with the issuer known so
// that authorityKeyIdentifier can name its key.
void add_extension(X509 *cert, X509 *issuer, int nid, const std::string &value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    check(ext != nullptr, std::string(OBJ_nid2sn(nid)) + " = " + value);
    const int added = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    check(added == 1, std::string("adding ") + OBJ_nid2sn(nid));
}

// Opens `path` for writing only if it does not exist yet, with `mode`.
FILE *create_new(const std::string &path, mode_t mode)
{
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        throw TlsError(
            path + ": " + std::strerror(errno) +
            (errno == EEXIST ? " (not replaced; remove it first to make a new one)" : ""));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        throw TlsError(path + ": " + std::strerror(errno));
    }
    return f;
}

}  // namespace

Issued make_ca(const std::string &common_name, unsigned days)
{
    Issued ca{nullptr, new_key()};
    ca.cert = new_cert(ca.key.get(), common_name, days);
    check(X509_set_issuer_name(ca.cert.get(), X509_get_subject_name(ca.cert.get())) == 1,
          "the issuer");
    add_extension(ca.cert.get(), ca.cert.get(), NID_basic_constraints,
                  "critical,CA:TRUE,pathlen:0");
    add_extension(ca.cert.get(), ca.cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
    add_extension(ca.cert.get(), ca.cert.get(), NID_subject_key_identifier, "hash");
    check(X509_sign(ca.cert.get(), ca.key.get(), EVP_sha256()) > 0, "signing the CA");
    return ca;
}

Issued issue(const Issued &ca, const std::string &common_name, const std::vector<std::string> &sans,
             Usage usage, unsigned days)
{
    Issued out{nullptr, new_key()};
    out.cert = new_cert(out.key.get(), common_name, days);
    check(X509_set_issuer_name(out.cert.get(), X509_get_subject_name(ca.cert.get())) == 1,
          "the issuer");
    X509 *cert = out.cert.get();
    add_extension(cert, ca.cert.get(), NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert, ca.cert.get(), NID_key_usage, "critical,digitalSignature");
    add_extension(cert, ca.cert.get(), NID_ext_key_usage,
                  usage == Usage::server ? "serverAuth" : "clientAuth");
    add_extension(cert, ca.cert.get(), NID_subject_key_identifier, "hash");
    add_extension(cert, ca.cert.get(), NID_authority_key_identifier, "keyid:always");
    if (!sans.empty()) {
        std::string list;
        for (const std::string &san : sans) {
            if (san.rfind("IP:", 0) != 0 && san.rfind("DNS:", 0) != 0)
                throw TlsError("subjectAltName '" + san + "': expected IP:ADDRESS or DNS:NAME");
            list += (list.empty() ? "" : ",") + san;
        }
        add_extension(cert, ca.cert.get(), NID_subject_alt_name, list);
    }
    check(X509_sign(cert, ca.key.get(), EVP_sha256()) > 0, "signing " + common_name);
    return out;
}

void write_cert(const Issued &issued, const std::string &path)
{
    FILE *f = create_new(path, 0644);
    const bool ok = PEM_write_X509(f, issued.cert.get()) == 1;
    const bool closed = std::fclose(f) == 0;
    check(ok && closed, "writing " + path);
}

void write_key(const Issued &issued, const std::string &path)
{
    FILE *f = create_new(path, 0600);
    const bool ok =
        PEM_write_PrivateKey(f, issued.key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
    const bool closed = std::fclose(f) == 0;
    check(ok && closed, "writing " + path);
}

}  // namespace xagg::tls
