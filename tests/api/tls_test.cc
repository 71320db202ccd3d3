// gRPC over TLS and mutual TLS: a real adapterd Server in-process on
// 127.0.0.1 with certificates made fresh by common/testing/test_certs.h,
// reached by AdapterdClient and by the built adapterctl binary.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/adapterd_client.h"
#include "client/commands.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_certs.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/api/api_test_util.h"
#include "tests/client/client_test_util.h"
#include "tests/e2e/e2e_util.h"

namespace adapterd::testing {
namespace {

using ::adapterd::client::AdapterdClient;
using ::adapterd::client::ServingStatus;
using ::adapterd::client::TlsChannelCredentials;
using ::adapterd::client::TlsClientFiles;
using ::adapterd::storage::testing::TempDir;
using ::testing::HasSubstr;

// Files of one test PKI: a server CA and its server certificate, a client CA
// and its client certificate, and a stranger CA that signed neither.
struct Pki {
  explicit Pki(const TempDir& dir) {
    const TestCert server_ca = MakeTestCa("adapterd test server CA");
    const TestCert server = MakeTestLeaf(server_ca, "localhost");
    const TestCert client_ca = MakeTestCa("adapterd test client CA");
    const TestCert client = MakeTestLeaf(client_ca, "tenant-client");
    const TestCert stranger_ca = MakeTestCa("stranger CA");
    const TestCert stranger = MakeTestLeaf(stranger_ca, "stranger");
    server_ca_file = dir.Write("server_ca.pem", server_ca.cert_pem);
    server_cert_file = dir.Write("server.pem", server.cert_pem);
    server_key_file = dir.Write("server.key", server.key_pem);
    client_ca_file = dir.Write("client_ca.pem", client_ca.cert_pem);
    client_cert_file = dir.Write("client.pem", client.cert_pem);
    client_key_file = dir.Write("client.key", client.key_pem);
    stranger_ca_file = dir.Write("stranger_ca.pem", stranger_ca.cert_pem);
    stranger_cert_file = dir.Write("stranger.pem", stranger.cert_pem);
    stranger_key_file = dir.Write("stranger.key", stranger.key_pem);
    expired_cert_file = dir.Write("expired.pem", MakeTestLeaf(server_ca, "localhost", /*expired=*/true).cert_pem);
    const TestCert future = MakeTestLeafValid(server_ca, "localhost", 30 * 86400, 60 * 86400);
    future_cert_file = dir.Write("future.pem", future.cert_pem);
    future_key_file = dir.Write("future.key", future.key_pem);
    const TestCert expiring = MakeTestLeafValid(server_ca, "localhost", -86400, 2 * 86400);
    expiring_cert_file = dir.Write("expiring.pem", expiring.cert_pem);
    expiring_key_file = dir.Write("expiring.key", expiring.key_pem);
  }
  std::string server_ca_file, server_cert_file, server_key_file;
  std::string client_ca_file, client_cert_file, client_key_file;
  std::string stranger_ca_file, stranger_cert_file, stranger_key_file;
  std::string expired_cert_file;
  std::string future_cert_file, future_key_file;      // valid from 30 days ahead
  std::string expiring_cert_file, expiring_key_file;  // expires in 2 days
};

// Health over a client with `files` (plaintext when null).
absl::StatusOr<ServingStatus> HealthVia(int port, const TlsClientFiles* files) {
  AdapterdClient::Options o;
  o.server = absl::StrCat("127.0.0.1:", port);
  o.default_deadline = absl::Seconds(10);
  if (files != nullptr) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = TlsChannelCredentials(*files);
    if (!creds.ok()) return creds.status();
    o.credentials = *creds;
  }
  absl::StatusOr<std::unique_ptr<AdapterdClient>> client = AdapterdClient::Create(std::move(o));
  if (!client.ok()) return client.status();
  return (*client)->Health();
}

void ExpectServing(const absl::StatusOr<ServingStatus>& status) {
  ASSERT_OK(status.status());
  EXPECT_EQ(*status, ServingStatus::kServing);
}

int Adapterctl(const std::vector<std::string>& flags, const TempDir& dir) {
  std::vector<std::string> argv = {client::testing::AdapterctlPath()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<client::testing::RunResult> r = client::testing::RunProgram(argv, {}, 60);
  EXPECT_OK(r.status());
  return r.ok() ? r->exit_code : -1;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    pki_ = new Pki(*dir_);
    ASSERT_OK(WriteFixtureModel(dir_->Sub("model")));
    ServerOptions tls = TestServerOptions(dir_->Sub("data-tls"), dir_->Sub("model"));
    tls.grpc.tls_cert_file = pki_->server_cert_file;
    tls.grpc.tls_key_file = pki_->server_key_file;
    auto server = Server::Start(tls);
    ASSERT_OK(server.status());
    tls_server_ = server->release();
    ServerOptions mtls = tls;
    mtls.storage.data_dir = dir_->Sub("data-mtls");
    mtls.grpc.tls_client_ca_file = pki_->client_ca_file;
    server = Server::Start(mtls);
    ASSERT_OK(server.status());
    mtls_server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete tls_server_;
    delete mtls_server_;
    delete pki_;
    delete dir_;
  }

  static TempDir* dir_;
  static Pki* pki_;
  static Server* tls_server_;
  static Server* mtls_server_;
};
TempDir* TlsTest::dir_ = nullptr;
Pki* TlsTest::pki_ = nullptr;
Server* TlsTest::tls_server_ = nullptr;
Server* TlsTest::mtls_server_ = nullptr;

TEST_F(TlsTest, AClientTrustingTheServersCaIsServed) {
  TlsClientFiles files{.ca_file = pki_->server_ca_file};
  ExpectServing(HealthVia(tls_server_->grpc_port(), &files));
}

TEST_F(TlsTest, APlaintextClientIsNotServed) {
  EXPECT_THAT(HealthVia(tls_server_->grpc_port(), nullptr), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, AClientTrustingAnotherCaRefusesTheServer) {
  TlsClientFiles files{.ca_file = pki_->stranger_ca_file};
  EXPECT_THAT(HealthVia(tls_server_->grpc_port(), &files), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, MutualTlsServesOnlyCertificatesItsClientCaSigned) {
  const int port = mtls_server_->grpc_port();
  TlsClientFiles good{pki_->server_ca_file, pki_->client_cert_file, pki_->client_key_file};
  ExpectServing(HealthVia(port, &good));
  TlsClientFiles no_cert{.ca_file = pki_->server_ca_file};
  EXPECT_THAT(HealthVia(port, &no_cert), StatusIs(absl::StatusCode::kUnavailable));
  TlsClientFiles stranger{pki_->server_ca_file, pki_->stranger_cert_file, pki_->stranger_key_file};
  EXPECT_THAT(HealthVia(port, &stranger), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(HealthVia(port, nullptr), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, AdapterctlSpeaksTlsAndMutualTls) {
  const std::string tls = absl::StrCat("127.0.0.1:", tls_server_->grpc_port());
  const std::string mtls = absl::StrCat("127.0.0.1:", mtls_server_->grpc_port());
  EXPECT_EQ(Adapterctl({"--server", tls, "--timeout", "10", "--tls-ca", pki_->server_ca_file, "health"}, *dir_),
            client::kExitOk);
  EXPECT_EQ(Adapterctl({"--server", tls, "--timeout", "10", "health"}, *dir_), client::kExitUnavailable);
  EXPECT_EQ(Adapterctl({"--server", mtls, "--timeout", "10", "--tls-ca", pki_->server_ca_file, "--tls-cert",
                        pki_->client_cert_file, "--tls-key", pki_->client_key_file, "health"},
                       *dir_),
            client::kExitOk);
  EXPECT_EQ(Adapterctl({"--server", mtls, "--timeout", "10", "--tls-ca", pki_->server_ca_file, "health"}, *dir_),
            client::kExitUnavailable);
  // A key that is not the certificate's is a usage error, before any call.
  EXPECT_EQ(Adapterctl({"--server", mtls, "--tls-ca", pki_->server_ca_file, "--tls-cert", pki_->client_cert_file,
                        "--tls-key", pki_->stranger_key_file, "health"},
                       *dir_),
            client::kExitUsage);
}

TEST_F(TlsTest, BadTlsFilesStopTheServerAtStartWithTheFlagNamed) {
  auto start = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    ServerOptions o = TestServerOptions(dir_->Sub("data-bad"), dir_->Sub("model"));
    o.grpc.tls_cert_file = cert;
    o.grpc.tls_key_file = key;
    o.grpc.tls_client_ca_file = ca;
    return Server::Start(o).status();
  };
  EXPECT_THAT(start(pki_->server_cert_file, pki_->client_key_file, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_key_file")));
  EXPECT_THAT(start(pki_->expired_cert_file, pki_->server_key_file, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expired")));
  EXPECT_THAT(start(pki_->server_key_file, pki_->server_key_file, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert_file")));
  EXPECT_THAT(start(pki_->server_cert_file, pki_->server_key_file, pki_->server_key_file),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_client_ca_file")));
  EXPECT_THAT(start(pki_->server_cert_file, dir_->Sub("no-such.key"), ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--tls_key_file")));
  EXPECT_THAT(start(pki_->server_cert_file, "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("go together")));
}

// A certificate not valid yet (clients refuse it until then) or expiring
// soon is warned about at start-up, not served in silence.
TEST_F(TlsTest, ACertificateNotYetValidOrExpiringSoonIsWarnedAbout) {
  const absl::Time now = absl::Now();
  ASSERT_OK_AND_ASSIGN(TlsPem future,
                       LoadTlsPem({.cert_file = pki_->future_cert_file, .key_file = pki_->future_key_file}));
  EXPECT_NEAR(static_cast<double>(future.not_before_seconds), absl::ToUnixSeconds(now + absl::Hours(24 * 30)), 120);
  std::vector<std::string> w = TlsValidityWarnings(future, "future.pem", now);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("not valid until"));
  ASSERT_OK_AND_ASSIGN(TlsPem expiring,
                       LoadTlsPem({.cert_file = pki_->expiring_cert_file, .key_file = pki_->expiring_key_file}));
  w = TlsValidityWarnings(expiring, "expiring.pem", now);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("expires at"));
  ASSERT_OK_AND_ASSIGN(TlsPem fine,
                       LoadTlsPem({.cert_file = pki_->server_cert_file, .key_file = pki_->server_key_file}));
  EXPECT_TRUE(TlsValidityWarnings(fine, "server.pem", now, absl::Hours(1)).empty());

  // The serving certificate's validity is on /metrics, for an alert.
  absl::StatusOr<e2e::HttpResponse> m = e2e::HttpGet(tls_server_->metrics_port(), "/metrics", absl::Seconds(10));
  ASSERT_OK(m.status());
  auto value = [&](const std::string& name) {
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  EXPECT_EQ(value("adapterd_tls_certificate_expiry_timestamp_seconds"), static_cast<double>(fine.not_after_seconds));
  EXPECT_EQ(value("adapterd_tls_certificate_not_before_timestamp_seconds"),
            static_cast<double>(fine.not_before_seconds));
}

}  // namespace
}  // namespace adapterd::testing
