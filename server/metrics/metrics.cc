#include "server/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/logging.h"

namespace adapterd::metrics {
namespace {

[[noreturn]] void Die(const std::string& message) {
  LOG(FATAL) << "metrics: " << message;
  std::abort();  // not reached: LOG(FATAL) aborts
}

bool ValidMetricName(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ValidLabelName(const std::string& n) {
  if (n.empty() || n.rfind("__", 0) == 0 || n == "le") return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `{a="x",b="y"}` (with `extra` appended, e.g. le), or "" for no labels.
std::string LabelText(const Labels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  if (!extra.empty()) {
    if (!first) out += ",";
    out += extra;
  }
  return out + "}";
}

void SampleLine(std::string* out, const std::string& name, const std::string& labels, double value) {
  *out += name;
  *out += labels;
  *out += " ";
  *out += FormatValue(value);
  *out += "\n";
}

void SerializeChild(std::string* out, const std::string& name, const Labels& labels, const Counter& c) {
  SampleLine(out, name, LabelText(labels), c.Value());
}
void SerializeChild(std::string* out, const std::string& name, const Labels& labels, const Gauge& g) {
  SampleLine(out, name, LabelText(labels), g.Value());
}
void SerializeChild(std::string* out, const std::string& name, const Labels& labels, const Histogram& h) {
  const Histogram::Snapshot s = h.Collect();
  for (size_t i = 0; i < s.boundaries.size(); ++i) {
    SampleLine(out, name + "_bucket", LabelText(labels, "le=\"" + FormatValue(s.boundaries[i]) + "\""),
               static_cast<double>(s.cumulative[i]));
  }
  SampleLine(out, name + "_bucket", LabelText(labels, "le=\"+Inf\""), static_cast<double>(s.count));
  SampleLine(out, name + "_sum", LabelText(labels), s.sum);
  SampleLine(out, name + "_count", LabelText(labels), static_cast<double>(s.count));
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Counter::Increment(double v) {
  if (!(v >= 0)) return;  // negative or NaN
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(BucketBoundaries boundaries) : boundaries_(std::move(boundaries)) {
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    if (!std::isfinite(boundaries_[i]) || (i > 0 && boundaries_[i] <= boundaries_[i - 1])) {
      Die("histogram bucket boundaries must be finite and strictly increasing");
    }
  }
  counts_.assign(boundaries_.size() + 1, 0);
}

void Histogram::Observe(double v) {
  // The first bucket whose upper bound is >= v (le is inclusive).
  const size_t i =
      static_cast<size_t>(std::lower_bound(boundaries_.begin(), boundaries_.end(), v) - boundaries_.begin());
  absl::MutexLock lock(&mu_);
  ++counts_[std::isnan(v) ? boundaries_.size() : i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.boundaries = boundaries_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type)
    : name_(std::move(name)), help_(std::move(help)), type_(type) {}

template <typename T>
T& Family<T>::Add(const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto it = children_.find(labels);
  if (it != children_.end()) return *it->second;
  for (const auto& [k, v] : labels) {
    if (!ValidLabelName(k)) Die("metric " + name() + ": invalid label name '" + k + "'");
  }
  return *children_.emplace(labels, make_()).first->second;
}

template <typename T>
void Family<T>::Serialize(std::string* out) const {
  *out += "# HELP " + name() + " " + EscapeHelp(help()) + "\n";
  *out += "# TYPE " + name() + " " + TypeName(type()) + "\n";
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, child] : children_) SerializeChild(out, name(), labels, *child);
}

template <typename T>
std::vector<std::string> Family<T>::LabelNames() const {
  std::set<std::string> names;
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, child] : children_) {
    for (const auto& [k, v] : labels) names.insert(k);
  }
  return {names.begin(), names.end()};
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::CheckNewName(const std::string& name) const {
  if (!ValidMetricName(name)) Die("invalid metric name '" + name + "'");
  for (const auto& f : families_) {
    if (f->name() == name) Die("metric '" + name + "' registered twice");
  }
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help) {
  absl::MutexLock lock(&mu_);
  CheckNewName(name);
  auto f = std::make_unique<Family<Counter>>(std::move(name), std::move(help), MetricType::kCounter,
                                             [] { return std::make_unique<Counter>(); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help) {
  absl::MutexLock lock(&mu_);
  CheckNewName(name);
  auto f = std::make_unique<Family<Gauge>>(std::move(name), std::move(help), MetricType::kGauge,
                                           [] { return std::make_unique<Gauge>(); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help, BucketBoundaries buckets) {
  absl::MutexLock lock(&mu_);
  CheckNewName(name);
  Histogram probe(buckets);  // validates the boundaries now, not at first use
  auto f = std::make_unique<Family<Histogram>>(
      std::move(name), std::move(help), MetricType::kHistogram,
      [buckets = std::move(buckets)] { return std::make_unique<Histogram>(buckets); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

void Registry::AddCollectCallback(std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  callbacks_.push_back(std::move(callback));
}

std::string Registry::Serialize() const {
  absl::MutexLock collect(&collect_mu_);
  std::vector<std::function<void()>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    callbacks = callbacks_;
  }
  for (const auto& cb : callbacks) cb();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) f->Serialize(&out);
  return out;
}

std::vector<const FamilyBase*> Registry::families() const {
  absl::MutexLock lock(&mu_);
  std::vector<const FamilyBase*> out;
  for (const auto& f : families_) out.push_back(f.get());
  return out;
}

}  // namespace adapterd::metrics
