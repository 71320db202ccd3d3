#include "common/testing/test_certs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>

namespace adapterd::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test_certs: %s failed\n", what);
    std::abort();
  }
}

std::string BioString(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

std::string CertPem(X509* x) {
  BIO* bio = BIO_new(BIO_s_mem());
  Check(PEM_write_bio_X509(bio, x) == 1, "PEM_write_bio_X509");
  return BioString(bio);
}

std::string KeyPem(EVP_PKEY* k) {
  BIO* bio = BIO_new(BIO_s_mem());
  Check(PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr) == 1, "PEM_write_bio_PrivateKey");
  return BioString(bio);
}

void AddExtension(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  Check(X509_add_ext(x, ext, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(ext);
}

// Makes a certificate for `cn` with a new key; signed by (issuer, issuer_key),
// or self-signed when issuer is null.
TestCert Make(const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca, long not_before_s, long not_after_s) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  Check(key != nullptr, "EVP_EC_gen");
  X509* x = X509_new();
  Check(X509_set_version(x, 2) == 1, "X509_set_version");
  unsigned char serial[8];
  Check(RAND_bytes(serial, sizeof(serial)) == 1, "RAND_bytes");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x), not_before_s);
  X509_gmtime_adj(X509_getm_notAfter(x), not_after_s);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509_set_pubkey(x, key);
  X509* ext_issuer = issuer != nullptr ? issuer : x;
  if (ca) {
    AddExtension(x, ext_issuer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(x, ext_issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(x, ext_issuer, NID_basic_constraints, "CA:FALSE");
    AddExtension(x, ext_issuer, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    AddExtension(x, ext_issuer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  Check(X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0, "X509_sign");
  TestCert out{CertPem(x), KeyPem(key)};
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

X509* ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  Check(x != nullptr, "PEM_read_bio_X509");
  return x;
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  Check(k != nullptr, "PEM_read_bio_PrivateKey");
  return k;
}

}  // namespace

constexpr long kDay = 24L * 3600;

TestCert MakeTestCa(const std::string& common_name) {
  return Make(common_name, nullptr, nullptr, /*ca=*/true, -3600, kDay);
}

TestCert MakeTestLeaf(const TestCert& ca, const std::string& common_name, bool expired) {
  return expired ? MakeTestLeafValid(ca, common_name, -2 * kDay, -kDay)
                 : MakeTestLeafValid(ca, common_name, -3600, kDay);
}

TestCert MakeTestLeafValid(const TestCert& ca, const std::string& common_name, long not_before_s, long not_after_s) {
  X509* issuer = ParseCert(ca.cert_pem);
  EVP_PKEY* issuer_key = ParseKey(ca.key_pem);
  TestCert out = Make(common_name, issuer, issuer_key, /*ca=*/false, not_before_s, not_after_s);
  X509_free(issuer);
  EVP_PKEY_free(issuer_key);
  return out;
}

}  // namespace adapterd::testing
