#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"

namespace adapterd {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

BioPtr MemBio(const std::string& pem) { return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

absl::StatusOr<std::string> ReadNamed(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(), absl::StrCat(flag, ": ", contents.status().message()));
  }
  return contents;
}

// The certificates in `pem`, in order; INVALID_ARGUMENT when there is none.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem, const std::string& flag,
                                                       const std::string& path) {
  BioPtr bio = MemBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the loop ends on "no start line": not an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, " holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"));
  }
  return certs;
}

// An ASN1 time as Unix seconds (0 if OpenSSL cannot read it).
int64_t UnixSeconds(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string Utc(int64_t seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(seconds), absl::UTCTimeZone());
}

}  // namespace

std::vector<std::string> TlsValidityWarnings(const TlsPem& pem, const std::string& cert_file, absl::Time now,
                                             absl::Duration soon) {
  std::vector<std::string> out;
  if (pem.cert_chain.empty()) return out;
  const absl::Time not_before = absl::FromUnixSeconds(pem.not_before_seconds);
  const absl::Time not_after = absl::FromUnixSeconds(pem.not_after_seconds);
  if (now < not_before) {
    out.push_back(absl::StrCat("the TLS certificate ", cert_file, " is not valid until ", Utc(pem.not_before_seconds),
                               " (", absl::FormatDuration(absl::Trunc(not_before - now, absl::Minutes(1))),
                               " from now): TLS clients refuse it until then"));
  }
  if (not_after - now < soon) {
    out.push_back(absl::StrCat("the TLS certificate ", cert_file, " expires at ", Utc(pem.not_after_seconds), " (",
                               absl::FormatDuration(absl::Trunc(not_after - now, absl::Minutes(1))),
                               " from now): renew it and restart adapterd"));
  }
  return out;
}

absl::StatusOr<TlsPem> LoadTlsPem(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.cert_flag, " and ", files.key_flag, " go together: give both or neither"));
  }
  TlsPem out;
  if (!files.cert_file.empty()) {
    auto cert = ReadNamed(files.cert_file, files.cert_flag);
    if (!cert.ok()) return cert.status();
    out.cert_chain = *std::move(cert);
    auto certs = ParseCertificates(out.cert_chain, files.cert_flag, files.cert_file);
    if (!certs.ok()) return certs.status();
    X509* leaf = (*certs)[0].get();
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(files.cert_flag, " ", files.cert_file, ": the certificate has expired"));
    }
    out.not_before_seconds = UnixSeconds(X509_get0_notBefore(leaf));
    out.not_after_seconds = UnixSeconds(X509_get0_notAfter(leaf));
    auto key = ReadNamed(files.key_file, files.key_flag);
    if (!key.ok()) return key.status();
    out.private_key = *std::move(key);
    BioPtr bio = MemBio(out.private_key);
    PkeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    if (pkey == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(files.key_flag, " ", files.key_file, " holds no unencrypted PEM private key"));
    }
    if (X509_check_private_key(leaf, pkey.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(files.key_flag, " ", files.key_file,
                                                     " is not the key of the certificate in ", files.cert_flag, " ",
                                                     files.cert_file));
    }
  }
  if (!files.ca_file.empty()) {
    auto ca = ReadNamed(files.ca_file, files.ca_flag);
    if (!ca.ok()) return ca.status();
    out.ca_certs = *std::move(ca);
    auto certs = ParseCertificates(out.ca_certs, files.ca_flag, files.ca_file);
    if (!certs.ok()) return certs.status();
  }
  return out;
}

}  // namespace adapterd
