#include "server/model/heads.h"

#include <ATen/ATen.h>

#include <limits>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

// "[2, 3]"
std::string ShapeOf(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) absl::StrAppend(&out, i ? ", " : "", t.size(i));
  return out + "]";
}

// OK when `t` is defined with `dims` dimensions whose leading sizes are
// `sizes` (-1: any).
absl::Status CheckShape(const at::Tensor& t, std::string_view what, std::initializer_list<int64_t> sizes) {
  bool ok = t.defined() && t.dim() == static_cast<int64_t>(sizes.size());
  int64_t i = 0;
  for (int64_t want : sizes) {
    if (ok && want >= 0 && t.size(i) != want) ok = false;
    ++i;
  }
  if (ok) return absl::OkStatus();
  std::string want = "[";
  i = 0;
  for (int64_t s : sizes) absl::StrAppend(&want, i++ ? ", " : "", s < 0 ? std::string("*") : absl::StrCat(s));
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), " has shape ", ShapeOf(t), ", expected ", want, "]"));
}

class SequenceClassificationHead : public Head {
 public:
  explicit SequenceClassificationHead(int64_t labels) : labels_(labels) {}
  TaskKind kind() const override { return TaskKind::kSequenceClassification; }
  bool reads_tokens() const override { return ReadsTokens(kind()); }
  int64_t num_outputs() const override { return labels_; }
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const override {
    RETURN_IF_ERROR(CheckShape(logits, "logits", {-1, labels_}));
    RETURN_IF_ERROR(CheckShape(targets.labels, "labels", {logits.size(0)}));
    return GuardTorch("classification loss",
                      [&]() -> absl::StatusOr<at::Tensor> { return at::cross_entropy_loss(logits, targets.labels); });
  }

 private:
  int64_t labels_;
};

class MultiLabelHead : public Head {
 public:
  explicit MultiLabelHead(int64_t labels) : labels_(labels) {}
  TaskKind kind() const override { return TaskKind::kMultiLabelClassification; }
  bool reads_tokens() const override { return ReadsTokens(kind()); }
  int64_t num_outputs() const override { return labels_; }
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const override {
    RETURN_IF_ERROR(CheckShape(logits, "logits", {-1, labels_}));
    RETURN_IF_ERROR(CheckShape(targets.label_sets, "label sets", {logits.size(0), labels_}));
    return GuardTorch("multi-label loss", [&]() -> absl::StatusOr<at::Tensor> {
      return at::binary_cross_entropy_with_logits(logits, targets.label_sets.to(logits.scalar_type()));
    });
  }

 private:
  int64_t labels_;
};

class RegressionHead : public Head {
 public:
  TaskKind kind() const override { return TaskKind::kRegression; }
  bool reads_tokens() const override { return ReadsTokens(kind()); }
  int64_t num_outputs() const override { return 1; }
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const override {
    RETURN_IF_ERROR(CheckShape(logits, "logits", {-1, 1}));
    RETURN_IF_ERROR(CheckShape(targets.values, "values", {logits.size(0)}));
    return GuardTorch("regression loss", [&]() -> absl::StatusOr<at::Tensor> {
      return at::mse_loss(logits.select(1, 0), targets.values.to(logits.scalar_type()));
    });
  }
};

class TokenClassificationHead : public Head {
 public:
  explicit TokenClassificationHead(int64_t tags) : tags_(tags) {}
  TaskKind kind() const override { return TaskKind::kTokenClassification; }
  bool reads_tokens() const override { return ReadsTokens(kind()); }
  int64_t num_outputs() const override { return tags_; }
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const override {
    RETURN_IF_ERROR(CheckShape(logits, "logits", {-1, -1, tags_}));
    RETURN_IF_ERROR(CheckShape(targets.tags, "tags", {logits.size(0), logits.size(1)}));
    return GuardTorch("token classification loss", [&]() -> absl::StatusOr<at::Tensor> {
      at::Tensor tags = targets.tags;
      if (targets.attention_mask.defined()) tags = tags.masked_fill(targets.attention_mask.eq(0), kIgnoredPosition);
      // A batch with no scored position has no loss to learn from (CE's
      // mean would be 0 / 0).
      if (!tags.ne(kIgnoredPosition).any().item<bool>()) return (logits.sum() * 0).reshape({});
      return at::cross_entropy_loss(logits.reshape({-1, tags_}), tags.reshape({-1}), {}, at::Reduction::Mean,
                                    kIgnoredPosition);
    });
  }

 private:
  int64_t tags_;
};

class ExtractiveQaHead : public Head {
 public:
  TaskKind kind() const override { return TaskKind::kExtractiveQa; }
  bool reads_tokens() const override { return ReadsTokens(kind()); }
  int64_t num_outputs() const override { return 2; }
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const override {
    RETURN_IF_ERROR(CheckShape(logits, "logits", {-1, -1, 2}));
    RETURN_IF_ERROR(CheckShape(targets.starts, "starts", {logits.size(0)}));
    RETURN_IF_ERROR(CheckShape(targets.ends, "ends", {logits.size(0)}));
    if (targets.attention_mask.defined()) {
      RETURN_IF_ERROR(CheckShape(targets.attention_mask, "attention mask", {logits.size(0), logits.size(1)}));
    }
    return GuardTorch("extractive QA loss", [&]() -> absl::StatusOr<at::Tensor> {
      at::Tensor start = logits.select(2, 0), end = logits.select(2, 1);
      if (targets.attention_mask.defined()) {
        const at::Tensor padding = targets.attention_mask.eq(0);
        start = start.masked_fill(padding, -std::numeric_limits<double>::infinity());
        end = end.masked_fill(padding, -std::numeric_limits<double>::infinity());
      }
      return (at::cross_entropy_loss(start, targets.starts) + at::cross_entropy_loss(end, targets.ends)) / 2;
    });
  }
};

template <typename H>
std::unique_ptr<Head> NewHead(int64_t num_labels) {
  if constexpr (std::is_constructible_v<H, int64_t>) {
    return std::make_unique<H>(num_labels);
  } else {
    return std::make_unique<H>();
  }
}

// Each kind's head, in TaskKind's order (as the kinds' table, task_kinds.cc,
// lists them; MakeHead checks the head it made is of the kind asked).
using HeadFactory = std::unique_ptr<Head> (*)(int64_t num_labels);
constexpr HeadFactory kHeads[] = {
    NewHead<SequenceClassificationHead>, NewHead<MultiLabelHead>,   NewHead<RegressionHead>,
    NewHead<TokenClassificationHead>,    NewHead<ExtractiveQaHead>,
};
static_assert(std::size(kHeads) == kNumTaskKinds, "one head per task kind");

}  // namespace

absl::StatusOr<std::unique_ptr<Head>> MakeHead(TaskKind kind, int64_t num_labels) {
  const KindSpec* spec = FindKindSpec(static_cast<int32_t>(kind));
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown task kind ", static_cast<int32_t>(kind)));
  }
  if (num_labels < spec->min_labels) {
    return absl::InvalidArgumentError(absl::StrCat("a ", std::string(spec->name), " task cannot have ", num_labels, " ",
                                                   std::string(spec->label_noun)));
  }
  std::unique_ptr<Head> head = kHeads[static_cast<size_t>(kind) - 1](num_labels);
  if (head->kind() != kind) {
    return absl::InternalError(absl::StrCat("the head table lists a ", std::string(TaskKindName(head->kind())),
                                            " head for ", std::string(spec->name)));
  }
  return head;
}

}  // namespace adapterd::model
