// Incremental SHA-256 (OpenSSL EVP). Thread-compatible: one hasher per thread.
#ifndef ADAPTERD_COMMON_SHA256_H_
#define ADAPTERD_COMMON_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

namespace adapterd {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& Update(std::string_view data);
  Sha256& Update(const void* data, size_t size);
  // Lower-case hex digest. The hasher must not be updated afterwards.
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_SHA256_H_
