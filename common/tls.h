// TLS material for gRPC: PEM certificates and keys read from files and checked
// with OpenSSL before gRPC sees them.
//
// gRPC accepts any bytes as PEM and fails later and vaguely (a server that
// does not start, a handshake that fails on every call). These functions fail
// at start-up instead, with INVALID_ARGUMENT naming the flag and the problem:
// a file that holds no PEM certificate, a key that is not a private key or
// does not belong to the certificate, a certificate that has expired.
//
// Thread safety: stateless; safe from any thread.
#ifndef ADAPTERD_COMMON_TLS_H_
#define ADAPTERD_COMMON_TLS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace adapterd {

// PEM text as gRPC's SslServerCredentialsOptions / SslCredentialsOptions take
// it. Empty fields are absent.
struct TlsPem {
  std::string cert_chain;   // leaf certificate first, then intermediates
  std::string private_key;  // the leaf certificate's key
  std::string ca_certs;     // trusted roots (peer verification)
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

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_TLS_H_
