#include "server/training/task_rows.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"
#include "server/model/window_decoding.h"
#include "server/training/kind_examples.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training {
namespace {

using model::TaskKind;

// Sequence, multi-label and token classification name their outputs.
absl::StatusOr<int64_t> IndexOf(const std::map<std::string, int64_t>& index, const std::string& name,
                                const char* what) {
  auto it = index.find(name);
  if (it == index.end()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' is not one of the task's ", what, "s"));
  }
  return it->second;
}

Row PooledRow(const model::BertTokenizer& tok, const Example& e) {
  const model::Encoding enc = e.text_pair.empty() ? tok.Encode(e.text) : tok.Encode(e.text, e.text_pair);
  Row r;
  r.input_ids = enc.input_ids;
  r.token_type_ids = enc.token_type_ids;
  return r;
}

Row WindowRow(const model::SlidingWindow& w) {
  Row r;
  r.input_ids = w.input_ids;
  r.token_type_ids = w.token_type_ids;
  r.context_begin = w.context_begin;
  r.context_end = w.context_end;
  r.context_offset = w.context_offset;
  return r;
}

// Token classification: windows over the text's pieces, each word's first
// piece targeting its tag.
absl::Status AddTaggingRows(const model::AdapterConfig& config, const model::BertTokenizer& tok, const Example& e,
                            const std::map<std::string, int64_t>& index, RowSet& out, ExampleGold& gold) {
  ASSIGN_OR_RETURN(TaggedWords tagged, TagWords(e, tok));
  std::vector<int64_t> piece_tags(tagged.pieces.ids.size(), model::kIgnoredPosition);
  for (size_t w = 0; w < tagged.tags.size(); ++w) {
    const int32_t first = tagged.pieces.first_piece[w];
    if (first < 0) continue;
    ASSIGN_OR_RETURN(piece_tags[static_cast<size_t>(first)], IndexOf(index, tagged.tags[w], "tag"));
  }
  const int32_t window = config.window_length(tok.options().max_seq_len);
  for (const model::SlidingWindow& w : model::TaggingWindows(tok, tagged.pieces, window)) {
    Row r = WindowRow(w);
    r.tags.assign(r.input_ids.size(), model::kIgnoredPosition);
    for (int32_t p = w.context_begin; p < w.context_end; ++p) {
      r.tags[static_cast<size_t>(p)] = piece_tags[static_cast<size_t>(w.context_offset + p - w.context_begin)];
    }
    gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
    out.rows.push_back(std::move(r));
  }
  gold.text = std::move(tagged.text);
  gold.pieces = std::move(tagged.pieces);
  gold.tags = std::move(tagged.tags);
  return absl::OkStatus();
}

// Extractive QA: run_squad's windows over the context; each targets the
// first answer where it holds it whole, else [CLS].
absl::Status AddQaRows(const model::AdapterConfig& config, const model::BertTokenizer& tok, const Example& e,
                       RowSet& out, ExampleGold& gold) {
  gold.pieces = model::PiecesOfText(tok, e.text_pair);
  gold.text = e.text_pair;
  std::optional<std::pair<int32_t, int32_t>> answer;
  if (!e.answers.empty()) {
    ASSIGN_OR_RETURN(answer, AnswerPieces(gold.pieces, e.answers.front()));
  }
  for (const AnswerSpan& a : e.answers) gold.answers.push_back(a.text);
  if (gold.answers.empty()) gold.answers.emplace_back();
  for (const model::SlidingWindow& w :
       model::QaWindows(tok, e.text, gold.pieces, config.qa, config.window_length(tok.options().max_seq_len))) {
    Row r = WindowRow(w);
    const int32_t last = w.context_offset + (w.context_end - w.context_begin);  // exclusive
    if (answer && answer->first >= w.context_offset && answer->second < last) {
      r.start = w.context_begin + answer->first - w.context_offset;
      r.end = w.context_begin + answer->second - w.context_offset;
    }
    gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
    out.rows.push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status AddRows(const model::AdapterConfig& config, const model::BertTokenizer& tok, const Example& e,
                     const std::map<std::string, int64_t>& index, int32_t example, RowSet& out) {
  ExampleGold gold;
  const size_t first_row = out.rows.size();
  switch (config.kind) {
    case TaskKind::kSequenceClassification: {
      Row r = PooledRow(tok, e);
      ASSIGN_OR_RETURN(r.label, IndexOf(index, e.label, "label"));
      gold.label = r.label;
      gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
      out.rows.push_back(std::move(r));
      break;
    }
    case TaskKind::kMultiLabelClassification: {
      Row r = PooledRow(tok, e);
      r.label_set.assign(static_cast<size_t>(config.num_labels()), 0.0f);
      for (const std::string& l : MultiLabelsOf(e)) {
        ASSIGN_OR_RETURN(const int64_t i, IndexOf(index, l, "label"));
        r.label_set[static_cast<size_t>(i)] = 1.0f;
        gold.label_ids.push_back(static_cast<int32_t>(i));
      }
      std::sort(gold.label_ids.begin(), gold.label_ids.end());
      gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
      out.rows.push_back(std::move(r));
      break;
    }
    case TaskKind::kRegression: {
      Row r = PooledRow(tok, e);
      ASSIGN_OR_RETURN(gold.value, RegressionTargetOf(e));
      r.value = static_cast<float>(model::Standardize(gold.value, config.target));
      gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
      out.rows.push_back(std::move(r));
      break;
    }
    case TaskKind::kTokenClassification:
      RETURN_IF_ERROR(AddTaggingRows(config, tok, e, index, out, gold));
      break;
    case TaskKind::kExtractiveQa:
      RETURN_IF_ERROR(AddQaRows(config, tok, e, out, gold));
      break;
  }
  for (size_t r = first_row; r < out.rows.size(); ++r) out.rows[r].example = example;
  out.examples.push_back(std::move(gold));
  return absl::OkStatus();
}

// Each row's head outputs for scoring: K per row (pooled kinds), K per
// position of the row's own length (token kinds).
using RowOutputs = std::vector<std::vector<float>>;

Evaluation ScoreClassification(const RowSet& data, const RowOutputs& out) {
  std::vector<int32_t> gold, predicted;
  for (const ExampleGold& g : data.examples) {
    const std::vector<float>& logits = out[static_cast<size_t>(g.rows.front())];
    gold.push_back(static_cast<int32_t>(g.label));
    predicted.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  Evaluation e;
  e.accuracy = Accuracy(gold, predicted);
  e.micro_f1 = e.accuracy;  // one label per example
  e.macro_f1 = ClassF1(gold, predicted).macro_f1;
  return e;
}

Evaluation ScoreMultiLabel(const RowSet& data, const RowOutputs& out, int32_t labels) {
  std::vector<std::vector<int32_t>> gold, predicted;
  for (const ExampleGold& g : data.examples) {
    gold.push_back(g.label_ids);
    std::vector<int32_t>& p = predicted.emplace_back();
    for (const model::LabelProbability& l : model::LabelsAtThreshold(out[static_cast<size_t>(g.rows.front())], 0.5)) {
      p.push_back(l.label);
    }
    std::sort(p.begin(), p.end());
  }
  const MultiLabelScores s = MultiLabelF1(gold, predicted, labels);
  Evaluation e;
  e.micro_f1 = s.micro_f1;
  e.macro_f1 = s.macro_f1;
  e.exact_match = s.exact_match;
  return e;
}

Evaluation ScoreRegression(const RowSet& data, const RowOutputs& out, const model::Standardization& target) {
  std::vector<double> gold, predicted;
  for (const ExampleGold& g : data.examples) {
    gold.push_back(g.value);
    predicted.push_back(model::Destandardize(out[static_cast<size_t>(g.rows.front())][0], target));
  }
  const RegressionScores s = RegressionMetrics(gold, predicted);
  Evaluation e;
  e.spearman = s.spearman;
  e.pearson = s.pearson;
  e.mse = s.mse;
  return e;
}

// The example's windows as SlidingWindows (geometry only), and their rows'
// outputs, for window_decoding.h.
std::vector<model::SlidingWindow> WindowsOf(const RowSet& data, const ExampleGold& g) {
  std::vector<model::SlidingWindow> windows;
  for (int32_t r : g.rows) {
    const Row& row = data.rows[static_cast<size_t>(r)];
    model::SlidingWindow& w = windows.emplace_back();
    w.context_begin = row.context_begin;
    w.context_end = row.context_end;
    w.context_offset = row.context_offset;
  }
  return windows;
}
std::vector<std::span<const float>> OutputsOf(const RowOutputs& out, const ExampleGold& g) {
  std::vector<std::span<const float>> spans;
  for (int32_t r : g.rows) spans.emplace_back(out[static_cast<size_t>(r)]);
  return spans;
}

Evaluation ScoreTagging(const RowSet& data, const RowOutputs& out, const std::vector<std::string>& tags) {
  const auto k = static_cast<int64_t>(tags.size());
  std::vector<std::vector<std::string>> gold, predicted;
  for (const ExampleGold& g : data.examples) {
    const std::vector<std::vector<float>> words =
        model::WordOutputs(g.pieces, WindowsOf(data, g), OutputsOf(out, g), k);
    std::vector<std::string>& p = predicted.emplace_back(g.tags.size(), "O");
    for (size_t w = 0; w < words.size() && w < p.size(); ++w) {
      if (words[w].empty()) continue;
      p[w] = tags[static_cast<size_t>(std::max_element(words[w].begin(), words[w].end()) - words[w].begin())];
    }
    gold.push_back(g.tags);
  }
  Evaluation e;
  e.f1 = EntityF1(gold, predicted).f1;
  return e;
}

Evaluation ScoreQa(const RowSet& data, const RowOutputs& out, const model::QaWindowing& qa) {
  std::vector<std::vector<std::string>> gold;
  std::vector<std::string> predicted;
  for (const ExampleGold& g : data.examples) {
    const std::vector<model::TextAnswer> answers = model::DecodeAnswers(
        g.text, g.pieces, WindowsOf(data, g), OutputsOf(out, g),
        {.max_answer_tokens = qa.max_answer_tokens, .allow_no_answer = qa.allow_no_answer, .top_k = 1});
    predicted.push_back(answers.empty() ? std::string() : answers.front().text);
    gold.push_back(g.answers);
  }
  const QaScores s = SquadScores(gold, predicted);
  Evaluation e;
  e.f1 = s.f1;
  e.exact_match = s.exact_match;
  return e;
}

}  // namespace

absl::StatusOr<RowSet> EncodeRows(const model::AdapterConfig& config, const model::BertTokenizer& tokenizer,
                                  const std::vector<Example>& examples, const char* which) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < config.labels.size(); ++i) index[config.labels[i]] = static_cast<int64_t>(i);
  RowSet out;
  for (size_t i = 0; i < examples.size(); ++i) {
    absl::Status added = AddRows(config, tokenizer, examples[i], index, static_cast<int32_t>(i), out);
    if (!added.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(which, " example ", i, ": ", added.message()));
    }
  }
  return out;
}

Batch MakeBatch(const RowSet& set, std::span<const size_t> rows, TaskKind kind, int32_t pad_id, c10::Device device) {
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
  switch (kind) {
    case TaskKind::kSequenceClassification:
      b.targets.labels = longs([](const Row& r) { return r.label; });
      break;
    case TaskKind::kMultiLabelClassification: {
      std::vector<float> v;
      for (size_t i = 0; i < rows.size(); ++i) v.insert(v.end(), row(i).label_set.begin(), row(i).label_set.end());
      b.targets.label_sets = at::tensor(v, at::kFloat).reshape({n, -1}).to(device);
      break;
    }
    case TaskKind::kRegression: {
      std::vector<float> v;
      for (size_t i = 0; i < rows.size(); ++i) v.push_back(row(i).value);
      b.targets.values = at::tensor(v, at::kFloat).to(device);
      break;
    }
    case TaskKind::kTokenClassification: {
      std::vector<int64_t> v(static_cast<size_t>(n * padded.seq_len), model::kIgnoredPosition);
      for (size_t i = 0; i < rows.size(); ++i) {
        std::copy(row(i).tags.begin(), row(i).tags.end(), v.begin() + static_cast<std::ptrdiff_t>(i * padded.seq_len));
      }
      b.targets.tags = at::tensor(v, at::kLong).reshape({n, padded.seq_len}).to(device);
      break;
    }
    case TaskKind::kExtractiveQa:
      b.targets.starts = longs([](const Row& r) { return r.start; });
      b.targets.ends = longs([](const Row& r) { return r.end; });
      break;
  }
  b.targets.attention_mask = b.input.attention_mask;
  return b;
}

at::Tensor HeadLogits(const model::EncoderOutput& out, TaskKind kind, int64_t outputs) {
  return model::ReadsTokens(kind) ? out.token_logits.narrow(2, 0, outputs) : out.logits.narrow(1, 0, outputs);
}

Evaluation EvaluationOfRecord(const storage::v1::EpochMetrics& m) {
  Evaluation v;
  v.loss = m.val_loss();
  v.accuracy = m.val_accuracy();
  v.micro_f1 = m.micro_f1() == 0 ? m.val_accuracy() : m.micro_f1();
  v.macro_f1 = m.macro_f1();
  v.f1 = m.f1();
  v.exact_match = m.exact_match();
  v.spearman = m.spearman();
  v.pearson = m.pearson();
  v.mse = m.mse();
  return v;
}

double MetricValue(const Evaluation& e, model::Metric metric) {
  switch (metric) {
    case model::Metric::kValAccuracy:
      return e.accuracy;
    case model::Metric::kMicroF1:
      return e.micro_f1;
    case model::Metric::kSpearman:
      return e.spearman;
    case model::Metric::kF1:
      return e.f1;
  }
  return 0;
}

double SelectionMetric(TaskKind kind, const Evaluation& e) { return MetricValue(e, model::SpecOf(kind).selection); }

absl::StatusOr<Evaluation> EvaluateRows(const model::BertEncoder& encoder, const model::AdapterSet& set,
                                        const model::Head& head, const RowSet& data, int32_t pad_id, int batch_size) {
  const model::AdapterConfig& config = set.config();
  const int64_t k = head.num_outputs();
  RowOutputs outputs(data.rows.size());
  double loss_sum = 0;
  RETURN_IF_ERROR(model::GuardTorch("evaluate", [&]() -> absl::Status {
    torch::NoGradGuard no_grad;
    for (size_t start = 0; start < data.rows.size(); start += static_cast<size_t>(batch_size)) {
      std::vector<size_t> rows;
      for (size_t i = start; i < std::min(data.rows.size(), start + static_cast<size_t>(batch_size)); ++i) {
        rows.push_back(i);
      }
      const Batch batch = MakeBatch(data, rows, config.kind, pad_id, encoder.device());
      ASSIGN_OR_RETURN(model::EncoderOutput out, encoder.Forward(batch.input, set));
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
  Evaluation e;
  if (data.examples.empty()) return e;
  switch (config.kind) {
    case TaskKind::kSequenceClassification:
      e = ScoreClassification(data, outputs);
      break;
    case TaskKind::kMultiLabelClassification:
      e = ScoreMultiLabel(data, outputs, static_cast<int32_t>(k));
      break;
    case TaskKind::kRegression:
      e = ScoreRegression(data, outputs, config.target);
      break;
    case TaskKind::kTokenClassification:
      e = ScoreTagging(data, outputs, config.labels);
      break;
    case TaskKind::kExtractiveQa:
      e = ScoreQa(data, outputs, config.qa);
      break;
  }
  e.loss = loss_sum / static_cast<double>(data.rows.size());
  return e;
}

}  // namespace adapterd::training
