// The task kinds (docs/ARCHITECTURE.md, "Task kinds") and the decoding of
// each kind's head outputs into what a prediction returns: plain numbers in,
// no LibTorch (adapterd::model_formats), so that serving's decoding and the
// tests need no tensors. The heads themselves (what they read, their losses)
// are server/model/heads.h.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_MODEL_TASK_KINDS_H_
#define ADAPTERD_SERVER_MODEL_TASK_KINDS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace adapterd::model {

struct AdapterConfig;  // adapter_config.h

// The same numbers as the API's adapterd.v1.TaskKind.
enum class TaskKind : int32_t {
  kSequenceClassification = 1,
  kMultiLabelClassification = 2,
  kRegression = 3,
  kTokenClassification = 4,
  kExtractiveQa = 5,
};
// How many kinds TaskKind has (1 .. kNumTaskKinds): each table of the
// kinds' code (heads.cc, training's and serving's kind rules) has one
// entry per kind, checked against it at compile time.
inline constexpr size_t kNumTaskKinds = 5;

// The validation figures a kind may select its best epoch by. Each is the
// double field of the same name in EpochMetrics (the API's and the stored
// one: record_mapping_test checks every kind's).
enum class Metric { kValAccuracy, kMicroF1, kSpearman, kF1 };
// "val_accuracy", "micro_f1", "spearman", "f1".
std::string_view MetricField(Metric metric);

// What adapterd knows about a task kind as facts, in one table
// (task_kinds.cc) that every layer reads instead of switching on the kind:
// its name, what its head reads, its outputs, and the metric that selects
// its best epoch with how clients show it (the API sends that with every
// EpochMetrics, so no client keeps a table of kinds). The kinds' code (head,
// rows, decoding) is listed in docs/ARCHITECTURE.md, "Adding a task kind".
struct KindSpec {
  TaskKind kind;
  // "sequence_classification", ...: the API enum's name, lower case, without
  // its TASK_KIND_ prefix.
  std::string_view name;
  // True for the kinds whose head reads every token's final hidden state;
  // false for those that read the pooled vector.
  bool reads_tokens;
  // K, the head's outputs, when it does not follow the labels (regression 1,
  // extractive QA 2); 0 for one per label or tag.
  int64_t fixed_outputs;
  // The fewest labels (tags) a task of the kind has; 0 for none.
  int32_t min_labels;
  // What its output names are called in messages: "labels", "tags", or ""
  // for a kind without them.
  std::string_view label_noun;
  // Higher is better; ties go to the lower validation loss.
  Metric selection;
  // How adapterctl, the Python client and the console name it.
  std::string_view selection_label;
  // True for a fraction shown as a percentage; false for a correlation.
  bool selection_is_fraction;
  // The rules of what a task of the kind stores besides its adapters
  // (AdapterConfig::Validate asks): its labels or BIO tags, its regression
  // target's standardisation, its QA windows. INVALID_ARGUMENT naming the
  // first rule broken.
  absl::Status (*check_parameters)(const AdapterConfig& config);
};

// Every kind, in TaskKind's order.
std::span<const KindSpec> AllKindSpecs();
// The kind numbered `number` (TaskKind's, the API's), or null.
const KindSpec* FindKindSpec(int32_t number);
// `kind` must be one of TaskKind's values.
const KindSpec& SpecOf(TaskKind kind);

// SpecOf(kind).name; "unknown" for a number that is not a kind.
std::string_view TaskKindName(TaskKind kind);
// SpecOf(kind).reads_tokens.
bool ReadsTokens(TaskKind kind);

// The logistic function: a multi-label logit's probability.
inline double Sigmoid(double logit) { return 1.0 / (1.0 + std::exp(-logit)); }

// Multi-label: the labels whose probability sigmoid(logit) is at least
// `threshold`, highest first (ties: lower index first).
struct LabelProbability {
  int32_t label = 0;
  double probability = 0;
};
std::vector<LabelProbability> LabelsAtThreshold(std::span<const float> logits, double threshold);

// Regression targets are standardised with the training set's mean and
// standard deviation (stored with the task); predictions are mapped back.
struct Standardization {
  double mean = 0;
  double stddev = 1;  // > 0; a constant training target has 1
};
Standardization StandardizationOf(std::span<const double> targets);
inline double Standardize(double value, const Standardization& s) { return (value - s.mean) / s.stddev; }
inline double Destandardize(double value, const Standardization& s) { return value * s.stddev + s.mean; }

// A position token classification does not score: special tokens, padding,
// and every piece of a word but its first (HF's -100).
inline constexpr int64_t kIgnoredPosition = -100;

// Token classification: the BIO tags are "O" and "B-X", "I-X" per entity
// type X. A tag set lists "O" first, then each type's B- and I-.
std::vector<std::string> BioTagSet(std::span<const std::string> entity_types);
// An entity over tokens (or words) [start, end) of type `type`.
struct Chunk {
  int32_t start = 0;
  int32_t end = 0;
  std::string type;
  bool operator==(const Chunk&) const = default;
};
// The entities of a BIO tag sequence as conlleval reads them: an entity
// starts at B-X, and at an I-X that does not continue an X entity; it ends
// before any tag that does not continue it. Anything but B-X / I-X is O.
std::vector<Chunk> BioChunks(std::span<const std::string> tags);

// Token classification's prediction for one text. `word_tag_probabilities`
// holds, per word (in order), the tag probabilities of its first piece
// (one per tag of `tags`, the task's tag set); `word_spans` each word's
// [start, end) in the text (code points, TokenizeWithOffsets'). Each word
// takes its most probable tag (ties: the earlier tag); the words' tags give
// the entities as BioChunks reads them. An entity spans its first word's
// start to its last word's end; its score is the mean probability of its
// words' tags.
struct TaggedEntity {
  std::string label;  // the entity type, X of B-X
  int32_t start = 0;
  int32_t end = 0;
  double score = 0;
};
std::vector<TaggedEntity> DecodeEntities(std::span<const std::vector<float>> word_tag_probabilities,
                                         std::span<const std::pair<int32_t, int32_t>> word_spans,
                                         std::span<const std::string> tags);

// How an extractive QA task cuts a context into windows
// ([CLS] question [SEP] context window [SEP]), as BERT's run_squad does.
struct QaWindowing {
  // Tokens per window, specials included.
  int32_t max_seq_len = 128;
  // Context tokens from one window's start to the next's; at most a
  // window's context length (run_squad's min(length, doc_stride)).
  int32_t doc_stride = 128;
  // Longest question in tokens; a longer one is truncated.
  int32_t max_question_tokens = 64;
  // Longest answer in tokens (decoding).
  int32_t max_answer_tokens = 30;
  // "No answer" competes with the spans (SQuAD 2.0).
  bool allow_no_answer = false;
  bool operator==(const QaWindowing&) const = default;
};

// Windows over a long input, as BERT's run_squad cuts a context: each is
// [CLS] question [SEP] a stretch of the context [SEP] (token types 0, then
// 1 from the context on), or [CLS] a stretch [SEP] without a question (types
// 0; token classification's long texts). The question is cut to
// `max_question_tokens`; each window holds at most `max_seq_len` tokens;
// windows start min(doc_stride, a window's context room) context tokens
// apart, and the last ends with the context. Unlike run_squad's, the last
// window of a context longer than one window is a full window (it starts up
// to a stride earlier), so that every window of a long input has the same
// length and batches of them carry no padding. An empty context gives one
// window with no context tokens. At most max_windows + 1 windows are made:
// a caller that bounds the count sees the excess without building them all.
struct SlidingWindow {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  // Positions [context_begin, context_end) are context tokens
  // context_offset, context_offset + 1, ...
  int32_t context_begin = 0;
  int32_t context_end = 0;
  int32_t context_offset = 0;
};
std::vector<SlidingWindow> SlidingWindows(std::span<const int32_t> question, std::span<const int32_t> context,
                                          int32_t max_seq_len, int32_t doc_stride, int32_t max_question_tokens,
                                          int32_t cls_id, int32_t sep_id, size_t max_windows = SIZE_MAX);
// For each context token, the window where it has the most context on both
// sides (run_squad's _check_is_max_context: the larger of min(left, right) +
// 0.01 * the window's context length; ties to the earlier window), whose
// prediction for it counts.
std::vector<int32_t> MaxContextWindows(std::span<const SlidingWindow> windows, int32_t context_tokens);

// Extractive QA span decoding (BERT's run_squad), over the windows of one
// context: in each window, the `best_positions` highest start and end
// logits; a span must lie inside the window's context, start <= end, and be
// at most `max_answer_tokens` long; its score is its start logit plus its
// end logit. A span that two overlapping windows both propose counts once,
// with its better score. With `allow_no_answer`, "no answer" competes with
// the lowest [CLS] score (position 0) of the windows. The n best
// (`best_positions`) form the n-best list, and each one's probability is a
// softmax over that list's scores.
struct QaWindow {
  std::span<const float> start_logits;  // one per position of the window
  std::span<const float> end_logits;
  // Positions [context_begin, context_end) of the window are the context's.
  int32_t context_begin = 0;
  int32_t context_end = 0;
  // The index among the context's tokens of position context_begin.
  int32_t context_offset = 0;
};
struct QaDecodeOptions {
  int32_t best_positions = 20;
  int32_t max_answer_tokens = 30;
  bool allow_no_answer = false;
  // How many answers to return, the first of the n-best list.
  int32_t top_k = 1;
};
struct QaSpan {
  // -1 for "no answer"; otherwise the window that scored the span best and
  // the span's positions in it, [start, end] (end inclusive, as
  // run_squad's).
  int32_t window = -1;
  int32_t start = 0;
  int32_t end = 0;
  // The span as context token indices, [context_start, context_end].
  int32_t context_start = 0;
  int32_t context_end = 0;
  double score = 0;
  double probability = 0;
};
// Best first; ties go to the earlier span in the context, then the shorter
// one ("no answer" after every span of its score). When no window has a
// valid span, the one candidate is "no answer" (window -1), whether or not
// the task allows it; empty only for no windows at all.
std::vector<QaSpan> DecodeQaSpans(std::span<const QaWindow> windows, const QaDecodeOptions& options);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TASK_KINDS_H_
