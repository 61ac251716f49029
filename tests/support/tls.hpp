// SPDX-License-Identifier: MIT
// A throw-away PKI for the tests of the control API's TLS, made with the openssl command: a CA,
// the daemon's certificate for the aggregator's address (10.77.0.100, as an IP SAN), a client
// certificate the same CA signed, and a second CA that signed nothing the daemon trusts.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/process.hpp"

namespace xagg::test {

struct TestPki {
    std::string ca, server_cert, server_key, client_cert, client_key, other_ca;
};

inline TestPki make_test_pki(const std::string &dir, const std::string &server_ip)
{
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    auto make_ca = [&](const std::string &name) {
        return "openssl req -x509 " + ec + " -keyout " + dir + "/" + name + ".key -out " + dir +
               "/" + name + ".pem -days 2 -subj /CN=" + name;
    };
    auto make_signed = [&](const std::string &name, const std::string &ext) {
        return "openssl req " + ec + " -keyout " + dir + "/" + name + ".key -out " + dir + "/" +
               name + ".csr -subj /CN=" + name + " && printf '" + ext + "' > " + dir + "/" + name +
               ".ext && openssl x509 -req -in " + dir + "/" + name + ".csr -CA " + dir +
               "/ca.pem -CAkey " + dir + "/ca.key -CAcreateserial -days 2 -out " + dir + "/" +
               name + ".pem -extfile " + dir + "/" + name + ".ext";
    };
    std::string out =
        run_command("set -e; " + make_ca("ca") + "; " + make_ca("other-ca") + "; " +
                    make_signed("server", "subjectAltName=IP:" + server_ip +
                                              "\\nextendedKeyUsage=serverAuth\\n") +
                    "; " + make_signed("client", "extendedKeyUsage=clientAuth\\n") + "; echo made");
    EXPECT_NE(out.find("made"), std::string::npos) << out;
    return {dir + "/ca.pem",     dir + "/server.pem", dir + "/server.key",
            dir + "/client.pem", dir + "/client.key", dir + "/other-ca.pem"};
}

}  // namespace xagg::test
