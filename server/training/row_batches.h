// A task's rows (task_rows.h) padded into batches with their targets, and a
// validation pass over them through the encoder: the LibTorch half of the
// rows. Kind-neutral: a kind's rows carry the targets its KindRules names
// (kind_rules.h), and its head reads them (server/model/heads.h).
//
// Thread safety: MakeBatch and HeadLogits are pure; EvaluateRows runs on the
// calling thread.
#ifndef ADAPTERD_SERVER_TRAINING_ROW_BATCHES_H_
#define ADAPTERD_SERVER_TRAINING_ROW_BATCHES_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_encoder.h"
#include "server/model/heads.h"
#include "server/training/task_rows.h"

namespace adapterd::training {

// The chosen rows padded into a batch on `device`, with the targets the
// task's kind's rows carry (KindRules::targets).
struct Batch {
  model::EncoderInput input;
  model::HeadTargets targets;
};
Batch MakeBatch(const RowSet& set, std::span<const size_t> rows, model::TaskKind kind, int32_t pad_id,
                c10::Device device);

// The logits a head reads: token_logits for the kinds that read tokens
// (trimmed to `outputs`), logits otherwise.
at::Tensor HeadLogits(const model::EncoderOutput& out, model::TaskKind kind, int64_t outputs);

// Runs `set` over every row of `data` (no gradients) and scores the
// examples (ScoreRows), with the head's mean loss over rows. A set in
// another dtype than the encoder's (fp32 parameters of a bf16 encoder's
// training) runs as a copy in the encoder's dtype.
absl::StatusOr<Evaluation> EvaluateRows(const model::BertEncoder& encoder, const model::AdapterSet& set,
                                        const model::Head& head, const RowSet& data, int32_t pad_id, int batch_size);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_ROW_BATCHES_H_
