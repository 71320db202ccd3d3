// Tenants, API keys and quotas (docs/API.md, "Tenants file").
//
// A tenants file (JSON) maps SHA-256 hashes of API keys to tenants, each with
// quotas. The server never stores or logs a key, only its hash. Its schema,
// each field's meaning, default and range, and how the JSON is read, are in
// proto/adapterd/config/v1/tenants.proto (message TenantsFile), the file's
// reference; LoadTable reads the file with protobuf's JSON parser into it:
//
//   {"tenants": [
//     {"id": "acme",
//      "api_key_sha256": ["<64 hex>", ...],       // or one string
//      "max_tasks": 100,                          // tasks owned (incl. pending)
//      "max_queued_jobs": 4,                      // jobs VALIDATING or QUEUED
//      "max_texts_per_predict": 64,
//      "max_dataset_bytes": 67108864,             // all its datasets' text
//      "predict_rate_per_second": 50,             // token bucket refill
//      "predict_burst": 100,                      // token bucket size
//      "batch_weight": 2}                         // share of a batch
//   ]}
//
// Omitted quotas take the server's defaults (Options::defaults); a field the
// schema does not have is refused. Without a tenants file the registry is
// single-tenant: every caller is tenant "default", no key needed (a key, if
// sent, is ignored).
//
// Reload: Reload() re-reads the file (adapterd does on SIGHUP) and swaps the
// whole table at once, or keeps the old one and says why. A revoked key fails
// from the next call on; calls already authenticated finish as the tenant
// they began as (they hold its shared_ptr). A tenant whose id and quotas are
// unchanged keeps its token bucket, so a reload grants no extra burst.
//
// File permissions: a tenants file others may write is refused (anyone on
// the host could add a key); one others may read is accepted with a warning
// (its hashes let a reader test guessed keys offline). chmod 600 or 640.
//
// Thread safety: thread-safe. The table is immutable and swapped whole under
// a lock; each tenant's token bucket has its own lock.
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
  bool operator==(const TenantQuotas&) const = default;
  int64_t max_tasks = 1000;
  int64_t max_queued_jobs = 16;
  int64_t max_texts_per_predict = 256;
  int64_t max_dataset_bytes = 256ll << 20;
  // Predict requests per second (token bucket); 0 = unlimited.
  double predict_rate_per_second = 0;
  // Bucket size; 0 = max(1, predict_rate_per_second).
  double predict_burst = 0;
  // This tenant's weight in the share of each inference batch, against the
  // other tenants with rows waiting ([1, kMaxBatchWeight]).
  int64_t batch_weight = 1;
};
inline constexpr int64_t kMaxBatchWeight = 1000;

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
    // Where warnings go (a tenants file others can read); default: stderr.
    std::function<void(const std::string&)> warn;
  };
  // INVALID_ARGUMENT naming the problem for a malformed file (bad JSON, a
  // field tenants.proto does not have or a value of the wrong type, missing
  // id, a tenant id or key hash used twice, a hash that is not 64 hex digits,
  // negative quotas); NOT_FOUND when the file does not exist;
  // FAILED_PRECONDITION when users other than the owner and group may write
  // it.
  static absl::StatusOr<std::unique_ptr<TenantRegistry>> Create(Options options);

  bool single_tenant() const { return single_tenant_; }

  // Re-reads the tenants file and, if it is valid, replaces the table.
  // On any error (those of Create) the old table stays in force and the
  // error is returned. FAILED_PRECONDITION in single-tenant mode.
  absl::Status Reload();

  // Maps the `authorization` metadata value ("Bearer <key>") to a tenant.
  // UNAUTHENTICATED for a missing, malformed or unknown key (multi-tenant).
  // The tenant stays valid while the caller holds it, across reloads.
  absl::StatusOr<std::shared_ptr<const Tenant>> Authenticate(const std::string* authorization) const;

  absl::Time Now() const { return options_.now(); }
  std::vector<std::string> TenantIds() const;

 private:
  // One immutable generation of the tenants file.
  struct Table {
    std::vector<std::shared_ptr<const Tenant>> tenants;
    std::vector<std::pair<std::string, size_t>> by_key_hash;  // hex sha256 -> index in tenants
  };
  explicit TenantRegistry(Options options) : options_(std::move(options)) {}
  // Reads and checks the file; tenants whose id and quotas match one in
  // `previous` (may be null) are carried over with their token buckets.
  absl::StatusOr<std::shared_ptr<const Table>> LoadTable(const Table* previous) const;
  std::shared_ptr<const Table> table() const;

  Options options_;
  bool single_tenant_ = true;
  mutable absl::Mutex mu_;  // protects the table pointer (not the table)
  std::shared_ptr<const Table> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_TENANTS_H_
