#include "server/api/tenants.h"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/api/ids.h"

namespace adapterd::api {

TokenBucket::TokenBucket(double rate, double burst, absl::Time now)
    : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}

bool TokenBucket::TryTake(double tokens, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + rate_ * absl::ToDoubleSeconds(now - last_));
    last_ = now;
  }
  if (tokens_ < tokens) return false;
  tokens_ -= tokens;
  return true;
}

Tenant::Tenant(std::string id, TenantQuotas quotas, absl::Time now) : id_(std::move(id)), quotas_(quotas) {
  if (quotas_.predict_rate_per_second > 0) {
    const double burst =
        quotas_.predict_burst > 0 ? quotas_.predict_burst : std::max(1.0, quotas_.predict_rate_per_second);
    bucket_ = std::make_unique<TokenBucket>(quotas_.predict_rate_per_second, burst, now);
  }
}

absl::Status Tenant::AdmitPredict(absl::Time now) const {
  if (bucket_ == nullptr || bucket_->TryTake(1, now)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("tenant '", id_, "' exceeded its Predict rate of ", quotas_.predict_rate_per_second, " requests/s"));
}

namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& file, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tenants file ", file, ": ", what));
}

// Reads an optional non-negative number field into `out`.
template <typename T>
absl::Status ReadQuota(const Json& t, const char* key, const std::string& where, T* out) {
  if (!t.contains(key)) return absl::OkStatus();
  const Json& v = t.at(key);
  // Range-check as a double first: converting an out-of-range double to an
  // integer type is undefined behaviour. 2^digits is the first integer past
  // T's range, and exact as a double.
  const double limit =
      std::is_integral_v<T> ? std::ldexp(1.0, std::numeric_limits<T>::digits) : std::numeric_limits<double>::infinity();
  if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() >= limit) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' must be a non-negative number no larger than ",
                                                   std::numeric_limits<T>::max()));
  }
  *out = v.get<T>();
  return absl::OkStatus();
}

bool IsHexSha256(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<TenantRegistry>> TenantRegistry::Create(Options options) {
  if (!options.warn) {
    options.warn = [](const std::string& m) { LOG(WARNING) << m; };
  }
  std::unique_ptr<TenantRegistry> r(new TenantRegistry(std::move(options)));
  if (r->options_.tenants_file.empty()) {
    auto table = std::make_shared<Table>();
    table->tenants.push_back(std::make_shared<Tenant>(kDefaultTenant, r->options_.defaults, r->options_.now()));
    absl::MutexLock lock(&r->mu_);
    r->table_ = std::move(table);
    return r;
  }
  r->single_tenant_ = false;
  ASSIGN_OR_RETURN(std::shared_ptr<const Table> table, r->LoadTable(nullptr));
  absl::MutexLock lock(&r->mu_);
  r->table_ = std::move(table);
  return r;
}

absl::Status TenantRegistry::Reload() {
  if (single_tenant_) return absl::FailedPreconditionError("no tenants file to reload: the server is single-tenant");
  const std::shared_ptr<const Table> previous = table();
  ASSIGN_OR_RETURN(std::shared_ptr<const Table> next, LoadTable(previous.get()));
  absl::MutexLock lock(&mu_);
  table_ = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<const TenantRegistry::Table> TenantRegistry::table() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

absl::StatusOr<std::shared_ptr<const TenantRegistry::Table>> TenantRegistry::LoadTable(const Table* previous) const {
  const std::string& file = options_.tenants_file;
  // Anyone who could replace the file could add a key; a reader of its
  // hashes could test guessed keys offline.
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckSecretFileAccess(file, "tenants file", &warnings));
  for (const std::string& w : warnings) {
    options_.warn(absl::StrCat(w, ": its key hashes let a reader test guessed keys offline"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad(file, "not valid JSON");
  if (!doc.is_object() || !doc.contains("tenants") || !doc["tenants"].is_array()) {
    return Bad(file, "expected an object with a \"tenants\" array");
  }
  const absl::Time now = options_.now();
  auto table = std::make_shared<Table>();
  std::set<std::string> ids;
  for (size_t i = 0; i < doc["tenants"].size(); ++i) {
    const Json& t = doc["tenants"][i];
    const std::string where = absl::StrCat("tenants file ", file, ": tenants[", i, "]");
    if (!t.is_object() || !t.contains("id") || !t["id"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": missing string \"id\""));
    }
    const std::string id = t["id"].get<std::string>();
    if (absl::Status s = ValidateId("tenant id", id); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
    if (!ids.insert(id).second) return absl::InvalidArgumentError(absl::StrCat(where, ": tenant id used twice"));
    TenantQuotas q = options_.defaults;
    RETURN_IF_ERROR(ReadQuota(t, "max_tasks", where, &q.max_tasks));
    RETURN_IF_ERROR(ReadQuota(t, "max_queued_jobs", where, &q.max_queued_jobs));
    RETURN_IF_ERROR(ReadQuota(t, "max_texts_per_predict", where, &q.max_texts_per_predict));
    RETURN_IF_ERROR(ReadQuota(t, "max_dataset_bytes", where, &q.max_dataset_bytes));
    RETURN_IF_ERROR(ReadQuota(t, "predict_rate_per_second", where, &q.predict_rate_per_second));
    RETURN_IF_ERROR(ReadQuota(t, "predict_burst", where, &q.predict_burst));
    RETURN_IF_ERROR(ReadQuota(t, "batch_weight", where, &q.batch_weight));
    if (q.batch_weight < 1 || q.batch_weight > kMaxBatchWeight) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": 'batch_weight' must be in [1, ", kMaxBatchWeight, "], not ", q.batch_weight));
    }
    std::vector<std::string> hashes;
    if (t.contains("api_key_sha256")) {
      const Json& h = t["api_key_sha256"];
      if (h.is_string()) {
        hashes.push_back(h.get<std::string>());
      } else if (h.is_array()) {
        for (const Json& e : h) {
          if (!e.is_string())
            return absl::InvalidArgumentError(absl::StrCat(where, ": api_key_sha256 entries must be strings"));
          hashes.push_back(e.get<std::string>());
        }
      }
    }
    if (hashes.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no \"api_key_sha256\""));
    std::shared_ptr<const Tenant> tenant;
    if (previous != nullptr) {
      for (const auto& old : previous->tenants) {
        if (old->id() == id && old->quotas() == q) tenant = old;
      }
    }
    if (tenant == nullptr) tenant = std::make_shared<Tenant>(id, q, now);
    table->tenants.push_back(tenant);
    for (std::string& h : hashes) {
      h = absl::AsciiStrToLower(h);
      if (!IsHexSha256(h)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": api_key_sha256 must be 64 hex digits"));
      }
      for (const auto& [stored, unused] : table->by_key_hash) {
        if (stored == h) return absl::InvalidArgumentError(absl::StrCat(where, ": a key hash is used twice"));
      }
      table->by_key_hash.emplace_back(h, table->tenants.size() - 1);
    }
  }
  return std::shared_ptr<const Table>(std::move(table));
}

absl::StatusOr<std::shared_ptr<const Tenant>> TenantRegistry::Authenticate(const std::string* authorization) const {
  const std::shared_ptr<const Table> table = this->table();
  if (single_tenant_) return table->tenants.front();
  if (authorization == nullptr || authorization->empty()) {
    return absl::UnauthenticatedError("missing API key: send 'authorization: Bearer <key>' metadata");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(*authorization, std::string(kBearer)) || authorization->size() == kBearer.size()) {
    return absl::UnauthenticatedError("malformed authorization metadata: expected 'Bearer <key>'");
  }
  const std::string hash = Sha256Hex(std::string_view(*authorization).substr(kBearer.size()));
  // Every stored hash is compared, each in constant time (CRYPTO_memcmp), so
  // the time taken says nothing about which hash, or how much of one, matched.
  const std::shared_ptr<const Tenant>* found = nullptr;
  for (const auto& [stored, index] : table->by_key_hash) {
    const bool match = stored.size() == hash.size() && CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) == 0;
    if (match) found = &table->tenants[index];
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown API key");
  return *found;
}

std::vector<std::string> TenantRegistry::TenantIds() const {
  std::vector<std::string> ids;
  for (const auto& t : table()->tenants) ids.push_back(t->id());
  return ids;
}

}  // namespace adapterd::api
