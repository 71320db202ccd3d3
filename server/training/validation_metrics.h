// The validation metrics of every task kind, each defined as the reference
// implementation that users compare against defines it:
//   - single-label classification: accuracy, and micro/macro F1 as
//     scikit-learn's f1_score (macro: the mean over the labels that occur in
//     the gold or the predicted labels; a label with no true positive and no
//     prediction or no gold scores 0, sklearn's zero_division=0);
//   - multi-label classification: micro/macro F1 over the label matrix and
//     exact match (subset accuracy), as sklearn's f1_score / accuracy_score
//     on indicator matrices (macro: the mean over every label);
//   - regression: Pearson's r, Spearman's rho (Pearson's r of the ranks,
//     ties ranked by their average) and the mean squared error, as
//     scipy.stats.pearsonr / spearmanr and sklearn's mean_squared_error;
//   - token classification: entity-level precision/recall/F1 with
//     conlleval's chunk semantics (an I-X that does not continue an X chunk
//     starts one; micro over all entities, and per type);
//   - extractive QA: SQuAD v1.1's exact match and token F1 after the official
//     script's normalize_answer (lower-case; drop ASCII punctuation; drop the
//     articles a, an, the; collapse whitespace), each the best over an
//     example's gold answers, as the v2.0 script scores them: gold answers
//     that normalise to nothing are dropped unless all do, and "" against ""
//     is a match (no answer). Lower-casing is Unicode's simple case mapping
//     (Python's str.lower() uses the full one; they differ on a handful of
//     characters, such as U+0130 and a word-final capital sigma).
// Every result is a fraction in [0, 1] (the official scripts print
// percentages). A metric of nothing (no examples) is 0; a correlation of a
// constant series is 0 (scipy returns NaN: no number that a best-epoch
// comparison could use).
//
// tests/training/training_metrics_test.py checks each against scikit-learn and scipy
// on generated cases, and against the published scripts' behaviour on
// hand-made ones.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_TRAINING_VALIDATION_METRICS_H_
#define ADAPTERD_SERVER_TRAINING_VALIDATION_METRICS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/model/task_kinds.h"

namespace adapterd::training {

struct F1Scores {
  double micro_f1 = 0;
  double macro_f1 = 0;
};

// Fraction of `predicted[i] == gold[i]` (the spans have one size).
double Accuracy(std::span<const int32_t> gold, std::span<const int32_t> predicted);
// Single-label micro and macro F1 over class ids.
F1Scores ClassF1(std::span<const int32_t> gold, std::span<const int32_t> predicted);

// Multi-label: row i's labels are gold[i] / predicted[i] (label ids, any
// order, no repeats) out of `num_labels`.
struct MultiLabelScores {
  double micro_f1 = 0;
  double macro_f1 = 0;
  double exact_match = 0;
};
MultiLabelScores MultiLabelF1(std::span<const std::vector<int32_t>> gold,
                              std::span<const std::vector<int32_t>> predicted, int32_t num_labels);

struct RegressionScores {
  double pearson = 0;
  double spearman = 0;
  double mse = 0;
};
RegressionScores RegressionMetrics(std::span<const double> gold, std::span<const double> predicted);

// The entities of tag sequences are model::BioChunks' (conlleval's reading;
// server/model/task_kinds.h), the same that serving's decoding finds.
using model::BioChunks;
using model::Chunk;

struct EntityScores {
  double precision = 0;
  double recall = 0;
  double f1 = 0;
  // F1 per entity type (types seen in gold or predicted).
  std::map<std::string, double> f1_by_type;
};
// Micro scores over every sentence's entities: an entity counts when its
// start, end and type all match.
EntityScores EntityF1(std::span<const std::vector<std::string>> gold_tags,
                      std::span<const std::vector<std::string>> predicted_tags);

// SQuAD's normalize_answer.
std::string NormalizeAnswer(std::string_view answer);
struct QaScores {
  double exact_match = 0;
  double f1 = 0;
};
// `gold[i]`: example i's acceptable answers (at least one); `predicted[i]`
// its prediction.
QaScores SquadScores(std::span<const std::vector<std::string>> gold, std::span<const std::string> predicted);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_VALIDATION_METRICS_H_
