// What a Predict asks and what it answers, per text (InferenceEngine's
// request and result). Each kind fills its own fields of a TextPrediction
// (kind_serving.h); the API maps the fields that are set, whatever the kind.
//
// Thread safety: plain data.
#ifndef ADAPTERD_SERVER_SERVING_PREDICTION_H_
#define ADAPTERD_SERVER_SERVING_PREDICTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/model/task_kinds.h"
#include "server/model/window_decoding.h"

namespace adapterd::serving {

struct PredictRequest {
  std::string tenant;
  std::string task_id;
  std::vector<std::string> texts;
  // Empty, or one second text per entry of `texts` (sentence-pair tasks).
  std::vector<std::string> text_pairs;
  // 0 = the task's current version.
  int64_t version = 0;
  absl::Time deadline = absl::InfiniteFuture();
  // Multi-label: the probability a label needs (0 = 0.5).
  double threshold = 0;
  // Extractive QA: answers per question (0 = 1).
  int32_t top_k_answers = 0;
  // The tenant's weight in the batcher's sharing of each batch (>= 1).
  int64_t tenant_weight = 1;
};

// An entity token classification found: text[start, end) in code points.
struct Entity {
  std::string label;
  int32_t start = 0;
  int32_t end = 0;
  std::string text;
  double score = 0;
};

// One text's prediction: the fields of its task's kind are set, the
// others stay empty.
struct TextPrediction {
  // Sequence classification: the most probable label (ties: the first).
  std::optional<model::LabelProbability> label;
  // Multi-label: the labels at or over the threshold, highest first.
  std::vector<model::LabelProbability> labels;
  // Every label's probability in the task's label order: the softmax
  // (sequence classification), each sigmoid (multi-label).
  std::vector<float> probabilities;
  // Regression: the value, in the training targets' units.
  std::optional<double> value;
  // Token classification: the entities, in text order.
  std::vector<Entity> entities;
  // Extractive QA: the answers, best first ("no answer" is an empty text).
  std::vector<model::TextAnswer> answers;
};

// One Predict's results.
struct PredictResult {
  // The version that answered (resolved when the request asked for 0).
  int64_t version = 0;
  model::TaskKind kind = model::TaskKind::kSequenceClassification;
  // The task's labels (or tags) in output order: LabelProbability::label
  // indexes them.
  std::vector<std::string> labels;
  // One per text of the request, in its order.
  std::vector<TextPrediction> texts;
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_PREDICTION_H_
