// TLS material for gRPC: PEM certificates and keys read from files and checked
// with OpenSSL before gRPC sees them.
//
// gRPC accepts any bytes as PEM and fails later and vaguely (a server that
// does not start, a handshake that fails on every call). These functions fail
// at start-up instead, with INVALID_ARGUMENT naming the flag and the problem:
// a file that holds no PEM certificate, a key that is not a private key or
// does not belong to the certificate, a certificate that has expired. A
// certificate that is not valid yet, or expires soon, is served with a
// warning (TlsValidityWarnings) and its validity is exported as metrics, so
// an alert can fire before it expires.
//
// Thread safety: stateless; safe from any thread.
#ifndef ADAPTERD_COMMON_TLS_H_
#define ADAPTERD_COMMON_TLS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace adapterd {

// PEM text as gRPC's SslServerCredentialsOptions / SslCredentialsOptions take
// it. Empty fields are absent.
struct TlsPem {
  std::string cert_chain;   // leaf certificate first, then intermediates
  std::string private_key;  // the leaf certificate's key
  std::string ca_certs;     // trusted roots (peer verification)
  // The leaf certificate's validity, in Unix seconds (0 without cert_chain).
  int64_t not_before_seconds = 0;
  int64_t not_after_seconds = 0;
};

// Which files to read; empty = absent. `*_flag` names the flag or option each
// came from, for error messages ("--tls_cert_file").
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string cert_flag = "certificate";
  std::string key_flag = "key";
  std::string ca_flag = "CA";
};

// Reads and checks `files`:
// - cert_file and key_file come together (INVALID_ARGUMENT when one is missing);
// - cert_file holds one or more PEM certificates, the first not expired;
// - key_file holds a PEM private key matching the first certificate;
// - ca_file holds one or more PEM certificates.
// NOT_FOUND / the errno text when a file cannot be read, naming the flag.
absl::StatusOr<TlsPem> LoadTlsPem(const TlsFiles& files);

// Warnings about the leaf certificate at time `now`, for the start-up log:
// not valid yet (TLS clients refuse it until then), or expiring within
// `soon`. Empty when there is no certificate or nothing to say.
std::vector<std::string> TlsValidityWarnings(const TlsPem& pem, const std::string& cert_file, absl::Time now,
                                             absl::Duration soon = absl::Hours(24 * 30));

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_TLS_H_
