// Tenants, API keys and quotas (DESIGN.md section 6, "Tenancy").
//
// A tenants file (JSON) maps SHA-256 hashes of API keys to tenants, each with
// quotas. The server never stores or logs a key, only its hash:
//
//   {"tenants": [
//     {"id": "acme",
//      "api_key_sha256": ["<64 hex>", ...],       // or one string
//      "max_tasks": 100,                          // tasks owned (incl. pending)
//      "max_queued_jobs": 4,                      // jobs VALIDATING or QUEUED
//      "max_texts_per_predict": 64,
//      "max_dataset_bytes": 67108864,             // per uploaded dataset
//      "predict_rate_per_second": 50,             // token bucket refill
//      "predict_burst": 100}                      // token bucket size
//   ]}
//
// Omitted quotas take the server's defaults (TenantQuotas{}); 0 means
// "unlimited" for rates only where documented below. Without a tenants file the
// registry is single-tenant: every caller is tenant "default", no key needed
// (a key, if sent, is ignored).
//
// Thread safety: thread-safe; the tenant table is immutable after Create and
// each tenant's token bucket has its own lock.
#ifndef ADAPTERD_SERVER_API_TENANTS_H_
#define ADAPTERD_SERVER_API_TENANTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace adapterd::api {

struct TenantQuotas {
  int64_t max_tasks = 1000;
  int64_t max_queued_jobs = 16;
  int64_t max_texts_per_predict = 256;
  int64_t max_dataset_bytes = 256ll << 20;
  // Predict requests per second (token bucket); 0 = unlimited.
  double predict_rate_per_second = 0;
  // Bucket size; 0 = max(1, predict_rate_per_second).
  double predict_burst = 0;
};

// A token bucket: `burst` tokens, refilled at `rate` per second.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst, absl::Time now);
  // Takes `tokens` if available. Thread-safe.
  bool TryTake(double tokens, absl::Time now);

 private:
  const double rate_;
  const double burst_;
  absl::Mutex mu_;  // protects the fill level
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

class Tenant {
 public:
  Tenant(std::string id, TenantQuotas quotas, absl::Time now);
  const std::string& id() const { return id_; }
  const TenantQuotas& quotas() const { return quotas_; }
  // RESOURCE_EXHAUSTED when the Predict rate is exceeded.
  absl::Status AdmitPredict(absl::Time now) const;

 private:
  std::string id_;
  TenantQuotas quotas_;
  std::unique_ptr<TokenBucket> bucket_;  // null = unlimited
};

class TenantRegistry {
 public:
  inline static const char* const kDefaultTenant = "default";

  struct Options {
    // The tenants file; "" = single-tenant mode.
    std::string tenants_file;
    // Quotas of the single tenant, and defaults for omitted fields.
    TenantQuotas defaults;
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };
  // INVALID_ARGUMENT naming the problem for a malformed file (bad JSON,
  // missing id, a hash that is not 64 hex digits, a key hash used twice,
  // negative quotas); NOT_FOUND when the file does not exist.
  static absl::StatusOr<std::unique_ptr<TenantRegistry>> Create(Options options);

  bool single_tenant() const { return single_tenant_; }

  // Maps the `authorization` metadata value ("Bearer <key>") to a tenant.
  // UNAUTHENTICATED for a missing, malformed or unknown key (multi-tenant).
  absl::StatusOr<const Tenant*> Authenticate(const std::string* authorization) const;

  absl::Time Now() const { return options_.now(); }
  std::vector<std::string> TenantIds() const;

 private:
  explicit TenantRegistry(Options options) : options_(std::move(options)) {}
  Options options_;
  bool single_tenant_ = true;
  std::vector<std::unique_ptr<Tenant>> tenants_;
  std::map<std::string, const Tenant*> by_key_hash_;  // hex sha256 -> tenant
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_TENANTS_H_
