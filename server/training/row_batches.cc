#include "server/training/row_batches.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "server/model/tensor_io.h"
#include "server/training/kind_rules.h"

namespace adapterd::training {

Batch MakeBatch(const RowSet& set, std::span<const size_t> rows, model::TaskKind kind, int32_t pad_id,
                c10::Device device) {
  const auto row = [&](size_t i) -> const Row& { return set.rows[rows[i]]; };
  const model::EncodedBatch padded = model::PadRows(
      rows.size(), pad_id, [&](size_t i) -> const std::vector<int32_t>& { return row(i).input_ids; },
      [&](size_t i) -> const std::vector<int32_t>& { return row(i).token_type_ids; });
  Batch b;
  b.input = model::ToEncoderInput(padded, device);
  const auto n = static_cast<int64_t>(rows.size());
  const auto longs = [&](auto&& field) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < rows.size(); ++i) v.push_back(field(row(i)));
    return at::tensor(v, at::kLong).to(device);
  };
  const uint32_t targets = KindRulesOf(kind).targets();
  if (targets & kLabelTarget) b.targets.labels = longs([](const Row& r) { return r.label; });
  if (targets & kLabelSetTarget) {
    std::vector<float> v;
    for (size_t i = 0; i < rows.size(); ++i) v.insert(v.end(), row(i).label_set.begin(), row(i).label_set.end());
    b.targets.label_sets = at::tensor(v, at::kFloat).reshape({n, -1}).to(device);
  }
  if (targets & kValueTarget) {
    std::vector<float> v;
    for (size_t i = 0; i < rows.size(); ++i) v.push_back(row(i).value);
    b.targets.values = at::tensor(v, at::kFloat).to(device);
  }
  if (targets & kTagTarget) {
    std::vector<int64_t> v(static_cast<size_t>(n * padded.seq_len), model::kIgnoredPosition);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy(row(i).tags.begin(), row(i).tags.end(), v.begin() + static_cast<std::ptrdiff_t>(i * padded.seq_len));
    }
    b.targets.tags = at::tensor(v, at::kLong).reshape({n, padded.seq_len}).to(device);
  }
  if (targets & kSpanTarget) {
    b.targets.starts = longs([](const Row& r) { return r.start; });
    b.targets.ends = longs([](const Row& r) { return r.end; });
  }
  b.targets.attention_mask = b.input.attention_mask;
  return b;
}

at::Tensor HeadLogits(const model::EncoderOutput& out, model::TaskKind kind, int64_t outputs) {
  return model::ReadsTokens(kind) ? out.token_logits.narrow(2, 0, outputs) : out.logits.narrow(1, 0, outputs);
}

absl::StatusOr<Evaluation> EvaluateRows(const model::BertEncoder& encoder, const model::AdapterSet& set,
                                        const model::Head& head, const RowSet& data, int32_t pad_id, int batch_size) {
  const model::AdapterConfig& config = set.config();
  const int64_t k = head.num_outputs();
  RowOutputs outputs(data.rows.size());
  double loss_sum = 0;
  RETURN_IF_ERROR(model::GuardTorch("evaluate", [&]() -> absl::Status {
    torch::NoGradGuard no_grad;
    // fp32 parameters on a reduced-precision encoder (mixed-precision
    // training): evaluated as that encoder serves them, in its dtype.
    std::unique_ptr<model::AdapterSet> cast;
    if (set.dtype() != encoder.dtype()) {
      ASSIGN_OR_RETURN(cast, set.Clone(encoder.device(), encoder.dtype()));
    }
    const model::AdapterSet& run = cast != nullptr ? *cast : set;
    for (size_t start = 0; start < data.rows.size(); start += static_cast<size_t>(batch_size)) {
      std::vector<size_t> rows;
      for (size_t i = start; i < std::min(data.rows.size(), start + static_cast<size_t>(batch_size)); ++i) {
        rows.push_back(i);
      }
      const Batch batch = MakeBatch(data, rows, config.kind, pad_id, encoder.device());
      ASSIGN_OR_RETURN(model::EncoderOutput out, encoder.Forward(batch.input, run));
      const at::Tensor logits = HeadLogits(out, config.kind, k).to(at::kFloat);
      ASSIGN_OR_RETURN(at::Tensor loss, head.Loss(logits, batch.targets));
      loss_sum += loss.item<double>() * static_cast<double>(rows.size());
      const at::Tensor host = logits.to(at::kCPU).contiguous();
      const float* base = host.data_ptr<float>();
      const int64_t row_stride = host.numel() / static_cast<int64_t>(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        const int64_t width =
            model::ReadsTokens(config.kind) ? static_cast<int64_t>(data.rows[rows[i]].input_ids.size()) * k : k;
        const float* from = base + static_cast<int64_t>(i) * row_stride;
        outputs[rows[i]].assign(from, from + width);
      }
    }
    return absl::OkStatus();
  }));
  Evaluation e = ScoreRows(config, data, outputs);
  if (!data.rows.empty()) e.loss = loss_sum / static_cast<double>(data.rows.size());
  return e;
}

}  // namespace adapterd::training
