#include "common/sha256.h"

#include <openssl/evp.h>

namespace adapterd {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) { EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr); }

Sha256::~Sha256() = default;

Sha256& Sha256::Update(std::string_view data) { return Update(data.data(), data.size()); }

Sha256& Sha256::Update(const void* data, size_t size) {
  EVP_DigestUpdate(ctx_->md, data, size);
  return *this;
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(len) * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) { return Sha256().Update(data).HexDigest(); }

}  // namespace adapterd
