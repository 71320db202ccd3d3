// Test-only X.509 certificates, made fresh in memory with OpenSSL: a CA and
// leaf certificates it signs, for TLS and mutual-TLS tests on 127.0.0.1.
// Nothing secret is checked in; every test run makes its own keys (P-256).
//
// Aborts the test binary if OpenSSL fails: every caller needs the result.
// Thread safety: stateless.
#ifndef ADAPTERD_COMMON_TESTING_TEST_CERTS_H_
#define ADAPTERD_COMMON_TESTING_TEST_CERTS_H_

#include <string>

namespace adapterd::testing {

struct TestCert {
  std::string cert_pem;
  std::string key_pem;
};

// A self-signed CA certificate (basicConstraints CA:TRUE), valid 1 day.
TestCert MakeTestCa(const std::string& common_name);

// A certificate for `common_name` signed by `ca`, with subjectAltNames
// DNS:localhost and IP:127.0.0.1, usable for servers and clients. `expired`:
// validity ended yesterday.
TestCert MakeTestLeaf(const TestCert& ca, const std::string& common_name, bool expired = false);
// The same, valid from now + not_before_s to now + not_after_s (seconds).
TestCert MakeTestLeafValid(const TestCert& ca, const std::string& common_name, long not_before_s, long not_after_s);

}  // namespace adapterd::testing

#endif  // ADAPTERD_COMMON_TESTING_TEST_CERTS_H_
