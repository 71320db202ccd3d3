// Every task kind trains (task_rows.h, trainer.h): the rows each kind's
// examples become (QA and tagging windows over long inputs, run_squad's
// targets), and a synthetic task per kind learned well past what a model
// that has not learned it scores, validated by the kind's metric, on inputs
// several windows long. Plus resuming a windowed kind mid-epoch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/status_matchers.h"
#include "server/training/trainer.h"
#include "tests/model/model_test_util.h"
#include "tests/training/training_fixture.h"

namespace adapterd::training {
namespace {

using ::adapterd::model::testing::BitEqual;
using model::TaskKind;
using ::testing::ElementsAre;

std::string W(int i) { return absl::StrCat("w", i); }

// A filler word: never one of the words a task keys on (w1-w9).
int Filler(std::mt19937_64& rng) { return 20 + static_cast<int>(rng() % (testing::kWords - 20)); }

Hyperparameters KindHp(int epochs, int max_seq_len) {
  Hyperparameters hp;
  hp.learning_rate = 5e-3;
  hp.epochs = epochs;
  hp.batch_size = 16;
  hp.bottleneck_size = 16;
  hp.max_seq_len = max_seq_len;
  hp.doc_stride = 0;
  hp.seed = 3;
  return hp;
}

class KindTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = testing::FixtureEncoder();
    tokenizer_ = testing::FixtureTokenizer();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_NE(tokenizer_, nullptr);
  }
  // The tokenizer at `max_seq_len`, as the trainer makes it.
  std::unique_ptr<model::BertTokenizer> TokenizerAt(int max_seq_len) {
    model::TokenizerOptions o = tokenizer_->options();
    o.max_seq_len = max_seq_len;
    auto tok = model::BertTokenizer::FromTokens(tokenizer_->tokens(), o);
    return tok.ok() ? *std::move(tok) : nullptr;
  }
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
};

// Extractive QA: the answer is the one word of w5-w9 in the context; the
// question is "w1 w2". `at` places it (-1: anywhere).
Example QaExample(std::mt19937_64& rng, int words, int at = -1) {
  std::vector<std::string> context;
  for (int i = 0; i < words; ++i) context.push_back(W(Filler(rng)));
  const int pos = at >= 0 ? at : static_cast<int>(rng() % static_cast<uint64_t>(words));
  context[static_cast<size_t>(pos)] = W(5 + static_cast<int>(rng() % 5));
  Example e{"w1 w2", absl::StrJoin(context, " "), ""};
  int32_t start = 0;
  for (int i = 0; i < pos; ++i) start += static_cast<int32_t>(context[static_cast<size_t>(i)].size()) + 1;
  e.answers.push_back({context[static_cast<size_t>(pos)], start});
  return e;
}

TEST_F(KindTrainingTest, QaWindowsTargetTheAnswerOnlyWhereTheyHoldIt) {
  auto tok = TokenizerAt(16);
  model::AdapterConfig config;
  config.kind = TaskKind::kExtractiveQa;
  config.qa = {.max_seq_len = 16, .doc_stride = 5, .max_question_tokens = 8};
  std::mt19937_64 rng(1);
  // 30 context words, 11 per window ([CLS] 2 question [SEP] ... [SEP]),
  // windows starting at 0, 5, 10, 15 and 19 (the last a full window that
  // ends with the context): word 12 is in windows 1 and 2 only (0-based),
  // word 1 in window 0 only.
  const Example e = QaExample(rng, 30, 12);
  ASSERT_OK_AND_ASSIGN(RowSet rows, EncodeRows(config, *tok, {e, QaExample(rng, 30, 1)}, "training"));
  ASSERT_EQ(rows.examples.size(), 2u);
  ASSERT_EQ(rows.examples[0].rows.size(), 5u);
  std::vector<int64_t> starts;
  for (int32_t r : rows.examples[0].rows) {
    const Row& row = rows.rows[static_cast<size_t>(r)];
    EXPECT_EQ(row.start, row.end);  // one-word answers
    EXPECT_LE(row.input_ids.size(), 16u);
    starts.push_back(row.start);
    if (row.start > 0) {
      EXPECT_EQ(row.input_ids[static_cast<size_t>(row.start)], *tok->TokenToId(e.answers[0].text));
    }
  }
  // Positions: [CLS] w1 w2 [SEP] = 4, then the window's words.
  EXPECT_THAT(starts, ElementsAre(0, 4 + 12 - 5, 4 + 12 - 10, 0, 0));
  EXPECT_EQ(rows.examples[0].answers, std::vector<std::string>{e.answers[0].text});
  EXPECT_EQ(rows.rows[static_cast<size_t>(rows.examples[1].rows[0])].start, 4 + 1);
}

TEST_F(KindTrainingTest, TaggingWindowsScoreEachWordsFirstPieceOnce) {
  auto tok = TokenizerAt(10);
  model::AdapterConfig config;
  config.kind = TaskKind::kTokenClassification;
  config.labels = model::BioTagSet(std::vector<std::string>{"A"});
  Example e;
  for (int i = 0; i < 20; ++i) {
    e.tokens.push_back(W(i % 3 == 0 ? 1 : 30));
    e.tags.push_back(i % 3 == 0 ? "B-A" : "O");
  }
  ASSERT_OK_AND_ASSIGN(RowSet rows, EncodeRows(config, *tok, {e}, "training"));
  // 8 words per window, starting 4 apart: 0, 4, 8, 12.
  ASSERT_EQ(rows.examples[0].rows.size(), 4u);
  std::vector<int> scored(20, 0);
  for (int32_t r : rows.examples[0].rows) {
    const Row& row = rows.rows[static_cast<size_t>(r)];
    EXPECT_EQ(row.tags.front(), model::kIgnoredPosition);  // [CLS]
    EXPECT_EQ(row.tags.back(), model::kIgnoredPosition);   // [SEP]
    for (int32_t p = row.context_begin; p < row.context_end; ++p) {
      const int word = row.context_offset + p - row.context_begin;
      ++scored[static_cast<size_t>(word)];
      EXPECT_EQ(row.tags[static_cast<size_t>(p)], word % 3 == 0 ? 1 : 0) << "word " << word;
    }
  }
  for (int w = 0; w < 20; ++w) EXPECT_GE(scored[static_cast<size_t>(w)], 1) << "word " << w << " in no window";
}

TEST_F(KindTrainingTest, ExtractiveQaLearnsAndFindsAnswersPastTheFirstWindows) {
  std::mt19937_64 rng(5);
  TrainingData data;
  data.kind = TaskKind::kExtractiveQa;
  for (int i = 0; i < 240; ++i) data.train.push_back(QaExample(rng, 6 + static_cast<int>(rng() % 20)));
  // Validation: 30-word contexts whose answer lies in the third window or
  // later (words 15-29 at windows of 11 words, 5 apart).
  for (int i = 0; i < 40; ++i) data.validation.push_back(QaExample(rng, 30, 15 + i % 15));
  Hyperparameters hp = KindHp(8, 16);
  ASSERT_OK_AND_ASSIGN(TrainingResult result, Train(*encoder_, *tokenizer_, data, hp));
  EXPECT_EQ(result.best->config().kind, TaskKind::kExtractiveQa);
  EXPECT_EQ(result.best->config().qa.doc_stride, 5);  // a third of 16
  EXPECT_FALSE(result.best->config().qa.allow_no_answer);
  // A model that has not learned the rule picks one of ~30 words: F1 ~0.03.
  EXPECT_GE(result.best_epoch.validation.f1, 0.8);
  EXPECT_GE(result.best_epoch.validation.exact_match, 0.8);
  ASSERT_OK_AND_ASSIGN(Evaluation again, Evaluate(*encoder_, *tokenizer_, *result.best, data.validation, 16));
  EXPECT_DOUBLE_EQ(again.f1, result.best_epoch.validation.f1);
}

TEST_F(KindTrainingTest, TokenClassificationLearnsEntitiesAcrossWindows) {
  std::mt19937_64 rng(6);
  // Entity A is the word w1; entity B is "w2 w3". Half the examples give
  // tokens and tags, half a text and entities.
  auto make = [&](int words, bool as_tokens) {
    std::vector<std::string> tokens, tags;
    for (int i = 0; i < words; ++i) {
      const uint64_t r = rng() % 8;
      if (r == 0) {
        tokens.push_back("w1"), tags.push_back("B-A");
      } else if (r == 1 && i + 1 < words) {
        tokens.push_back("w2"), tags.push_back("B-B");
        tokens.push_back("w3"), tags.push_back("I-B");
        ++i;
      } else {
        tokens.push_back(W(Filler(rng))), tags.push_back("O");
      }
    }
    Example e;
    if (as_tokens) {
      e.tokens = tokens;
      e.tags = tags;
      return e;
    }
    e.text = absl::StrJoin(tokens, " ");
    int32_t at = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto len = static_cast<int32_t>(tokens[i].size());
      if (tags[i].starts_with("B-")) e.entities.push_back({at, at + len, tags[i].substr(2)});
      if (tags[i].starts_with("I-")) e.entities.back().end = at + len;
      at += len + 1;
    }
    return e;
  };
  TrainingData data;
  data.kind = TaskKind::kTokenClassification;
  data.labels = {"O", "B-A", "I-A", "B-B", "I-B"};
  for (int i = 0; i < 240; ++i) data.train.push_back(make(6 + static_cast<int>(rng() % 14), i % 2 == 0));
  // Validation: 40-word texts (windows of 14 words, 7 apart, at max_seq_len
  // 16), an entity at the start, the middle and the end of each.
  for (int i = 0; i < 30; ++i) {
    Example e = make(40, true);
    e.tags[0] = "B-A", e.tokens[0] = "w1";
    if (e.tags[1] == "I-B") e.tags[1] = "O", e.tokens[1] = W(30);
    e.tags[20] = "B-A", e.tokens[20] = "w1";
    if (e.tags[21] == "I-B") e.tags[21] = "O", e.tokens[21] = W(30);
    e.tags.back() = "B-A", e.tokens.back() = "w1";
    data.validation.push_back(std::move(e));
  }
  ASSERT_OK_AND_ASSIGN(TrainingResult result, Train(*encoder_, *tokenizer_, data, KindHp(20, 16)));
  EXPECT_EQ(result.best->config().labels, data.labels);
  // Tagging every word O scores F1 0; tagging w1-w3 without context could
  // not split "w2 w3" from a lone w3 (there is none here, but B/I order is
  // what conlleval checks).
  EXPECT_GE(result.best_epoch.validation.f1, 0.9);
}

TEST_F(KindTrainingTest, MultiLabelAndRegressionLearnTheirTargets) {
  std::mt19937_64 rng(7);
  TrainingData multi;
  multi.kind = TaskKind::kMultiLabelClassification;
  multi.labels = {"a", "b", "c"};
  TrainingData regression;
  regression.kind = TaskKind::kRegression;
  for (int i = 0; i < 800; ++i) {
    std::vector<std::string> words;
    Example m{"", "", ""};
    for (int k = 0; k < 3; ++k) {
      if (rng() % 2 == 0) words.push_back(W(1 + k)), m.labels.push_back(multi.labels[static_cast<size_t>(k)]);
    }
    int count = 0;
    while (words.size() < 8) {
      if (rng() % 4 == 0) {
        words.push_back("w4"), ++count;
      } else {
        words.push_back(W(Filler(rng)));
      }
    }
    std::shuffle(words.begin(), words.end(), rng);
    m.text = absl::StrJoin(words, " ");
    // The target counts w4: 10 + 2.5 per occurrence.
    const Example r{m.text, "", absl::StrCat(10 + 2.5 * count)};
    (i < 600 ? multi.train : multi.validation).push_back(m);
    (i < 600 ? regression.train : regression.validation).push_back(r);
  }
  Hyperparameters hp = KindHp(30, 16);
  hp.bottleneck_size = 32;
  ASSERT_OK_AND_ASSIGN(TrainingResult ml, Train(*encoder_, *tokenizer_, multi, hp));
  // Predicting every label scores micro F1 2/3 here (each label is on half
  // the time), none 0, and both get every label right on 1/8 of the
  // examples (measured: 0.98 and 0.95).
  EXPECT_GE(ml.best_epoch.validation.micro_f1, 0.9);
  EXPECT_GT(ml.best_epoch.validation.exact_match, 0.8);
  // Regression is learned within a few epochs (measured: Spearman 0.94 and
  // Pearson 0.93 by the fourth, 0.95 by the eighth); multi-label takes ~25.
  hp.epochs = 8;
  ASSERT_OK_AND_ASSIGN(TrainingResult reg, Train(*encoder_, *tokenizer_, regression, hp));
  const model::Standardization& s = reg.best->config().target;
  EXPECT_GT(s.mean, 10);
  EXPECT_GT(s.stddev, 1);
  EXPECT_GE(reg.best_epoch.validation.spearman, 0.8);
  EXPECT_GE(reg.best_epoch.validation.pearson, 0.8);
  EXPECT_GT(reg.best_epoch.validation.mse, 0);
}

TEST_F(KindTrainingTest, ResumingAWindowedKindReproducesTheUninterruptedRun) {
  std::mt19937_64 rng(8);
  TrainingData data;
  data.kind = TaskKind::kExtractiveQa;
  for (int i = 0; i < 60; ++i) data.train.push_back(QaExample(rng, 6 + static_cast<int>(rng() % 20)));
  Hyperparameters hp = KindHp(2, 16);
  hp.checkpoint_every_steps = 3;
  std::vector<TrainerState> checkpoints;
  TrainerHooks hooks;
  hooks.on_checkpoint = [&](const TrainerState& s) {
    checkpoints.push_back(s);
    return absl::OkStatus();
  };
  ASSERT_OK_AND_ASSIGN(TrainingResult full, Train(*encoder_, *tokenizer_, data, hp, hooks));
  ASSERT_GE(checkpoints.size(), 3u);
  const TrainerState& mid = checkpoints[checkpoints.size() / 2];
  ASSERT_OK_AND_ASSIGN(TrainingResult resumed, Train(*encoder_, *tokenizer_, data, hp, {}, &mid));
  auto nf = full.best->Named(), nr = resumed.best->Named();
  ASSERT_EQ(nf.size(), nr.size());
  for (size_t i = 0; i < nf.size(); ++i) EXPECT_TRUE(BitEqual(nf[i].second, nr[i].second)) << nf[i].first;
  EXPECT_EQ(resumed.best->config().qa, full.best->config().qa);
}

}  // namespace
}  // namespace adapterd::training
