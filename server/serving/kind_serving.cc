#include "server/serving/kind_serving.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include "common/utf8.h"
#include "server/model/window_decoding.h"

namespace adapterd::serving {
namespace {

using model::TaskKind;

// The pooled kinds' one row: the text (and pair) encoded, truncated at the
// tokenizer's max_seq_len.
TextRows PooledRow(const model::BertTokenizer& tokenizer, const PredictRequest& request, size_t k) {
  std::optional<std::string_view> pair;
  if (!request.text_pairs.empty()) pair = request.text_pairs[k];
  model::Encoding enc = tokenizer.Encode(request.texts[k], pair);
  TextRows text;
  model::SlidingWindow& row = text.windows.emplace_back();
  row.input_ids = std::move(enc.input_ids);
  row.token_type_ids = std::move(enc.token_type_ids);
  return text;
}

// The kinds whose head reads the pooled vector: one row per text.
class PooledKind : public ServingKind {
 public:
  TextRows Plan(const model::BertTokenizer& tokenizer, const model::AdapterConfig&, const PredictRequest& request,
                size_t k, int32_t, size_t) const final {
    return PooledRow(tokenizer, request, k);
  }
};

class SequenceClassification final : public PooledKind {
 public:
  TaskKind kind() const override { return TaskKind::kSequenceClassification; }
  bool softmax_outputs() const override { return true; }
  TextPrediction Decode(const PredictRequest&, const model::AdapterConfig&, const TextRows&, size_t,
                        std::span<const std::span<const float>> windows) const override {
    const std::span<const float> probs = windows.front();
    TextPrediction p;
    p.probabilities.assign(probs.begin(), probs.end());
    const auto best = std::max_element(probs.begin(), probs.end());
    p.label = model::LabelProbability{static_cast<int32_t>(best - probs.begin()), *best};
    return p;
  }
};

class MultiLabel final : public PooledKind {
 public:
  TaskKind kind() const override { return TaskKind::kMultiLabelClassification; }
  bool softmax_outputs() const override { return false; }
  TextPrediction Decode(const PredictRequest& request, const model::AdapterConfig&, const TextRows&, size_t,
                        std::span<const std::span<const float>> windows) const override {
    const std::span<const float> logits = windows.front();
    TextPrediction p;
    for (float logit : logits) p.probabilities.push_back(static_cast<float>(model::Sigmoid(logit)));
    p.labels = model::LabelsAtThreshold(logits, request.threshold > 0 ? request.threshold : 0.5);
    return p;
  }
};

class Regression final : public PooledKind {
 public:
  TaskKind kind() const override { return TaskKind::kRegression; }
  bool softmax_outputs() const override { return false; }
  TextPrediction Decode(const PredictRequest&, const model::AdapterConfig& config, const TextRows&, size_t,
                        std::span<const std::span<const float>> windows) const override {
    TextPrediction p;
    p.value = model::Destandardize(windows.front().front(), config.target);
    return p;
  }
};

class TokenClassification final : public ServingKind {
 public:
  TaskKind kind() const override { return TaskKind::kTokenClassification; }
  absl::Status CheckRequest(const PredictRequest& request) const override {
    if (request.text_pairs.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "the task tags the tokens of one text (token classification): text_pairs must be empty");
  }
  TextRows Plan(const model::BertTokenizer& tokenizer, const model::AdapterConfig&, const PredictRequest& request,
                size_t k, int32_t length, size_t most_windows) const override {
    TextRows text;
    text.pieces = model::PiecesOfText(tokenizer, request.texts[k]);
    text.windows = model::TaggingWindows(tokenizer, text.pieces, length, most_windows);
    return text;
  }
  bool softmax_outputs() const override { return true; }
  // Each word takes its first piece's tag probabilities ("O" for a word no
  // window scored); the entities are read from the words' tags.
  TextPrediction Decode(const PredictRequest& request, const model::AdapterConfig& config, const TextRows& text,
                        size_t k, std::span<const std::span<const float>> windows) const override {
    std::vector<std::vector<float>> words =
        model::WordOutputs(text.pieces, text.windows, windows, config.num_outputs());
    for (std::vector<float>& w : words) {
      if (w.empty()) w.assign(static_cast<size_t>(config.num_outputs()), 0.0f), w[0] = 1.0f;  // "O"
    }
    TextPrediction p;
    for (const model::TaggedEntity& e : model::DecodeEntities(words, text.pieces.word_spans, config.labels)) {
      p.entities.push_back(
          {e.label, e.start, e.end, model::CodePointSubstr(request.texts[k], e.start, e.end), e.score});
    }
    return p;
  }
};

class ExtractiveQa final : public ServingKind {
 public:
  TaskKind kind() const override { return TaskKind::kExtractiveQa; }
  absl::Status CheckRequest(const PredictRequest& request) const override {
    if (!request.text_pairs.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "the task answers questions (extractive QA): give each question (texts) its context (text_pairs)");
  }
  TextRows Plan(const model::BertTokenizer& tokenizer, const model::AdapterConfig& config,
                const PredictRequest& request, size_t k, int32_t length, size_t most_windows) const override {
    TextRows text;
    text.pieces = model::PiecesOfText(tokenizer, request.text_pairs[k]);
    text.windows = model::QaWindows(tokenizer, request.texts[k], text.pieces, config.qa, length, most_windows);
    return text;
  }
  std::string_view windowed_what() const override { return " of context"; }
  bool softmax_outputs() const override { return false; }
  TextPrediction Decode(const PredictRequest& request, const model::AdapterConfig& config, const TextRows& text,
                        size_t k, std::span<const std::span<const float>> windows) const override {
    TextPrediction p;
    p.answers = model::DecodeAnswers(request.text_pairs[k], text.pieces, text.windows, windows,
                                     {.max_answer_tokens = config.qa.max_answer_tokens,
                                      .allow_no_answer = config.qa.allow_no_answer,
                                      .top_k = request.top_k_answers > 0 ? request.top_k_answers : 1});
    return p;
  }
};

const SequenceClassification kSequenceClassification;
const MultiLabel kMultiLabel;
const Regression kRegression;
const TokenClassification kTokenClassification;
const ExtractiveQa kExtractiveQa;

// In TaskKind's order (as the kinds' table, task_kinds.cc, lists them);
// kind_serving_test checks each entry's kind().
const ServingKind* const kKinds[] = {&kSequenceClassification, &kMultiLabel, &kRegression, &kTokenClassification,
                                     &kExtractiveQa};
static_assert(std::size(kKinds) == model::kNumTaskKinds, "one ServingKind per task kind");

}  // namespace

const ServingKind& ServingKindOf(model::TaskKind kind) { return *kKinds[static_cast<size_t>(kind) - 1]; }

}  // namespace adapterd::serving
