#include "server/model/task_kinds.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/model/adapter_config.h"
#include "server/model/text_pieces.h"

namespace adapterd::model {
namespace {

// Positions of the `n` highest values, highest first (ties: lower position
// first).
std::vector<int32_t> BestPositions(std::span<const float> values, int32_t n) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  const auto keep = std::min<size_t>(order.size(), static_cast<size_t>(std::max(n, 0)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](int32_t a, int32_t b) { return values[a] > values[b] || (values[a] == values[b] && a < b); });
  order.resize(keep);
  return order;
}

}  // namespace

namespace {

// The kinds' parameter rules (KindSpec::check_parameters).

absl::Status CheckClassLabels(const AdapterConfig& c) {
  if (c.labels.size() < 2) return absl::InvalidArgumentError("a task needs at least 2 labels");
  std::set<std::string_view> seen;
  for (const std::string& l : c.labels) {
    if (l.empty()) return absl::InvalidArgumentError("labels must be non-empty");
    if (!seen.insert(l).second) return absl::InvalidArgumentError(absl::StrCat("duplicate label '", l, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckRegression(const AdapterConfig& c) {
  if (!c.labels.empty()) return absl::InvalidArgumentError("a regression task has no labels");
  if (!std::isfinite(c.target.mean) || !std::isfinite(c.target.stddev) || c.target.stddev <= 0) {
    return absl::InvalidArgumentError("a regression task's target mean must be finite and its stddev positive");
  }
  return absl::OkStatus();
}

absl::Status CheckBioTags(const AdapterConfig& c) {
  std::vector<std::string> types;
  for (size_t i = 1; i + 1 < c.labels.size(); i += 2) {
    if (!c.labels[i].starts_with("B-")) break;
    types.push_back(c.labels[i].substr(2));
  }
  if (c.labels.size() < 3 || c.labels != BioTagSet(types) ||
      std::set<std::string>(types.begin(), types.end()).size() != types.size() ||
      std::any_of(types.begin(), types.end(), [](const std::string& t) { return t.empty(); })) {
    return absl::InvalidArgumentError(
        "token classification tags must be \"O\" then \"B-X\", \"I-X\" for each entity type X "
        "(at least one, distinct, non-empty)");
  }
  return absl::OkStatus();
}

absl::Status CheckQaWindows(const AdapterConfig& c) {
  const QaWindowing& qa = c.qa;
  if (!c.labels.empty()) return absl::InvalidArgumentError("an extractive QA task has no labels");
  if (qa.max_question_tokens < 1 || qa.doc_stride < MinDocStride(qa.max_seq_len) || qa.max_answer_tokens < 1 ||
      qa.max_seq_len < qa.max_question_tokens + 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extractive QA windows need max_question_tokens and max_answer_tokens >= 1, doc_stride >= max_seq_len "
        "/ 8 and max_seq_len >= max_question_tokens + 4; got max_seq_len ",
        qa.max_seq_len, ", doc_stride ", qa.doc_stride, ", max_question_tokens ", qa.max_question_tokens,
        ", max_answer_tokens ", qa.max_answer_tokens));
  }
  return absl::OkStatus();
}

constexpr KindSpec kKinds[] = {
    {.kind = TaskKind::kSequenceClassification,
     .name = "sequence_classification",
     .reads_tokens = false,
     .fixed_outputs = 0,
     .min_labels = 2,
     .label_noun = "labels",
     .selection = Metric::kValAccuracy,
     .selection_label = "val accuracy",
     .selection_is_fraction = true,
     .check_parameters = CheckClassLabels},
    {.kind = TaskKind::kMultiLabelClassification,
     .name = "multi_label_classification",
     .reads_tokens = false,
     .fixed_outputs = 0,
     .min_labels = 2,
     .label_noun = "labels",
     .selection = Metric::kMicroF1,
     .selection_label = "val micro-F1",
     .selection_is_fraction = true,
     .check_parameters = CheckClassLabels},
    {.kind = TaskKind::kRegression,
     .name = "regression",
     .reads_tokens = false,
     .fixed_outputs = 1,
     .min_labels = 0,
     .label_noun = "",
     .selection = Metric::kSpearman,
     .selection_label = "val Spearman",
     .selection_is_fraction = false,
     .check_parameters = CheckRegression},
    {.kind = TaskKind::kTokenClassification,
     .name = "token_classification",
     .reads_tokens = true,
     .fixed_outputs = 0,
     .min_labels = 3,
     .label_noun = "tags",
     .selection = Metric::kF1,
     .selection_label = "val entity F1",
     .selection_is_fraction = true,
     .check_parameters = CheckBioTags},
    {.kind = TaskKind::kExtractiveQa,
     .name = "extractive_qa",
     .reads_tokens = true,
     .fixed_outputs = 2,
     .min_labels = 0,
     .label_noun = "",
     .selection = Metric::kF1,
     .selection_label = "val SQuAD F1",
     .selection_is_fraction = true,
     .check_parameters = CheckQaWindows},
};
// The table is indexed by number - 1.
constexpr bool NumberedInOrder() {
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    if (static_cast<size_t>(kKinds[i].kind) != i + 1) return false;
  }
  return true;
}
static_assert(NumberedInOrder(), "kKinds lists the kinds in TaskKind's order, numbered from 1");
static_assert(std::size(kKinds) == kNumTaskKinds, "kNumTaskKinds counts the kinds");

}  // namespace

std::string_view MetricField(Metric metric) {
  switch (metric) {
    case Metric::kValAccuracy:
      return "val_accuracy";
    case Metric::kMicroF1:
      return "micro_f1";
    case Metric::kSpearman:
      return "spearman";
    case Metric::kF1:
      return "f1";
  }
  return "";
}

std::span<const KindSpec> AllKindSpecs() { return kKinds; }

const KindSpec* FindKindSpec(int32_t number) {
  if (number < 1 || static_cast<size_t>(number) > std::size(kKinds)) return nullptr;
  return &kKinds[number - 1];
}

const KindSpec& SpecOf(TaskKind kind) { return kKinds[static_cast<size_t>(kind) - 1]; }

std::string_view TaskKindName(TaskKind kind) {
  const KindSpec* spec = FindKindSpec(static_cast<int32_t>(kind));
  return spec != nullptr ? spec->name : "unknown";
}

bool ReadsTokens(TaskKind kind) {
  const KindSpec* spec = FindKindSpec(static_cast<int32_t>(kind));
  return spec != nullptr && spec->reads_tokens;
}

std::vector<LabelProbability> LabelsAtThreshold(std::span<const float> logits, double threshold) {
  std::vector<LabelProbability> out;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = Sigmoid(logits[i]);
    if (p >= threshold) out.push_back({static_cast<int32_t>(i), p});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const LabelProbability& a, const LabelProbability& b) { return a.probability > b.probability; });
  return out;
}

Standardization StandardizationOf(std::span<const double> targets) {
  Standardization s;
  if (targets.empty()) return s;
  s.mean = std::accumulate(targets.begin(), targets.end(), 0.0) / static_cast<double>(targets.size());
  double squares = 0;
  for (double t : targets) squares += (t - s.mean) * (t - s.mean);
  const double stddev = std::sqrt(squares / static_cast<double>(targets.size()));
  s.stddev = stddev > 0 && std::isfinite(stddev) ? stddev : 1.0;
  return s;
}

std::vector<std::string> BioTagSet(std::span<const std::string> entity_types) {
  std::vector<std::string> tags = {"O"};
  for (const std::string& type : entity_types) {
    tags.push_back("B-" + type);
    tags.push_back("I-" + type);
  }
  return tags;
}

std::vector<Chunk> BioChunks(std::span<const std::string> tags) {
  std::vector<Chunk> chunks;
  char prev_tag = 'O';
  std::string prev_type;
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string& t = tags[i];
    char tag = 'O';
    std::string type;
    if (t.size() >= 2 && (t[0] == 'B' || t[0] == 'I') && t[1] == '-') {
      tag = t[0];
      type = t.substr(2);
    }
    const bool continues = tag == 'I' && prev_tag != 'O' && prev_type == type;
    if (continues) {
      chunks.back().end = static_cast<int32_t>(i) + 1;
    } else if (tag != 'O') {
      chunks.push_back({static_cast<int32_t>(i), static_cast<int32_t>(i) + 1, type});
    }
    prev_tag = tag;
    prev_type = std::move(type);
  }
  return chunks;
}

std::vector<TaggedEntity> DecodeEntities(std::span<const std::vector<float>> word_tag_probabilities,
                                         std::span<const std::pair<int32_t, int32_t>> word_spans,
                                         std::span<const std::string> tags) {
  const size_t words = std::min(word_tag_probabilities.size(), word_spans.size());
  std::vector<std::string> word_tags;
  std::vector<double> word_scores;
  for (size_t w = 0; w < words; ++w) {
    const std::vector<float>& p = word_tag_probabilities[w];
    const size_t n = std::min(p.size(), tags.size());
    size_t best = 0;
    for (size_t t = 1; t < n; ++t) {
      if (p[t] > p[best]) best = t;
    }
    word_tags.push_back(n == 0 ? std::string("O") : tags[best]);
    word_scores.push_back(n == 0 ? 0.0 : p[best]);
  }
  std::vector<TaggedEntity> entities;
  for (const Chunk& c : BioChunks(word_tags)) {
    TaggedEntity e;
    e.label = c.type;
    e.start = word_spans[static_cast<size_t>(c.start)].first;
    e.end = word_spans[static_cast<size_t>(c.end - 1)].second;
    double sum = 0;
    for (int32_t w = c.start; w < c.end; ++w) sum += word_scores[static_cast<size_t>(w)];
    e.score = sum / static_cast<double>(c.end - c.start);
    entities.push_back(std::move(e));
  }
  return entities;
}

std::vector<SlidingWindow> SlidingWindows(std::span<const int32_t> question, std::span<const int32_t> context,
                                          int32_t max_seq_len, int32_t doc_stride, int32_t max_question_tokens,
                                          int32_t cls_id, int32_t sep_id, size_t max_windows) {
  question = question.first(std::min(question.size(), static_cast<size_t>(std::max(max_question_tokens, 0))));
  const bool pair = !question.empty();
  const auto q = static_cast<int32_t>(question.size());
  // [CLS] q [SEP] ... [SEP], or [CLS] ... [SEP].
  const int32_t room = std::max(1, max_seq_len - (pair ? q + 3 : 2));
  const int32_t stride = std::max(1, std::min(doc_stride, room));
  const auto n = static_cast<int32_t>(context.size());
  std::vector<SlidingWindow> windows;
  for (int32_t start = 0;; start += stride) {
    // The last window: a full one that ends with the context (the previous
    // window did not reach the end, so it still starts after it).
    if (start + room > n) start = std::max(0, n - room);
    const int32_t length = std::min(room, n - start);
    SlidingWindow w;
    w.input_ids.push_back(cls_id);
    if (pair) {
      w.input_ids.insert(w.input_ids.end(), question.begin(), question.end());
      w.input_ids.push_back(sep_id);
    }
    w.token_type_ids.assign(w.input_ids.size(), 0);
    w.context_begin = static_cast<int32_t>(w.input_ids.size());
    w.context_offset = start;
    w.input_ids.insert(w.input_ids.end(), context.begin() + start, context.begin() + start + length);
    w.context_end = static_cast<int32_t>(w.input_ids.size());
    w.input_ids.push_back(sep_id);
    w.token_type_ids.resize(w.input_ids.size(), pair ? 1 : 0);
    windows.push_back(std::move(w));
    if (start + length >= n || windows.size() > max_windows) break;
  }
  return windows;
}

std::vector<int32_t> MaxContextWindows(std::span<const SlidingWindow> windows, int32_t context_tokens) {
  std::vector<int32_t> best(static_cast<size_t>(std::max(context_tokens, 0)), -1);
  std::vector<double> best_score(best.size(), -1);
  for (size_t w = 0; w < windows.size(); ++w) {
    const int32_t length = windows[w].context_end - windows[w].context_begin;
    for (int32_t i = 0; i < length; ++i) {
      const int32_t token = windows[w].context_offset + i;
      if (token < 0 || token >= context_tokens) continue;
      const double score = std::min(i, length - 1 - i) + 0.01 * length;
      if (score > best_score[static_cast<size_t>(token)]) {
        best_score[static_cast<size_t>(token)] = score;
        best[static_cast<size_t>(token)] = static_cast<int32_t>(w);
      }
    }
  }
  return best;
}

std::vector<QaSpan> DecodeQaSpans(std::span<const QaWindow> windows, const QaDecodeOptions& options) {
  std::vector<QaSpan> candidates;
  double no_answer = std::numeric_limits<double>::infinity();
  for (size_t w = 0; w < windows.size(); ++w) {
    const QaWindow& window = windows[w];
    const size_t length = std::min(window.start_logits.size(), window.end_logits.size());
    if (length == 0) continue;
    no_answer = std::min(no_answer, static_cast<double>(window.start_logits[0]) + window.end_logits[0]);
    const int32_t begin = std::max(window.context_begin, 0);
    const int32_t end = std::min(window.context_end, static_cast<int32_t>(length));
    for (int32_t s : BestPositions(window.start_logits.first(length), options.best_positions)) {
      for (int32_t e : BestPositions(window.end_logits.first(length), options.best_positions)) {
        if (s < begin || e >= end || e < s || e - s + 1 > options.max_answer_tokens) continue;
        candidates.push_back({.window = static_cast<int32_t>(w),
                              .start = s,
                              .end = e,
                              .context_start = s - window.context_begin + window.context_offset,
                              .context_end = e - window.context_begin + window.context_offset,
                              .score = static_cast<double>(window.start_logits[s]) + window.end_logits[e]});
      }
    }
  }
  // "No answer" is a candidate when the task allows it, and the answer when
  // no window has a valid span at all (a question that fills the window
  // leaves no context): a Predict always answers something.
  if ((options.allow_no_answer || candidates.empty()) && std::isfinite(no_answer)) {
    candidates.push_back({.window = -1, .score = no_answer});
  }
  // Best first; ties to the earlier span in the context, then the shorter,
  // "no answer" last; a span's best window first.
  std::stable_sort(candidates.begin(), candidates.end(), [](const QaSpan& a, const QaSpan& b) {
    if (a.score != b.score) return a.score > b.score;
    if ((a.window < 0) != (b.window < 0)) return b.window < 0;
    if (a.context_start != b.context_start) return a.context_start < b.context_start;
    return a.context_end < b.context_end;
  });
  // One entry per span of the context (overlapping windows propose some
  // twice), the n best of them.
  std::vector<QaSpan> best;
  for (const QaSpan& c : candidates) {
    if (static_cast<int32_t>(best.size()) >= std::max(options.best_positions, 1)) break;
    const bool seen = std::any_of(best.begin(), best.end(), [&](const QaSpan& b) {
      return (b.window < 0) == (c.window < 0) && b.context_start == c.context_start && b.context_end == c.context_end;
    });
    if (!seen) best.push_back(c);
  }
  if (best.empty()) return best;
  // Probabilities: a softmax over the n-best list's scores.
  const double top = best.front().score;
  double total = 0;
  for (const QaSpan& c : best) total += std::exp(c.score - top);
  for (QaSpan& c : best) c.probability = std::exp(c.score - top) / total;
  best.resize(std::min(best.size(), static_cast<size_t>(std::max(options.top_k, 1))));
  return best;
}

}  // namespace adapterd::model
