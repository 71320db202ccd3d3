// Predict for every task kind through the InferenceEngine over a real
// RocksDB: each kind's result fields, a mixed batch of all five kinds
// (QA windows included) giving each row what it gets alone, requests of the
// wrong shape for the kind, and, with tasks trained here, long inputs: a QA
// answer found in the third window of its context and entities found at the
// start, the middle and past the first window of a long text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/status_matchers.h"
#include "server/model/heads.h"
#include "server/serving/inference_engine.h"
#include "server/serving/kind_serving.h"
#include "server/training/kind_rules.h"
#include "server/training/trainer.h"
#include "storage/database.h"
#include "tests/serving/serving_fixture.h"
#include "tests/training/training_fixture.h"

namespace adapterd::serving {
namespace {

using ::adapterd::serving::testing::KindAdapterBytes;
using ::adapterd::serving::testing::OpenDb;
using ::adapterd::serving::testing::Promote;
using ::adapterd::serving::testing::TempDir;
using ::adapterd::testing::StatusIs;
using model::TaskKind;
using ::testing::HasSubstr;

constexpr int64_t kForever = int64_t{3600} * 1000 * 1000;

// One task of each kind (random, far-from-identity adapters) on the serving
// fixture's encoder.
class KindServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = testing::FixtureEncoder();
    tokenizer_ = testing::FixtureTokenizer();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_OK_AND_ASSIGN(db_, OpenDb(dir_));
    for (TaskKind kind : kKinds) {
      model::AdapterConfig c;
      c.bottleneck_size = 8;
      c.kind = kind;
      if (kind == TaskKind::kSequenceClassification || kind == TaskKind::kMultiLabelClassification) {
        c.labels = testing::Labels(3);
      }
      if (kind == TaskKind::kTokenClassification) c.labels = model::BioTagSet(std::vector<std::string>{"A", "B"});
      if (kind == TaskKind::kRegression) c.target = {.mean = 5, .stddev = 2};
      if (kind == TaskKind::kExtractiveQa)
        c.qa = {.max_seq_len = 16, .doc_stride = 5, .max_question_tokens = 8, .allow_no_answer = true};
      ASSERT_OK_AND_ASSIGN(std::string bytes, KindAdapterBytes(*encoder_, c, 300 + static_cast<int>(kind)));
      ASSERT_OK(Promote(*db_, "acme", Name(kind), static_cast<int>(c.labels.size()), std::move(bytes)).status());
    }
  }

  static constexpr TaskKind kKinds[] = {TaskKind::kSequenceClassification, TaskKind::kMultiLabelClassification,
                                        TaskKind::kRegression, TaskKind::kTokenClassification, TaskKind::kExtractiveQa};
  static std::string Name(TaskKind kind) { return std::string(model::TaskKindName(kind)); }

  InferenceEngine::Options Options() {
    InferenceEngine::Options o;
    o.encoder = encoder_.get();
    o.tokenizer = tokenizer_.get();
    o.db = db_.get();
    o.max_seq_len = 32;
    o.max_queue_delay_us = 0;
    return o;
  }

  // The request each kind gets below: QA's context is 20 words (3 windows
  // of 11 context words at 16 tokens, 5 apart).
  static PredictRequest Request(TaskKind kind) {
    PredictRequest r;
    r.tenant = "acme";
    r.task_id = Name(kind);
    if (kind == TaskKind::kExtractiveQa) {
      r.texts = {testing::Text(1, 2)};
      r.text_pairs = {testing::Text(3, 20)};
      r.top_k_answers = 3;
    } else {
      r.texts = {testing::Text(2, 10)};
    }
    if (kind == TaskKind::kMultiLabelClassification) r.threshold = 0.3;
    return r;
  }

  TempDir dir_;
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
  std::unique_ptr<storage::Database> db_;
};

void ExpectSameLabels(const std::vector<model::LabelProbability>& a, const std::vector<model::LabelProbability>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].label, b[k].label);
    EXPECT_NEAR(a[k].probability, b[k].probability, 1e-5);
  }
}

void ExpectSameText(const TextPrediction& a, const TextPrediction& b) {
  ASSERT_EQ(a.probabilities.size(), b.probabilities.size());
  for (size_t k = 0; k < a.probabilities.size(); ++k) EXPECT_NEAR(a.probabilities[k], b.probabilities[k], 1e-5);
  ASSERT_EQ(a.label.has_value(), b.label.has_value());
  if (a.label) ExpectSameLabels({*a.label}, {*b.label});
  ExpectSameLabels(a.labels, b.labels);
  ASSERT_EQ(a.value.has_value(), b.value.has_value());
  if (a.value) {
    EXPECT_NEAR(*a.value, *b.value, 1e-5);
  }
  ASSERT_EQ(a.entities.size(), b.entities.size());
  for (size_t k = 0; k < a.entities.size(); ++k) {
    EXPECT_EQ(a.entities[k].label, b.entities[k].label);
    EXPECT_EQ(a.entities[k].start, b.entities[k].start);
    EXPECT_EQ(a.entities[k].end, b.entities[k].end);
    EXPECT_NEAR(a.entities[k].score, b.entities[k].score, 1e-5);
  }
  ASSERT_EQ(a.answers.size(), b.answers.size());
  for (size_t k = 0; k < a.answers.size(); ++k) {
    EXPECT_EQ(a.answers[k].text, b.answers[k].text);
    EXPECT_EQ(a.answers[k].start, b.answers[k].start);
    EXPECT_NEAR(a.answers[k].score, b.answers[k].score, 1e-5);
  }
}

void ExpectSameResult(const PredictResult& a, const PredictResult& b) {
  ASSERT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.texts.size(), b.texts.size());
  for (size_t i = 0; i < a.texts.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameText(a.texts[i], b.texts[i]);
  }
}

// The kinds' code is reached through one table per layer (the KindSpec
// rows, the heads, training's KindRules, serving's ServingKind), each
// indexed by the kind's number: every table's entry for a kind is that
// kind's, and the facts the tables share agree.
TEST(KindTablesTest, EveryLayersEntryForAKindIsThatKinds) {
  ASSERT_EQ(model::AllKindSpecs().size(), model::kNumTaskKinds);
  for (const model::KindSpec& spec : model::AllKindSpecs()) {
    SCOPED_TRACE(std::string(spec.name));
    EXPECT_EQ(training::KindRulesOf(spec.kind).kind(), spec.kind);
    EXPECT_EQ(ServingKindOf(spec.kind).kind(), spec.kind);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<model::Head> head, model::MakeHead(spec.kind, std::max(spec.min_labels, 3)));
    EXPECT_EQ(head->kind(), spec.kind);
    EXPECT_EQ(head->reads_tokens(), spec.reads_tokens);
    // The token-reading kinds' rows carry per-position targets; the pooled
    // kinds' one per row.
    const uint32_t targets = training::KindRulesOf(spec.kind).targets();
    EXPECT_EQ((targets & (training::kTagTarget | training::kSpanTarget)) != 0, spec.reads_tokens);
    // A kind with labels names them; one without has none to name.
    EXPECT_EQ(spec.label_noun.empty(), spec.min_labels == 0);
  }
  EXPECT_THAT(model::MakeHead(model::TaskKind::kTokenClassification, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot have 2 tags")));
}

TEST_F(KindServingTest, EachKindFillsItsOwnFields) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(Options()));
  ASSERT_OK_AND_ASSIGN(PredictResult classes, engine->Predict(Request(TaskKind::kSequenceClassification)));
  ASSERT_EQ(classes.texts.size(), 1u);
  const TextPrediction& best = classes.texts[0];
  ASSERT_TRUE(best.label.has_value());
  EXPECT_FLOAT_EQ(best.label->probability, *std::max_element(best.probabilities.begin(), best.probabilities.end()));
  EXPECT_TRUE(best.labels.empty() && !best.value && best.entities.empty() && best.answers.empty());

  ASSERT_OK_AND_ASSIGN(PredictResult multi, engine->Predict(Request(TaskKind::kMultiLabelClassification)));
  ASSERT_EQ(multi.texts.size(), 1u);
  const TextPrediction& m = multi.texts[0];
  EXPECT_FALSE(m.label.has_value());
  size_t over = 0;
  for (float p : m.probabilities) over += p >= 0.3f;
  EXPECT_EQ(m.labels.size(), over);  // the request's threshold
  for (size_t k = 1; k < m.labels.size(); ++k) EXPECT_GE(m.labels[k - 1].probability, m.labels[k].probability);

  ASSERT_OK_AND_ASSIGN(PredictResult reg, engine->Predict(Request(TaskKind::kRegression)));
  ASSERT_EQ(reg.texts.size(), 1u);
  EXPECT_TRUE(reg.texts[0].value.has_value());
  EXPECT_TRUE(reg.texts[0].probabilities.empty());
  EXPECT_FALSE(reg.texts[0].label.has_value());

  ASSERT_OK_AND_ASSIGN(PredictResult tags, engine->Predict(Request(TaskKind::kTokenClassification)));
  ASSERT_EQ(tags.texts.size(), 1u);
  EXPECT_FALSE(tags.texts[0].value.has_value());
  const std::string text = Request(TaskKind::kTokenClassification).texts[0];
  for (const Entity& e : tags.texts[0].entities) {
    EXPECT_TRUE(e.label == "A" || e.label == "B") << e.label;
    EXPECT_EQ(e.text, model::CodePointSubstr(text, e.start, e.end));
    EXPECT_GT(e.score, 0);
  }
  const PredictRequest qa_request = Request(TaskKind::kExtractiveQa);
  ASSERT_OK_AND_ASSIGN(PredictResult qa, engine->Predict(qa_request));
  ASSERT_EQ(qa.texts.size(), 1u);
  const std::vector<model::TextAnswer>& answers = qa.texts[0].answers;
  ASSERT_EQ(answers.size(), 3u);  // top_k_answers
  EXPECT_TRUE(qa.texts[0].entities.empty() && qa.texts[0].probabilities.empty());
  double total = 0;
  for (const model::TextAnswer& a : answers) {
    EXPECT_EQ(a.text, model::CodePointSubstr(qa_request.text_pairs[0], a.start, a.end));
    total += a.score;
  }
  EXPECT_LE(total, 1.0 + 1e-9);
  EXPECT_GE(answers[0].score, answers[1].score);
}

// Issue 31's mixed batch: one batch holds rows of all five kinds (QA's three
// windows among them) on the segments path; every result equals the one the
// request gets alone.
TEST_F(KindServingTest, AMixedBatchOfAllFiveKindsGivesEachRowItsResultAlone) {
  std::map<TaskKind, PredictResult> alone;
  {
    ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(Options()));
    for (TaskKind kind : kKinds) {
      ASSERT_OK_AND_ASSIGN(alone[kind], engine->Predict(Request(kind)));
    }
  }
  for (model::MixedStrategy strategy : {model::MixedStrategy::kSegments, model::MixedStrategy::kAuto}) {
    SCOPED_TRACE(static_cast<int>(strategy));
    testing::CountingObserver observer;
    InferenceEngine::Options o = Options();
    o.observer = &observer;
    o.strategy = strategy;
    o.max_batch_size = 7;             // 4 single rows and QA's 3 windows ...
    o.max_queue_delay_us = kForever;  // ... in one batch
    ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(std::move(o)));
    std::map<TaskKind, absl::StatusOr<PredictResult>> mixed;
    for (TaskKind kind : kKinds) mixed[kind] = absl::UnknownError("not run");
    std::vector<std::thread> threads;
    for (TaskKind kind : kKinds) threads.emplace_back([&, kind] { mixed[kind] = engine->Predict(Request(kind)); });
    for (std::thread& t : threads) t.join();
    const std::vector<BatchStats> batches = observer.batches();
    ASSERT_EQ(batches.size(), 1u);
    EXPECT_EQ(batches[0].rows, 7);
    EXPECT_EQ(batches[0].distinct_tasks, 5);
    for (TaskKind kind : kKinds) {
      SCOPED_TRACE(Name(kind));
      ASSERT_OK(mixed[kind].status());
      ExpectSameResult(*mixed[kind], alone[kind]);
    }
  }
}

// A request's rows are planned and queued a few texts at a time: with
// max_batch_size 2 and one batch in flight, at most (1 + 1) * 2 = 4 of its
// rows are queued or computing at once, so while one of its batches computes
// at most 3 wait in the batcher; a QA context of 8 windows, more than the
// window, goes alone (at most 7 waiting then). Queueing every row at once
// left 7 of the pooled kinds' 9 rows waiting, and 38 - 2 of QA's. Each text
// decodes to what it gets alone.
TEST_F(KindServingTest, ARequestsRowsAreQueuedWithinItsWindowAndEachTextDecodesAsAlone) {
  for (TaskKind kind : kKinds) {
    SCOPED_TRACE(Name(kind));
    PredictRequest many = Request(kind);
    const std::string text = many.texts[0];
    many.texts.assign(9, text);
    if (kind == TaskKind::kExtractiveQa) {
      many.text_pairs.assign(9, many.text_pairs[0]);  // 3 windows each ...
      many.text_pairs[4] = testing::Text(5, 44);      // ... and one of 8
    }
    std::vector<PredictResult> alone;
    {
      ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(Options()));
      for (size_t k = 0; k < many.texts.size(); ++k) {
        PredictRequest one = many;
        one.texts = {many.texts[k]};
        if (!many.text_pairs.empty()) one.text_pairs = {many.text_pairs[k]};
        ASSERT_OK_AND_ASSIGN(alone.emplace_back(), engine->Predict(one));
      }
    }
    InferenceEngine::Options o = Options();
    o.max_batch_size = 2;
    o.max_inflight_batches = 1;
    const InferenceEngine* engine_ptr = nullptr;
    std::atomic<int64_t> most_waiting{0};
    std::atomic<int> batches{0};
    o.before_batch_for_testing = [&] {
      ++batches;
      int64_t waiting = engine_ptr->queued_rows();
      int64_t most = most_waiting.load();
      while (waiting > most && !most_waiting.compare_exchange_weak(most, waiting)) {
      }
    };
    ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(std::move(o)));
    engine_ptr = engine.get();
    EXPECT_EQ(engine->rows_in_flight_per_request(), 4);
    ASSERT_OK_AND_ASSIGN(PredictResult result, engine->Predict(many));
    EXPECT_LE(most_waiting.load(), kind == TaskKind::kExtractiveQa ? 7 : 3);
    EXPECT_GE(batches.load(), kind == TaskKind::kExtractiveQa ? 16 : 5);
    ASSERT_EQ(result.texts.size(), many.texts.size());
    for (size_t k = 0; k < many.texts.size(); ++k) {
      SCOPED_TRACE(k);
      ExpectSameText(result.texts[k], alone[k].texts[0]);
    }
  }
}

TEST_F(KindServingTest, ARequestOfTheWrongShapeForTheKindIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(Options()));
  PredictRequest qa = Request(TaskKind::kExtractiveQa);
  qa.text_pairs.clear();
  EXPECT_THAT(engine->Predict(qa), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give each question")));
  PredictRequest tags = Request(TaskKind::kTokenClassification);
  tags.text_pairs = {"w1"};
  EXPECT_THAT(engine->Predict(tags),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("text_pairs must be empty")));
  PredictRequest multi = Request(TaskKind::kMultiLabelClassification);
  multi.threshold = 1.5;
  EXPECT_THAT(engine->Predict(multi), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threshold is 1.5")));
  qa = Request(TaskKind::kExtractiveQa);
  qa.top_k_answers = 21;
  EXPECT_THAT(engine->Predict(qa), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_k_answers is 21")));
}

// Admission of one Predict at N and N+1: the windows of one text (QA's
// context above needs 3) and the rows of the request, refused before any row
// is queued, naming the flag.
TEST_F(KindServingTest, WindowsPerTextAndRowsPerRequestAreBoundedAtNAndNPlusOne) {
  auto engine_with = [&](int windows, int64_t rows) {
    InferenceEngine::Options o = Options();
    o.max_windows_per_text = windows;
    o.max_rows_per_request = rows;
    return InferenceEngine::Create(o);
  };
  PredictRequest qa = Request(TaskKind::kExtractiveQa);
  {
    ASSERT_OK_AND_ASSIGN(auto engine, engine_with(3, 3));
    ASSERT_OK(engine->Predict(qa).status());
  }
  {
    ASSERT_OK_AND_ASSIGN(auto engine, engine_with(2, 100));
    EXPECT_THAT(engine->Predict(qa),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs more than 2 windows of 16 tokens")));
  }
  qa.texts.push_back(qa.texts[0]);
  qa.text_pairs.push_back(qa.text_pairs[0]);  // 2 texts, 6 rows
  {
    ASSERT_OK_AND_ASSIGN(auto engine, engine_with(3, 6));
    ASSERT_OK(engine->Predict(qa).status());
  }
  {
    ASSERT_OK_AND_ASSIGN(auto engine, engine_with(3, 5));
    EXPECT_THAT(engine->Predict(qa),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 5 rows (texts and their windows)")));
    // A sentence kind: one row a text.
    PredictRequest many = Request(TaskKind::kSequenceClassification);
    many.texts.assign(5, many.texts[0]);
    ASSERT_OK(engine->Predict(many).status());
    many.texts.push_back(many.texts[0]);
    EXPECT_THAT(engine->Predict(many),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_rows_per_predict (5)")));
  }
}

// A token classification task cuts long texts at the window it trained with
// (recorded in its adapter file), not at the server's --max_seq_len: the
// windows Predict runs are the ones training and validation ran.
TEST_F(KindServingTest, TaggingWindowsAreTheTasksTrainedWindowWithinTheServersLimit) {
  model::AdapterConfig c;
  c.bottleneck_size = 8;
  c.kind = TaskKind::kTokenClassification;
  c.labels = model::BioTagSet(std::vector<std::string>{"A", "B"});
  c.tagging_max_seq_len = 8;
  ASSERT_OK_AND_ASSIGN(std::string bytes, KindAdapterBytes(*encoder_, c, 404));
  ASSERT_OK(Promote(*db_, "acme", "tagging-8", static_cast<int>(c.labels.size()), std::move(bytes)).status());
  PredictRequest r = Request(TaskKind::kTokenClassification);
  r.task_id = "tagging-8";
  r.texts = {testing::Text(2, 20)};
  auto engine_at = [&](int32_t max_seq_len, int windows) {
    InferenceEngine::Options o = Options();
    o.max_seq_len = max_seq_len;
    o.max_windows_per_text = windows;
    return InferenceEngine::Create(o);
  };
  {
    // The server allows 32 tokens a row; the task's windows are 8.
    ASSERT_OK_AND_ASSIGN(auto engine, engine_at(32, 1));
    EXPECT_THAT(engine->Predict(r),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 1 windows of 8 tokens")));
  }
  ASSERT_OK_AND_ASSIGN(auto wide, engine_at(32, 64));
  ASSERT_OK_AND_ASSIGN(auto narrow, engine_at(8, 64));
  ASSERT_OK_AND_ASSIGN(PredictResult a, wide->Predict(r));
  ASSERT_OK_AND_ASSIGN(PredictResult b, narrow->Predict(r));
  ASSERT_EQ(a.texts.size(), 1u);
  ExpectSameResult(a, b);
  // Below the task's window, the server's limit wins.
  ASSERT_OK_AND_ASSIGN(auto tighter, engine_at(6, 1));
  EXPECT_THAT(tighter->Predict(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 1 windows of 6 tokens")));
}

// Tasks trained here (the training fixture's encoder), served on long
// inputs.
class TrainedKindServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = training::testing::FixtureEncoder();
    tokenizer_ = training::testing::FixtureTokenizer();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_OK_AND_ASSIGN(db_, OpenDb(dir_));
  }
  absl::Status TrainAndPromote(const std::string& task, const training::TrainingData& data, int epochs) {
    training::Hyperparameters hp;
    hp.learning_rate = 5e-3;
    hp.epochs = epochs;
    hp.batch_size = 16;
    hp.bottleneck_size = 16;
    hp.max_seq_len = 16;
    hp.seed = 3;
    ASSIGN_OR_RETURN(training::TrainingResult r, training::Train(*encoder_, *tokenizer_, data, hp));
    ASSIGN_OR_RETURN(std::string bytes, model::SerializeAdapterSet(*r.best, encoder_->fingerprint()));
    return Promote(*db_, "acme", task, static_cast<int>(data.labels.size()), std::move(bytes)).status();
  }
  absl::StatusOr<std::unique_ptr<InferenceEngine>> Engine() {
    InferenceEngine::Options o;
    o.encoder = encoder_.get();
    o.tokenizer = tokenizer_.get();
    o.db = db_.get();
    o.max_seq_len = 16;  // what the tasks trained on
    o.max_queue_delay_us = 0;
    return InferenceEngine::Create(std::move(o));
  }
  TempDir dir_;
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
  std::unique_ptr<storage::Database> db_;
};

std::string Filler(std::mt19937_64& rng) { return absl::StrCat("w", 20 + rng() % 40); }

TEST_F(TrainedKindServingTest, QaFindsTheAnswerInTheThirdWindowAndTokenTaggingTagsEveryWindow) {
  std::mt19937_64 rng(11);
  // QA: the answer is the one word of w5-w9 in the context.
  training::TrainingData qa;
  qa.kind = TaskKind::kExtractiveQa;
  for (int i = 0; i < 240; ++i) {
    std::vector<std::string> words;
    const int n = 6 + static_cast<int>(rng() % 20);
    for (int j = 0; j < n; ++j) words.push_back(Filler(rng));
    const int at = static_cast<int>(rng() % static_cast<uint64_t>(n));
    words[static_cast<size_t>(at)] = absl::StrCat("w", 5 + rng() % 5);
    training::Example e{"w1 w2", absl::StrJoin(words, " "), ""};
    const std::string before = absl::StrJoin(words.begin(), words.begin() + at, " ");
    e.answers.push_back({words[static_cast<size_t>(at)], static_cast<int32_t>(before.size() + (at > 0 ? 1 : 0))});
    qa.train.push_back(std::move(e));
  }
  ASSERT_OK(TrainAndPromote("qa", qa, 8));
  // Entity A is w1.
  training::TrainingData ner;
  ner.kind = TaskKind::kTokenClassification;
  ner.labels = {"O", "B-A", "I-A"};
  for (int i = 0; i < 240; ++i) {
    training::Example e;
    const int n = 6 + static_cast<int>(rng() % 14);
    for (int j = 0; j < n; ++j) {
      const bool entity = rng() % 6 == 0;
      e.tokens.push_back(entity ? "w1" : Filler(rng));
      e.tags.push_back(entity ? "B-A" : "O");
    }
    ner.train.push_back(std::move(e));
  }
  ASSERT_OK(TrainAndPromote("ner", ner, 20));

  ASSERT_OK_AND_ASSIGN(auto engine, Engine());
  // A 30-word context, 11 words per window starting 5 apart (0, 5, 10, 15,
  // 19): word 17 is in the third and fourth windows only.
  std::vector<std::string> context;
  for (int j = 0; j < 30; ++j) context.push_back(Filler(rng));
  context[17] = "w7";
  PredictRequest q{.tenant = "acme", .task_id = "qa", .texts = {"w1 w2"}, .text_pairs = {absl::StrJoin(context, " ")}};
  ASSERT_OK_AND_ASSIGN(PredictResult answer, engine->Predict(q));
  ASSERT_EQ(answer.texts.size(), 1u);
  const std::vector<model::TextAnswer>& found = answer.texts[0].answers;
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].text, "w7");
  EXPECT_EQ(found[0].text, model::CodePointSubstr(q.text_pairs[0], found[0].start, found[0].end));

  // 40 words (windows of 14, 7 apart): w1 at the start, the middle and the
  // end.
  std::vector<std::string> words;
  for (int j = 0; j < 40; ++j) words.push_back(Filler(rng));
  for (int at : {0, 20, 39}) words[static_cast<size_t>(at)] = "w1";
  PredictRequest t{.tenant = "acme", .task_id = "ner", .texts = {absl::StrJoin(words, " ")}};
  ASSERT_OK_AND_ASSIGN(PredictResult tagged, engine->Predict(t));
  ASSERT_EQ(tagged.texts.size(), 1u);
  std::vector<int32_t> starts;
  for (const Entity& e : tagged.texts[0].entities) {
    EXPECT_EQ(e.label, "A");
    EXPECT_EQ(e.text, "w1");
    starts.push_back(e.start);
  }
  const std::string& text = t.texts[0];
  std::vector<int32_t> want;
  for (size_t pos = text.find("w1"); pos != std::string::npos; pos = text.find("w1", pos + 1)) {
    if ((pos + 2 == text.size() || text[pos + 2] == ' ') && (pos == 0 || text[pos - 1] == ' ')) {
      want.push_back(static_cast<int32_t>(pos));  // ASCII: bytes are code points
    }
  }
  EXPECT_EQ(starts, want);
  EXPECT_EQ(want.size(), 3u);
}

}  // namespace
}  // namespace adapterd::serving
