// The task kinds' heads (docs/ARCHITECTURE.md, "Task kinds"): what a task
// trains on top of the shared encoder and its adapters, and the loss it
// trains with.
//
// Every kind's head is one Linear(d, K) (AdapterSet's head_weight/head_bias);
// kinds differ in what it reads, K, the loss and the decoding:
//
//   kind                       reads     K         loss
//   sequence classification    pooled    labels    softmax cross-entropy
//   multi-label                pooled    labels    mean sigmoid BCE over the K
//   regression                 pooled    1         MSE on standardised targets
//   token classification       tokens    BIO tags  cross-entropy on each word's
//                                                  first piece
//   extractive QA              tokens    2         (CE(start) + CE(end)) / 2
//
// A token-reading head's softmaxes never reach padding: a row's loss and
// predictions do not depend on how long the other rows of its batch are.
// (HF's BertForQuestionAnswering lets padding into its two softmaxes; on
// unpadded rows the two agree.)
//
// This header is the LibTorch half (adapterd::model): the Head interface
// and the losses. The kinds themselves and the decoding of their outputs,
// which take plain numbers, are server/model/task_kinds.h
// (adapterd::model_formats). A new kind is a Head in heads.cc, its decoding
// in task_kinds.cc, and their tests.
//
// Thread safety: Heads are immutable.
#ifndef ADAPTERD_SERVER_MODEL_HEADS_H_
#define ADAPTERD_SERVER_MODEL_HEADS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "server/model/task_kinds.h"

namespace adapterd::model {

// Targets of one batch; each kind reads its own (shapes below, on the
// logits' device; B rows, L positions).
struct HeadTargets {
  at::Tensor labels;          // [B] int64: sequence classification
  at::Tensor label_sets;      // [B, K] 0/1 in the logits' dtype: multi-label
  at::Tensor values;          // [B] standardised, the logits' dtype: regression
  at::Tensor tags;            // [B, L] int64, kIgnoredPosition where unscored
  at::Tensor starts, ends;    // [B] int64 token positions: extractive QA
  at::Tensor attention_mask;  // [B, L] 1 = a real token: token-reading kinds
};

class Head {
 public:
  virtual ~Head() = default;
  virtual TaskKind kind() const = 0;
  // True: the head reads each token's final hidden state and its logits
  // are [B, L, K]; false: the pooled vector, logits [B, K].
  virtual bool reads_tokens() const = 0;
  // K, the head's outputs per row or position.
  virtual int64_t num_outputs() const = 0;
  // The batch's mean loss (autograd flows into `logits`). INVALID_ARGUMENT
  // when the targets this kind reads are missing or of the wrong shape.
  virtual absl::StatusOr<at::Tensor> Loss(const at::Tensor& logits, const HeadTargets& targets) const = 0;
};

// The head of a task of `kind` with `num_labels` labels (classification
// kinds) or tags (token classification; ignored for regression and QA).
// INVALID_ARGUMENT for a count the kind cannot have (fewer than 2 labels, 1
// for multi-label, fewer than 3 tags: O and one B-/I- pair).
absl::StatusOr<std::unique_ptr<Head>> MakeHead(TaskKind kind, int64_t num_labels);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_HEADS_H_
