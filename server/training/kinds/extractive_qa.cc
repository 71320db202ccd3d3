// Extractive QA: a question (`text`), its context (`text_pair`), and
// answers each at its `answer_start` in the context (none: unanswerable,
// SQuAD 2.0). Rows are run_squad's windows of the context, the windowing
// stored with the task (Predict cuts the same); a window targets the first
// answer where it holds it whole, else [CLS]. Scored by SQuAD F1 (selects)
// and exact match on the answers decoded as Predict decodes them.
#include <algorithm>
#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/model/text_pieces.h"
#include "server/model/window_decoding.h"
#include "server/training/kind_examples.h"
#include "server/training/kinds/kind_support.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training::kinds {
namespace {

int32_t CodePointCount(std::string_view s) { return static_cast<int32_t>(CodePointOffsets(s).size() - 1); }

absl::Status CheckQa(const Example& e) {
  if (IsBlank(e.text)) return BadExample("the question (text) is blank");
  if (IsBlank(e.text_pair)) return BadExample("the context (text_pair) is blank");
  // The context's code points, found once for all its answers.
  const std::vector<size_t> at = CodePointOffsets(e.text_pair);
  const auto length = static_cast<int32_t>(at.size() - 1);
  for (size_t i = 0; i < e.answers.size(); ++i) {
    const AnswerSpan& a = e.answers[i];
    // In 64 bits: answer_start comes from the caller and may be INT32_MAX.
    const int64_t end = int64_t{a.start} + CodePointCount(a.text);
    const auto cp = [&](int64_t x) { return at[static_cast<size_t>(std::clamp<int64_t>(x, 0, length))]; };
    const std::string_view found = std::string_view(e.text_pair).substr(cp(a.start), cp(end) - cp(a.start));
    if (end > length || found != a.text) {
      return BadExample(absl::StrCat("answers[", i, "] '", a.text, "' is not at answer_start ", a.start,
                                     " of the context (found '", std::string(found), "')"));
    }
  }
  return absl::OkStatus();
}

class ExtractiveQa final : public KindRules {
 public:
  model::TaskKind kind() const override { return model::TaskKind::kExtractiveQa; }

  absl::Status CheckExample(const Example& e) const override {
    if (!e.tokens.empty() || !e.entities.empty() || !e.label.empty()) {
      return BadExample("an extractive QA example has a question, a context and answers");
    }
    return CheckQa(e);
  }
  absl::Status CheckTokens(const Example& e, const model::BertTokenizer& tokenizer, int32_t max_question_tokens,
                           int64_t& cut_questions) const override {
    if (static_cast<int32_t>(tokenizer.TokenizeToIds(e.text).size()) > max_question_tokens) ++cut_questions;
    if (e.answers.empty()) return absl::OkStatus();
    const model::TextPieces context = model::PiecesOfText(tokenizer, e.text_pair);
    for (const AnswerSpan& a : e.answers) RETURN_IF_ERROR(AnswerPieces(context, a).status());
    return absl::OkStatus();
  }

  absl::Status SetParameters(const std::vector<Example>& train, const ParameterChoices& choices,
                             model::AdapterConfig& config) const override {
    model::QaWindowing& qa = config.qa;
    qa.max_seq_len = choices.max_seq_len;
    qa.doc_stride =
        std::min(choices.doc_stride > 0 ? choices.doc_stride : model::DefaultDocStride(qa.max_seq_len), qa.max_seq_len);
    qa.max_question_tokens = choices.max_question_tokens;
    qa.max_answer_tokens = choices.max_answer_tokens;
    qa.allow_no_answer = std::any_of(train.begin(), train.end(), [](const Example& e) { return e.answers.empty(); });
    return absl::OkStatus();
  }

  uint32_t targets() const override { return kSpanTarget; }
  absl::Status AddRows(const RowContext& c, const Example& e, RowSet& out, ExampleGold& gold) const override {
    gold.pieces = model::PiecesOfText(c.tokenizer, e.text_pair);
    gold.text = e.text_pair;
    std::optional<std::pair<int32_t, int32_t>> answer;
    if (!e.answers.empty()) {
      ASSIGN_OR_RETURN(answer, AnswerPieces(gold.pieces, e.answers.front()));
    }
    for (const AnswerSpan& a : e.answers) gold.answers.push_back(a.text);
    if (gold.answers.empty()) gold.answers.emplace_back();
    const int32_t window = c.config.window_length(c.tokenizer.options().max_seq_len);
    for (const model::SlidingWindow& w : model::QaWindows(c.tokenizer, e.text, gold.pieces, c.config.qa, window)) {
      Row r = WindowRow(w);
      const int32_t last = w.context_offset + (w.context_end - w.context_begin);  // exclusive
      if (answer && answer->first >= w.context_offset && answer->second < last) {
        r.start = w.context_begin + answer->first - w.context_offset;
        r.end = w.context_begin + answer->second - w.context_offset;
      }
      AddRow(std::move(r), out, gold);
    }
    return absl::OkStatus();
  }
  Evaluation Score(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) const override {
    const model::QaWindowing& qa = config.qa;
    std::vector<std::vector<std::string>> gold;
    std::vector<std::string> predicted;
    for (const ExampleGold& g : data.examples) {
      const std::vector<model::TextAnswer> answers = model::DecodeAnswers(
          g.text, g.pieces, WindowsOf(data, g), OutputsOf(outputs, g),
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
};

}  // namespace

const KindRules& ExtractiveQaRules() {
  static const ExtractiveQa rules;
  return rules;
}

}  // namespace adapterd::training::kinds
