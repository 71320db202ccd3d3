// Fuzzes the tenants file (server/api/tenants.h): TenantRegistry::Create and
// Reload parse it at start-up and on SIGHUP, and an operator's typo must
// never crash the server or leave a half-loaded table.
//
// Input: the file's bytes (written to a private temp file, mode 0600).
//
// Invariants: a file that does not load is INVALID_ARGUMENT with a valid
// UTF-8 message, and Reload() of it keeps the previous table (a key that
// worked still works). A file that loads has unique, valid tenant ids;
// Authenticate of any key is OK or UNAUTHENTICATED; Reload() of the same
// bytes succeeds with the same ids.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "common/utf8.h"
#include "server/api/ids.h"
#include "server/api/tenants.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::string TempPath() {
  static const std::string path = "/tmp/adapterd_tenants_fuzz." + std::to_string(::getpid()) + ".json";
  return path;
}

void Write(std::string_view bytes) {
  {
    std::ofstream out(TempPath(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ::chmod(TempPath().c_str(), 0600);
}

adapterd::api::TenantRegistry::Options Options() {
  adapterd::api::TenantRegistry::Options o;
  o.tenants_file = TempPath();
  o.warn = [](const std::string&) {};
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using adapterd::api::TenantRegistry;
  const std::string_view bytes = adapterd::fuzz::AsStringView(data, size);
  Write(bytes);
  absl::StatusOr<std::unique_ptr<TenantRegistry>> r = TenantRegistry::Create(Options());
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument) << "unexpected error " << r.status();
    FUZZ_CHECK(adapterd::IsValidUtf8(std::string(r.status().message()))) << "error message is not valid UTF-8";
    // A good table survives a reload of these bytes.
    const std::string good = R"({"tenants":[{"id":"a","api_key_sha256":")" + adapterd::Sha256Hex("k") + "\"}]}";
    Write(good);
    absl::StatusOr<std::unique_ptr<TenantRegistry>> base = TenantRegistry::Create(Options());
    FUZZ_CHECK(base.ok()) << base.status();
    Write(bytes);
    const absl::Status reload = (*base)->Reload();
    FUZZ_CHECK(!reload.ok()) << "a file Create refused was accepted by Reload";
    const std::string key = "Bearer k";
    FUZZ_CHECK((*base)->Authenticate(&key).ok()) << "a failed reload lost the previous table";
    return 0;
  }
  const std::vector<std::string> ids = (*r)->TenantIds();
  std::set<std::string> unique(ids.begin(), ids.end());
  FUZZ_CHECK(unique.size() == ids.size()) << "a tenant id appears twice";
  for (const std::string& id : ids) {
    FUZZ_CHECK(adapterd::api::ValidateId("tenant id", id).ok()) << "invalid tenant id accepted";
  }
  for (const std::string& key :
       {std::string("Bearer k"), std::string("Bearer ") + std::string(bytes.substr(0, 16)), std::string("nonsense")}) {
    auto t = (*r)->Authenticate(&key);
    FUZZ_CHECK(t.ok() || t.status().code() == absl::StatusCode::kUnauthenticated) << t.status();
  }
  const absl::Status reload = (*r)->Reload();
  FUZZ_CHECK(reload.ok()) << "the same file does not reload: " << reload;
  FUZZ_CHECK((*r)->TenantIds() == ids) << "a reload of the same file changed the tenants";
  return 0;
}
