// UsageLedger: how much of something each tenant holds, and all tenants
// together, under limits: adapterd's admission primitive. Every entry point
// reserves what it will hold before holding it, one ledger per resource
// (docs/API.md, "Limits"; each is exported as adapterd_admission_* metrics):
//   - bytes of request bodies the REST gateway buffers (JSON bodies, SQuAD
//     documents): in total, reserved from Content-Length before the body is
//     read (server/http/http_gateway.h);
//   - client streams open (UploadDataset and ImportAdapter calls): per tenant
//     and in total, so idle streams cannot pin a thread each without bound;
//   - bytes of adapter files being imported (held in memory until the file
//     is whole): in total;
//   - bytes of text in a tenant's datasets, stored and being uploaded: per
//     tenant (the tenant's max_dataset_bytes).
//
// A Hold is one reservation: Grow() adds to it under the limits, and its
// destructor gives it back, unless Keep() made it permanent (an upload that
// committed keeps counting until its dataset is deleted: Subtract()).
// A tenant's amount is its base (what is stored: `seed`, read again on every
// Open() that passes one, so it never drifts from storage for long) plus its
// holds.
//
// Thread safety: thread-safe. A Hold is used by one thread at a time and
// must not outlive its ledger.
#ifndef ADAPTERD_COMMON_USAGE_LEDGER_H_
#define ADAPTERD_COMMON_USAGE_LEDGER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace adapterd {

class UsageLedger {
 public:
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

  // `what` names the resource in messages ("open upload and import
  // streams"); `total_limit` bounds the sum over all tenants.
  UsageLedger(std::string what, int64_t total_limit) : what_(std::move(what)), total_limit_(total_limit) {}

  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

    // Adds `amount` (>= 0) to this hold: RESOURCE_EXHAUSTED, saying which
    // limit and how much is in use, if the tenant would pass
    // `tenant_limit` or everyone the ledger's total limit; nothing changes
    // then.
    absl::Status Grow(int64_t amount, int64_t tenant_limit);
    // The hold stays counted after it is destroyed.
    void Keep() { kept_ = true; }
    int64_t amount() const { return amount_; }

   private:
    friend class UsageLedger;
    Hold(UsageLedger* ledger, std::string tenant) : ledger_(ledger), tenant_(std::move(tenant)) {}
    UsageLedger* ledger_ = nullptr;
    std::string tenant_;
    int64_t amount_ = 0;
    bool kept_ = false;
  };

  // An empty hold for `tenant`. `seed`, when given, is called (under the
  // ledger's lock) to set the tenant's base; its error is returned.
  absl::StatusOr<Hold> Open(const std::string& tenant, const std::function<absl::StatusOr<int64_t>()>& seed);
  // Opens a hold and grows it by `amount` at once.
  absl::StatusOr<Hold> Take(const std::string& tenant, int64_t amount, int64_t tenant_limit);
  // Takes `amount` off the tenant's base (what a kept hold added: a dataset
  // deleted); never below 0.
  void Subtract(const std::string& tenant, int64_t amount);

  int64_t used(const std::string& tenant) const;
  int64_t total() const;
  int64_t total_limit() const { return total_limit_; }
  const std::string& what() const { return what_; }
  // How many Grow()s were refused since the ledger was made (monotone).
  int64_t refusals() const;

 private:
  struct Usage {
    int64_t base = 0;  // stored (seeded, and kept holds)
    int64_t held = 0;  // open holds
  };
  absl::Status Grow(const std::string& tenant, int64_t amount, int64_t tenant_limit);
  // A hold ends: its amount leaves `held`, and joins `base` when kept.
  void Close(const std::string& tenant, int64_t amount, bool kept);

  const std::string what_;
  const int64_t total_limit_;
  mutable absl::Mutex mu_;  // protects the amounts
  std::map<std::string, Usage> used_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;  // sum of base + held over tenants
  int64_t refusals_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_USAGE_LEDGER_H_
