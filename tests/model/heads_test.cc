// The task kinds' heads (server/model/heads.h) and decoding
// (server/model/task_kinds.h). Each loss and its gradient is checked in
// float64 against a reference written out here element by element (loops
// over plain numbers, no LibTorch loss function); QA span decoding on
// hand-made logits: ties, spans that cross the question, spans longer than
// the maximum, several windows, "no answer".
#include "server/model/heads.h"

#include <ATen/ATen.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "server/model/task_kinds.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kTol = 1e-12;

at::Tensor RandomLogits(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randn(shape, g, at::TensorOptions().dtype(at::kDouble)).mul_(3).requires_grad_(true);
}

// log(sum(exp(z))) over `z`, stably.
double LogSumExp(const std::vector<double>& z) {
  double m = -INFINITY;
  for (double v : z) m = std::max(m, v);
  double s = 0;
  for (double v : z) s += std::exp(v - m);
  return m + std::log(s);
}

// Row `r` of a [R, K] (or flattened) double tensor as numbers.
std::vector<double> Row(const at::Tensor& t, int64_t r) {
  at::Tensor row = t.reshape({-1, t.size(-1)})[r].detach().contiguous();
  return std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
}

void ExpectClose(const at::Tensor& got, const std::vector<double>& want, const std::string& what) {
  at::Tensor flat = got.detach().contiguous().reshape({-1});
  ASSERT_EQ(flat.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<double>(), want[i], kTol) << what << " element " << i;
  }
}

TEST(Heads, SequenceClassificationIsMeanCrossEntropyWithItsGradient) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kSequenceClassification, 4));
  EXPECT_FALSE(head->reads_tokens());
  EXPECT_EQ(head->num_outputs(), 4);
  const at::Tensor logits = RandomLogits({5, 4}, 1);
  HeadTargets targets;
  targets.labels = at::tensor({0, 3, 1, 1, 2}, at::kLong);
  ASSERT_OK_AND_ASSIGN(at::Tensor loss, head->Loss(logits, targets));
  loss.backward();
  double want = 0;
  std::vector<double> grad;
  for (int64_t i = 0; i < 5; ++i) {
    const std::vector<double> z = Row(logits, i);
    const int64_t y = targets.labels[i].item<int64_t>();
    const double lse = LogSumExp(z);
    want += (lse - z[static_cast<size_t>(y)]) / 5;
    for (size_t k = 0; k < z.size(); ++k) grad.push_back((std::exp(z[k] - lse) - (static_cast<int64_t>(k) == y)) / 5);
  }
  EXPECT_NEAR(loss.item<double>(), want, kTol);
  ExpectClose(logits.grad(), grad, "gradient");
}

TEST(Heads, MultiLabelIsMeanSigmoidCrossEntropyOverEveryLabel) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kMultiLabelClassification, 3));
  const at::Tensor logits = RandomLogits({4, 3}, 2);
  HeadTargets targets;
  targets.label_sets = at::tensor({1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0}, at::kDouble).reshape({4, 3});
  ASSERT_OK_AND_ASSIGN(at::Tensor loss, head->Loss(logits, targets));
  loss.backward();
  double want = 0;
  std::vector<double> grad;
  for (int64_t i = 0; i < 4; ++i) {
    const std::vector<double> z = Row(logits, i), t = Row(targets.label_sets, i);
    for (size_t k = 0; k < 3; ++k) {
      const double p = 1 / (1 + std::exp(-z[k]));
      want += -(t[k] * std::log(p) + (1 - t[k]) * std::log(1 - p)) / 12;
      grad.push_back((p - t[k]) / 12);
    }
  }
  EXPECT_NEAR(loss.item<double>(), want, kTol);
  ExpectClose(logits.grad(), grad, "gradient");
}

TEST(Heads, RegressionIsMeanSquaredErrorOnStandardisedTargets) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kRegression, 0));
  EXPECT_EQ(head->num_outputs(), 1);
  const at::Tensor logits = RandomLogits({3, 1}, 3);
  const std::vector<double> raw = {2.0, 5.0, 11.0};
  const Standardization s = StandardizationOf(raw);
  EXPECT_NEAR(s.mean, 6.0, kTol);
  EXPECT_NEAR(s.stddev, std::sqrt((16.0 + 1.0 + 25.0) / 3), kTol);  // population standard deviation
  EXPECT_NEAR(Destandardize(Standardize(7.5, s), s), 7.5, kTol);
  HeadTargets targets;
  targets.values = at::tensor({Standardize(raw[0], s), Standardize(raw[1], s), Standardize(raw[2], s)}, at::kDouble);
  ASSERT_OK_AND_ASSIGN(at::Tensor loss, head->Loss(logits, targets));
  loss.backward();
  double want = 0;
  std::vector<double> grad;
  for (int64_t i = 0; i < 3; ++i) {
    const double d = Row(logits, i)[0] - Standardize(raw[static_cast<size_t>(i)], s);
    want += d * d / 3;
    grad.push_back(2 * d / 3);
  }
  EXPECT_NEAR(loss.item<double>(), want, kTol);
  ExpectClose(logits.grad(), grad, "gradient");
  EXPECT_EQ(StandardizationOf(std::vector<double>{4, 4}).stddev, 1.0);  // a constant target
}

TEST(Heads, TokenClassificationScoresOnlyTheTaggedRealPositions) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kTokenClassification, 5));
  EXPECT_TRUE(head->reads_tokens());
  const at::Tensor logits = RandomLogits({2, 4, 5}, 4);
  HeadTargets targets;
  // Row 0: [CLS] w1 ##w1 [SEP]; row 1: [CLS] w1 [SEP] pad, whose pad carries
  // a tag that the mask must discard.
  targets.tags = at::tensor({-100, 2, -100, -100, -100, 4, -100, 1}, at::kLong).reshape({2, 4});
  targets.attention_mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 0}, at::kLong).reshape({2, 4});
  ASSERT_OK_AND_ASSIGN(at::Tensor loss, head->Loss(logits, targets));
  loss.backward();
  std::vector<double> grad(2 * 4 * 5, 0.0);
  double want = 0;
  for (auto [row, pos, tag] : {std::tuple{0, 1, 2}, std::tuple{1, 1, 4}}) {
    const std::vector<double> z = Row(logits, row * 4 + pos);
    const double lse = LogSumExp(z);
    want += (lse - z[static_cast<size_t>(tag)]) / 2;
    for (int k = 0; k < 5; ++k)
      grad[static_cast<size_t>((row * 4 + pos) * 5 + k)] = (std::exp(z[k] - lse) - (k == tag)) / 2;
  }
  EXPECT_NEAR(loss.item<double>(), want, kTol);
  ExpectClose(logits.grad(), grad, "gradient");

  // Nothing to score: a zero loss that still reaches the logits.
  HeadTargets none;
  none.tags = at::full({2, 4}, kIgnoredPosition, at::kLong);
  ASSERT_OK_AND_ASSIGN(at::Tensor zero, head->Loss(logits, none));
  EXPECT_EQ(zero.item<double>(), 0.0);
  EXPECT_TRUE(zero.requires_grad());
}

TEST(Heads, ExtractiveQaAveragesStartAndEndCrossEntropyOverRealTokens) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kExtractiveQa, 0));
  EXPECT_EQ(head->num_outputs(), 2);
  const at::Tensor logits = RandomLogits({2, 5, 2}, 5);
  HeadTargets targets;
  targets.starts = at::tensor({3, 0}, at::kLong);  // row 1: the answer is not in this window ([CLS])
  targets.ends = at::tensor({4, 0}, at::kLong);
  targets.attention_mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, at::kLong).reshape({2, 5});
  ASSERT_OK_AND_ASSIGN(at::Tensor loss, head->Loss(logits, targets));
  loss.backward();
  std::vector<double> grad(2 * 5 * 2, 0.0);
  double want = 0;
  for (int64_t row = 0; row < 2; ++row) {
    const int64_t real = row == 0 ? 5 : 3;
    for (int which = 0; which < 2; ++which) {
      std::vector<double> z;
      for (int64_t p = 0; p < real; ++p) z.push_back(Row(logits, row * 5 + p)[static_cast<size_t>(which)]);
      const int64_t target = (which == 0 ? targets.starts : targets.ends)[row].item<int64_t>();
      const double lse = LogSumExp(z);
      want += (lse - z[static_cast<size_t>(target)]) / 4;  // (start + end) / 2, mean over 2 rows
      for (int64_t p = 0; p < real; ++p) {
        grad[static_cast<size_t>((row * 5 + p) * 2 + which)] =
            (std::exp(z[static_cast<size_t>(p)] - lse) - (p == target)) / 4;
      }
    }
  }
  EXPECT_NEAR(loss.item<double>(), want, kTol);
  ExpectClose(logits.grad(), grad, "gradient (zero on padding)");
}

TEST(Heads, AQaRowsLossDoesNotDependOnItsPadding) {
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kExtractiveQa, 0));
  const at::Tensor short_row = RandomLogits({1, 4, 2}, 6).detach();
  const at::Tensor padded = at::cat({short_row, at::full({1, 3, 2}, 50.0, at::kDouble)}, 1);
  HeadTargets targets;
  targets.starts = at::tensor({2}, at::kLong);
  targets.ends = at::tensor({3}, at::kLong);
  targets.attention_mask = at::ones({1, 4}, at::kLong);
  ASSERT_OK_AND_ASSIGN(at::Tensor alone, head->Loss(short_row, targets));
  targets.attention_mask = at::cat({at::ones({1, 4}, at::kLong), at::zeros({1, 3}, at::kLong)}, 1);
  ASSERT_OK_AND_ASSIGN(at::Tensor with_padding, head->Loss(padded, targets));
  EXPECT_NEAR(alone.item<double>(), with_padding.item<double>(), kTol);
}

TEST(Heads, CountsAKindCannotHaveAndMissingTargetsAreInvalidArgument) {
  EXPECT_THAT(MakeHead(TaskKind::kSequenceClassification, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot have 1 labels")));
  EXPECT_THAT(MakeHead(TaskKind::kTokenClassification, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 tags")));
  EXPECT_THAT(MakeHead(static_cast<TaskKind>(9), 2), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto head, MakeHead(TaskKind::kMultiLabelClassification, 3));
  EXPECT_THAT(head->Loss(RandomLogits({2, 3}, 7), HeadTargets{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label sets has shape undefined")));
  ASSERT_OK_AND_ASSIGN(auto qa, MakeHead(TaskKind::kExtractiveQa, 0));
  EXPECT_THAT(qa->Loss(RandomLogits({2, 3}, 7), HeadTargets{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("logits has shape [2, 3], expected [*, *, 2]")));
}

// --- Decoding ----------------------------------------------------------------

TEST(TaskKinds, MultiLabelKeepsLabelsAtOrOverTheThresholdHighestFirst) {
  const std::vector<float> logits = {0.0f, 2.0f, -1.0f, 2.0f, 0.5f};
  std::vector<int32_t> labels;
  for (const LabelProbability& l : LabelsAtThreshold(logits, 0.5)) labels.push_back(l.label);
  EXPECT_THAT(labels, ElementsAre(1, 3, 4, 0));  // sigmoid(0) = 0.5 is kept; ties by index
  EXPECT_NEAR(LabelsAtThreshold(logits, 0.5)[0].probability, 1 / (1 + std::exp(-2.0)), 1e-12);
  EXPECT_TRUE(LabelsAtThreshold(logits, 0.99).empty());
}

TEST(TaskKinds, BioTagSetsAndChunks) {
  EXPECT_THAT(BioTagSet(std::vector<std::string>{"PER", "LOC"}), ElementsAre("O", "B-PER", "I-PER", "B-LOC", "I-LOC"));
  const std::vector<std::string> tags = {"B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-PER", "x"};
  EXPECT_THAT(BioChunks(tags),
              ElementsAre(Chunk{0, 2, "PER"}, Chunk{3, 4, "LOC"}, Chunk{4, 5, "LOC"}, Chunk{5, 6, "PER"}));
}

TEST(TaskKinds, EntitiesComeFromEachWordsMostProbableTagWithTheirSpansAndScores) {
  const std::vector<std::string> tags = BioTagSet(std::vector<std::string>{"PER", "LOC"});  // O B-PER I-PER B-LOC I-LOC
  // "Ada Lovelace visited New York ." : words and their code-point spans.
  const std::vector<std::pair<int32_t, int32_t>> spans = {{0, 3}, {4, 12}, {13, 20}, {21, 24}, {25, 29}, {30, 31}};
  const std::vector<std::vector<float>> probs = {
      {0.1f, 0.8f, 0.05f, 0.05f, 0.0f},  // B-PER
      {0.1f, 0.1f, 0.6f, 0.1f, 0.1f},    // I-PER
      {0.9f, 0.0f, 0.0f, 0.1f, 0.0f},    // O
      {0.2f, 0.0f, 0.0f, 0.7f, 0.1f},    // B-LOC
      {0.1f, 0.0f, 0.0f, 0.0f, 0.9f},    // I-LOC
      {0.4f, 0.0f, 0.0f, 0.0f, 0.6f},    // I-LOC after I-LOC: continues "New York"
  };
  const std::vector<TaggedEntity> e = DecodeEntities(probs, spans, tags);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].label, "PER");
  EXPECT_EQ(std::pair(e[0].start, e[0].end), std::pair(0, 12));  // "Ada Lovelace"
  EXPECT_NEAR(e[0].score, (0.8 + 0.6) / 2, 1e-6);
  EXPECT_EQ(e[1].label, "LOC");
  EXPECT_EQ(std::pair(e[1].start, e[1].end), std::pair(21, 31));
  EXPECT_NEAR(e[1].score, (0.7 + 0.9 + 0.6) / 3, 1e-6);
  // An I- after O starts an entity (conlleval); ties go to the earlier tag.
  const std::vector<std::vector<float>> lone = {{0.9f, 0, 0, 0, 0}, {0.2f, 0, 0, 0.2f, 0.6f}, {0.5f, 0.5f, 0, 0, 0}};
  const std::vector<TaggedEntity> l = DecodeEntities(lone, std::span(spans).first(3), tags);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].label, "LOC");
  EXPECT_EQ(std::pair(l[0].start, l[0].end), std::pair(4, 12));
  EXPECT_TRUE(DecodeEntities({}, {}, tags).empty());
}

// --- Windows ---------------------------------------------------------------

std::vector<int32_t> Range(int32_t from, int32_t to) {
  std::vector<int32_t> out;
  for (int32_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

TEST(SlidingWindows, ALongContextIsCutLikeRunSquadAndEveryTokenIsCovered) {
  constexpr int32_t kCls = 2, kSep = 3;
  const std::vector<int32_t> question = {100, 101, 102};
  const std::vector<int32_t> context = Range(1000, 1020);  // 20 tokens
  // 16 per window - 3 question - 3 specials = 10 context tokens; stride 4.
  const std::vector<SlidingWindow> w = SlidingWindows(question, context, 16, 4, 64, kCls, kSep);
  ASSERT_EQ(w.size(), 4u);
  std::vector<int32_t> offsets;
  for (const SlidingWindow& x : w) offsets.push_back(x.context_offset);
  // run_squad's last window would start at 12 and hold 8 tokens; this one is
  // a full window that ends with the context.
  EXPECT_THAT(offsets, ElementsAre(0, 4, 8, 10));
  std::vector<int> covered(context.size(), 0);
  for (const SlidingWindow& x : w) {
    EXPECT_LE(x.input_ids.size(), 16u);
    ASSERT_EQ(x.token_type_ids.size(), x.input_ids.size());
    EXPECT_THAT(std::vector<int32_t>(x.input_ids.begin(), x.input_ids.begin() + 5), ElementsAre(2, 100, 101, 102, 3));
    EXPECT_EQ(x.context_begin, 5);
    EXPECT_EQ(x.input_ids.back(), kSep);
    for (int32_t p = x.context_begin; p < x.context_end; ++p) {
      EXPECT_EQ(x.input_ids[static_cast<size_t>(p)],
                context[static_cast<size_t>(x.context_offset + p - x.context_begin)]);
      ++covered[static_cast<size_t>(x.context_offset + p - x.context_begin)];
    }
    EXPECT_EQ(x.token_type_ids[4], 0);  // the question's [SEP]
    EXPECT_EQ(x.token_type_ids[5], 1);  // the context
  }
  for (int c : covered) EXPECT_GE(c, 1);
  EXPECT_EQ(w.back().context_end - w.back().context_begin, 10);
  for (const SlidingWindow& x : w) EXPECT_EQ(x.input_ids.size(), 16u);  // one length: no padding
  // Token 9 is in windows 0 (9 left, 0 right), 1 (5, 4) and 2 (1, 8): window 1.
  const std::vector<int32_t> best = MaxContextWindows(w, 20);
  EXPECT_EQ(best[9], 1);
  EXPECT_EQ(best[0], 0);
  EXPECT_EQ(best[19], 3);
  for (int32_t b : best) EXPECT_GE(b, 0);
}

TEST(SlidingWindows, StrideIsCappedQuestionsCutAndTextsWithoutAQuestionAreSingleSegments) {
  const std::vector<int32_t> context = Range(1000, 1012);
  // A stride past a window's room would skip tokens: it is capped at the room.
  const std::vector<SlidingWindow> wide = SlidingWindows({}, context, 7, 50, 64, 2, 3);  // room 5
  std::vector<int32_t> offsets;
  for (const SlidingWindow& x : wide) {
    offsets.push_back(x.context_offset);
    EXPECT_EQ(x.input_ids.front(), 2);
    EXPECT_EQ(x.context_begin, 1);  // [CLS] text [SEP]: no question
    EXPECT_THAT(x.token_type_ids, ::testing::Each(0));
  }
  EXPECT_THAT(offsets, ElementsAre(0, 5, 7));  // the last a full window, ending with the text
  const std::vector<int32_t> long_question = Range(100, 140);
  const std::vector<SlidingWindow> cut = SlidingWindows(long_question, context, 32, 8, 6, 2, 3);
  EXPECT_EQ(cut[0].context_begin, 8);  // [CLS] + 6 question tokens + [SEP]
  const std::vector<SlidingWindow> empty = SlidingWindows(long_question, {}, 32, 8, 6, 2, 3);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].context_begin, empty[0].context_end);
  EXPECT_EQ(empty[0].input_ids.size(), 9u);  // [CLS] q [SEP] [SEP]
}

// A window of `n` positions with every logit at `base`, and some set.
struct Logits {
  std::vector<float> start, end;
  Logits(size_t n, float base) : start(n, base), end(n, base) {}
};

QaWindow Window(const Logits& l, int32_t begin, int32_t end, int32_t offset = 0) {
  return {.start_logits = l.start,
          .end_logits = l.end,
          .context_begin = begin,
          .context_end = end,
          .context_offset = offset};
}

TEST(QaDecoding, TheBestSpanInsideTheContextWins) {
  // [CLS] q q [SEP] c c c c [SEP]: the context is positions 4..7.
  Logits l(9, 0);
  l.start[5] = 3;
  l.end[6] = 4;
  const std::vector<QaWindow> w = {Window(l, 4, 8)};
  std::vector<QaSpan> best = DecodeQaSpans(w, {});
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].window, 0);
  EXPECT_EQ(best[0].start, 5);
  EXPECT_EQ(best[0].end, 6);
  EXPECT_EQ(best[0].context_start, 1);
  EXPECT_EQ(best[0].score, 7);
}

TEST(QaDecoding, SpansCrossingTheQuestionOrPastTheMaximumOrBackwardsAreNeverChosen) {
  Logits l(9, 0);
  l.start[1] = 10;  // in the question
  l.end[5] = 10;
  l.start[6] = 5;  // after its end
  l.start[4] = 1;
  l.end[8] = 20;  // [SEP], outside the context
  const std::vector<QaWindow> w = {Window(l, 4, 8)};
  QaDecodeOptions o;
  o.top_k = 50;
  std::vector<QaSpan> all = DecodeQaSpans(w, o);
  ASSERT_FALSE(all.empty());
  for (const QaSpan& s : all) {
    EXPECT_GE(s.start, 4);
    EXPECT_LE(s.end, 7);
    EXPECT_LE(s.start, s.end);
  }
  EXPECT_EQ(all[0].start, 4);  // 1 + 10, beating 6 -> 6 (5 + 0) and 5 -> 5 (0 + 10)
  EXPECT_EQ(all[0].end, 5);
  o.max_answer_tokens = 1;  // now 4..5 is too long
  std::vector<QaSpan> short_only = DecodeQaSpans(w, o);
  for (const QaSpan& s : short_only) EXPECT_EQ(s.start, s.end);
  EXPECT_EQ(short_only[0].start, 5);  // 0 + 10
}

// A question that fills its window leaves no context position: the answer
// is "no answer", even for a task trained without it, never an empty list.
TEST(QaDecoding, NoValidSpanAnywhereGivesTheNoAnswerCandidate) {
  Logits l(6, 1);
  const std::vector<QaWindow> w = {Window(l, 5, 5)};  // [CLS] q q q q [SEP]: no context
  QaDecodeOptions o;
  o.allow_no_answer = false;
  o.top_k = 3;
  std::vector<QaSpan> best = DecodeQaSpans(w, o);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].window, -1);
  EXPECT_DOUBLE_EQ(best[0].probability, 1.0);
  EXPECT_TRUE(DecodeQaSpans({}, o).empty());
}

TEST(QaDecoding, TiesGoToTheEarlierThenShorterSpan) {
  Logits l(8, 0);
  const std::vector<QaWindow> w = {Window(l, 2, 7)};
  QaDecodeOptions o;
  o.top_k = 3;
  std::vector<QaSpan> best = DecodeQaSpans(w, o);
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(std::pair(best[0].start, best[0].end), std::pair(2, 2));
  EXPECT_EQ(std::pair(best[1].start, best[1].end), std::pair(2, 3));
  EXPECT_EQ(std::pair(best[2].start, best[2].end), std::pair(2, 4));
}

TEST(QaDecoding, AnAnswerInTheThirdWindowIsFoundAndOverlapsCountOnce) {
  // Three windows of a 12-token context, 6 context positions each, stride 3:
  // window w holds context tokens 3w .. 3w+5 at positions 3..8.
  std::vector<Logits> logits(3, Logits(10, 0));
  logits[2].start[7] = 6;  // context token 10
  logits[2].end[8] = 6;    // context token 11
  // Context tokens 4..5 are in windows 0 and 1; both propose them.
  logits[0].start[7] = 4;  // context token 4 in window 0
  logits[0].end[8] = 4;
  logits[1].start[4] = 4.5;  // the same tokens in window 1
  logits[1].end[5] = 4;
  std::vector<QaWindow> w;
  for (int i = 0; i < 3; ++i) w.push_back(Window(logits[static_cast<size_t>(i)], 3, 9, 3 * i));
  QaDecodeOptions o;
  o.top_k = 20;
  std::vector<QaSpan> best = DecodeQaSpans(w, o);
  ASSERT_GE(best.size(), 2u);
  EXPECT_EQ(best[0].window, 2);
  EXPECT_EQ(best[0].context_start, 10);
  EXPECT_EQ(best[0].context_end, 11);
  int seen = 0;
  for (const QaSpan& s : best) {
    if (s.context_start == 4 && s.context_end == 5) {
      ++seen;
      EXPECT_EQ(s.window, 1);  // its better score (8.5 against 8)
      EXPECT_EQ(s.score, 8.5);
    }
  }
  EXPECT_EQ(seen, 1);
  double total = 0;
  for (const QaSpan& s : best) total += s.probability;
  EXPECT_NEAR(total, 1.0, 1e-9);  // the n-best list, all of it returned here
}

TEST(QaDecoding, NoAnswerCompetesOnlyWhenAllowed) {
  Logits l(6, 0);
  l.start[0] = 5;  // [CLS]
  l.end[0] = 5;
  l.start[3] = 2;
  l.end[4] = 2;
  const std::vector<QaWindow> w = {Window(l, 2, 6)};
  std::vector<QaSpan> without = DecodeQaSpans(w, {});
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0].window, 0);
  QaDecodeOptions o;
  o.allow_no_answer = true;
  o.top_k = 2;
  std::vector<QaSpan> with = DecodeQaSpans(w, o);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ(with[0].window, -1);
  EXPECT_EQ(with[0].score, 10);
  EXPECT_GT(with[0].probability, with[1].probability);
  EXPECT_TRUE(DecodeQaSpans(std::vector<QaWindow>{}, o).empty());
}

}  // namespace
}  // namespace adapterd::model
