// A small Prometheus metrics registry (docs/METRICS.md).
//
// prometheus-cpp is not packaged for Debian bookworm, so adapterd keeps this
// registry, whose shape mirrors prometheus-cpp's: a Registry holds Families of
// Counter, Gauge or Histogram; a family's children are told apart by their
// label values. Moving to prometheus-cpp later is a change to this module
// only.
//
// Contract:
//   - Names follow Prometheus: metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label
//     names [a-zA-Z_][a-zA-Z0-9_]* not starting with "__" and not "le" (the
//     histogram bucket label). Registering an invalid or duplicate name, or a
//     child with an invalid label name, is a programming error: the process
//     aborts with a message naming it (like prometheus-cpp's exceptions, but
//     this code base does not use exceptions).
//   - Counter::Increment ignores negative or NaN increments (counters only go
//     up).
//   - Registry::Serialize renders the text exposition format 0.0.4: families
//     in registration order, children sorted by label values, histograms with
//     cumulative buckets ending in le="+Inf", then _sum and _count.
//   - Collect callbacks run, one scrape at a time, at the start of every
//     Serialize: use them for gauges computed on demand.
//
// Thread safety: everything is thread-safe. Counter/Gauge updates are
// lock-free atomics; Histogram::Observe and Family::Add take a short mutex.
// References returned by Family::Add and Registry::Add* stay valid for the
// registry's lifetime.
#ifndef ADAPTERD_SERVER_METRICS_METRICS_H_
#define ADAPTERD_SERVER_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace adapterd::metrics {

using Labels = std::map<std::string, std::string>;
using BucketBoundaries = std::vector<double>;

enum class MetricType { kCounter, kGauge, kHistogram };

class Counter {
 public:
  void Increment(double v = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Increment(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  void Decrement(double v = 1.0) { value_.fetch_sub(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `boundaries`: strictly increasing finite upper bounds (aborts otherwise);
  // the +Inf bucket is implicit.
  explicit Histogram(BucketBoundaries boundaries);
  void Observe(double v);

  struct Snapshot {
    BucketBoundaries boundaries;
    // Cumulative counts, one per boundary plus the +Inf bucket (== count).
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Collect() const;

 private:
  const BucketBoundaries boundaries_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// The type-independent part of a family, for the registry's serialiser.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type);
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  // Appends HELP, TYPE and every child's samples.
  virtual void Serialize(std::string* out) const = 0;
  // The label names used by any child so far.
  virtual std::vector<std::string> LabelNames() const = 0;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
};

template <typename T>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, MetricType type, std::function<std::unique_ptr<T>()> make)
      : FamilyBase(std::move(name), std::move(help), type), make_(std::move(make)) {}

  // The child for `labels`, created on first use.
  T& Add(const Labels& labels);
  void Serialize(std::string* out) const override;
  std::vector<std::string> LabelNames() const override;

 private:
  const std::function<std::unique_ptr<T>()> make_;
  mutable absl::Mutex mu_;
  std::map<Labels, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Family<Counter>& AddCounter(std::string name, std::string help);
  Family<Gauge>& AddGauge(std::string name, std::string help);
  Family<Histogram>& AddHistogram(std::string name, std::string help, BucketBoundaries buckets);
  void AddCollectCallback(std::function<void()> callback);

  // Text exposition format 0.0.4 (see the header comment).
  std::string Serialize() const;
  // Every family, in registration order (for tests and lints).
  std::vector<const FamilyBase*> families() const;

 private:
  void CheckNewName(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex collect_mu_;  // one scrape's callbacks at a time
};

// Prometheus number formatting: shortest round-trip decimal, "+Inf", "-Inf",
// "NaN".
std::string FormatValue(double v);
// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);
// Escapes HELP text (backslash, newline).
std::string EscapeHelp(const std::string& v);

}  // namespace adapterd::metrics

#endif  // ADAPTERD_SERVER_METRICS_METRICS_H_
