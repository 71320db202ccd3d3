#include "common/usage_ledger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace adapterd {

UsageLedger::Hold::Hold(Hold&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)),
      tenant_(std::move(other.tenant_)),
      amount_(std::exchange(other.amount_, 0)),
      kept_(other.kept_) {}

UsageLedger::Hold& UsageLedger::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (ledger_ != nullptr) ledger_->Close(tenant_, amount_, kept_);
    ledger_ = std::exchange(other.ledger_, nullptr);
    tenant_ = std::move(other.tenant_);
    amount_ = std::exchange(other.amount_, 0);
    kept_ = other.kept_;
  }
  return *this;
}

UsageLedger::Hold::~Hold() {
  if (ledger_ != nullptr) ledger_->Close(tenant_, amount_, kept_);
}

absl::Status UsageLedger::Hold::Grow(int64_t amount, int64_t tenant_limit) {
  if (ledger_ == nullptr) return absl::FailedPreconditionError("an empty hold cannot grow");
  if (amount < 0) return absl::InvalidArgumentError("a hold grows by a non-negative amount");
  RETURN_IF_ERROR(ledger_->Grow(tenant_, amount, tenant_limit));
  amount_ += amount;
  return absl::OkStatus();
}

absl::StatusOr<UsageLedger::Hold> UsageLedger::Open(const std::string& tenant,
                                                    const std::function<absl::StatusOr<int64_t>()>& seed) {
  absl::MutexLock l(&mu_);
  Usage& u = used_[tenant];
  if (seed) {
    // Under the lock, so that no kept hold or Subtract interleaves with it.
    ASSIGN_OR_RETURN(const int64_t base, seed());
    total_ += base - u.base;
    u.base = base;
  }
  return Hold(this, tenant);
}

absl::StatusOr<UsageLedger::Hold> UsageLedger::Take(const std::string& tenant, int64_t amount, int64_t tenant_limit) {
  ASSIGN_OR_RETURN(Hold hold, Open(tenant, nullptr));
  RETURN_IF_ERROR(hold.Grow(amount, tenant_limit));
  return hold;
}

absl::Status UsageLedger::Grow(const std::string& tenant, int64_t amount, int64_t tenant_limit) {
  absl::MutexLock l(&mu_);
  Usage& u = used_[tenant];
  const int64_t mine = u.base + u.held;
  if (amount > tenant_limit - mine) {
    ++refusals_;
    return absl::ResourceExhaustedError(absl::StrCat("tenant '", tenant, "' would hold ", mine + amount, " ", what_,
                                                     "; its limit is ", tenant_limit, " (", mine, " in use)"));
  }
  if (amount > total_limit_ - total_) {
    ++refusals_;
    return absl::ResourceExhaustedError(absl::StrCat("the server would hold ", total_ + amount, " ", what_,
                                                     "; its limit is ", total_limit_, " (", total_,
                                                     " in use); retry later"));
  }
  u.held += amount;
  total_ += amount;
  return absl::OkStatus();
}

void UsageLedger::Close(const std::string& tenant, int64_t amount, bool kept) {
  absl::MutexLock l(&mu_);
  Usage& u = used_[tenant];
  u.held -= amount;
  if (kept) {
    u.base += amount;
  } else {
    total_ -= amount;
  }
}

void UsageLedger::Subtract(const std::string& tenant, int64_t amount) {
  absl::MutexLock l(&mu_);
  auto it = used_.find(tenant);
  if (it == used_.end()) return;  // never seeded: the next seed reads storage
  const int64_t taken = std::min(amount, it->second.base);
  it->second.base -= taken;
  total_ -= taken;
}

int64_t UsageLedger::used(const std::string& tenant) const {
  absl::MutexLock l(&mu_);
  auto it = used_.find(tenant);
  return it == used_.end() ? 0 : it->second.base + it->second.held;
}

int64_t UsageLedger::total() const {
  absl::MutexLock l(&mu_);
  return total_;
}

int64_t UsageLedger::refusals() const {
  absl::MutexLock l(&mu_);
  return refusals_;
}

}  // namespace adapterd
