// One training example, as the trainer and the dataset validator take it,
// and the one check of an example's own form: the API runs it on every
// uploaded example, the validator on every example a job reads. What a
// task's kind needs of its examples (a label, a number, BIO tags, answers
// at their offsets) is checked per job (kind_rules.h).
// No LibTorch: dataset validation (dataset_validator.h) builds without it.
//
// Thread safety: plain data and pure functions.
#ifndef ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
#define ADAPTERD_SERVER_TRAINING_EXAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace adapterd::training {

// An entity of a token classification example: code points [start, end)
// of the text.
struct EntitySpan {
  int32_t start = 0;
  int32_t end = 0;
  std::string label;
  bool operator==(const EntitySpan&) const = default;
};

// A gold answer of an extractive QA example: `text` at code point `start`
// of the context.
struct AnswerSpan {
  std::string text;
  int32_t start = 0;
  bool operator==(const AnswerSpan&) const = default;
};

// The fields of adapterd.v1.Example (docs/API.md, "Task kinds"); a kind
// reads its own.
struct Example {
  std::string text;                  // QA: the question
  std::string text_pair;             // empty for single-text tasks; QA: the context
  std::string label;                 // classification; regression: the target, in decimal
  std::vector<std::string> labels;   // multi-label
  std::vector<std::string> tokens;   // token classification, pre-split
  std::vector<std::string> tags;     // one BIO tag per token
  std::vector<EntitySpan> entities;  // token classification over `text`
  std::vector<AnswerSpan> answers;   // QA; none: unanswerable
  bool operator==(const Example&) const = default;
};

// The example in a record or API message (both have Example's fields).
template <typename ExampleProto>
Example ExampleFromProto(const ExampleProto& p) {
  Example e{p.text(), p.text_pair(), p.label()};
  e.labels.assign(p.labels().begin(), p.labels().end());
  e.tokens.assign(p.tokens().begin(), p.tokens().end());
  e.tags.assign(p.tags().begin(), p.tags().end());
  for (const auto& x : p.entities()) e.entities.push_back({x.start(), x.end(), x.label()});
  for (const auto& a : p.answers()) e.answers.push_back({a.text(), a.answer_start()});
  return e;
}

// A label (or tag) is a name that every Predict answer carries: 128 bytes.
inline constexpr size_t kMaxLabelBytes = 128;

// Bytes of text the example holds (its strings), for size limits.
size_t ExampleBytes(const Example& e);

// OK, or INVALID_ARGUMENT saying which field is wrong: a string that is not
// UTF-8; a text that is empty (unless `tokens` carry the words, and then
// the text must be empty); a label, tag or entity label that is empty or
// over kMaxLabelBytes; tokens without one tag each or an empty token; an
// entity with start < 0 or end <= start; an answer with start < 0 or an
// empty text. Whether the example has what its task's kind reads is a
// job's check. The message names the field only ("labels[2] has 129 bytes;
// the limit is 128"): callers say which example.
absl::Status CheckExampleFields(const Example& e);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
