// Pretraining smoke tests (tools/pretrain/pretrainer.h): a tiny BERT
// pretrained for 30 steps on a tiny corpus learns (held-out MLM loss falls),
// a run interrupted at step 15 and resumed from its checkpoint ends
// bit-identical to an uninterrupted one, and the exported directory loads
// through the serving model loader with the same outputs and starts a new
// run through init_from; the dropout option applies to pretraining only; a
// timed cycle ends at its budget with its rate decayed; gradient clipping
// matches LibTorch's.
#include "tools/pretrain/pretrainer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>

#include <random>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/testing/temp_dir.h"
#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "tools/pretrain/vocab_builder.h"

namespace adapterd::pretrain {
namespace {

using adapterd::testing::TempDir;

// Documents with learnable regularities: fixed phrases around a varying
// subject, so that a masked function word is predictable from its context.
std::vector<std::string> Corpus(int n, uint64_t seed) {
  const std::vector<std::string> subjects = {"the cat",     "a dog",    "the bird",  "my friend",
                                             "the teacher", "a farmer", "the pilot", "our neighbour"};
  const std::vector<std::string> places = {"garden", "kitchen", "station", "market", "library", "river"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    const std::string& s = subjects[rng() % subjects.size()];
    const std::string& p = places[rng() % places.size()];
    docs.push_back(s + " walked to the " + p + " and sat down. then " + s + " went back home from the " + p + ".");
  }
  return docs;
}

struct Fixture {
  model::BertConfig config;
  std::vector<std::string> vocab;
  std::vector<std::string> docs;
};

Fixture Make() {
  Fixture f;
  f.docs = Corpus(200, 1);
  VocabBuilder b;
  for (const std::string& d : f.docs) b.AddText(d);
  auto vocab = b.Build({.vocab_size = 260});
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  f.vocab = *vocab;
  f.config.vocab_size = static_cast<int64_t>(f.vocab.size());
  f.config.hidden_size = 32;
  f.config.num_hidden_layers = 2;
  f.config.num_attention_heads = 2;
  f.config.intermediate_size = 64;
  f.config.max_position_embeddings = 64;
  return f;
}

PretrainOptions Options(int64_t steps) {
  PretrainOptions o;
  o.max_steps = steps;
  o.batch_size = 8;
  o.seq_len = 32;
  o.learning_rate = 3e-3;
  o.warmup_fraction = 0.1;
  o.checkpoint_every_steps = 10;
  o.seed = 11;
  return o;
}

std::unique_ptr<Pretrainer> Create(const Fixture& f, const PretrainOptions& o, const std::string& dir) {
  auto p = Pretrainer::Create(f.config, f.vocab, o, dir);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

double HeldOutLoss(const Pretrainer& p, const PackedCorpus& held) {
  MaskingSpec m;
  m.mask_id = p.tokenizer().mask_id();
  m.vocab_size = p.encoder().config().vocab_size;
  auto e = EvaluateMlm(p.encoder(), p.head(), held, m, /*seed=*/99, 0, 16);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? e->loss : 0.0;
}

TEST(PackDocumentsTest, PacksWithSeparatorsAndSplitsLongDocuments) {
  const Fixture f = Make();
  auto tok = model::BertTokenizer::FromTokens(f.vocab, {.do_lower_case = true, .max_seq_len = 512});
  ASSERT_TRUE(tok.ok());
  const PackedCorpus c = PackDocuments(f.docs, **tok, 32);
  EXPECT_EQ(c.num_documents, 200);
  EXPECT_EQ(c.num_unk, 0);
  int64_t tokens = 0, seps = 0;
  for (const auto& s : c.sequences) {
    ASSERT_LE(s.size(), 32u);
    ASSERT_GE(s.size(), 2u);
    EXPECT_EQ(s.front(), (*tok)->cls_id());
    EXPECT_EQ(s.back(), (*tok)->sep_id());
    tokens += static_cast<int64_t>(s.size());
    seps += std::count(s.begin(), s.end(), (*tok)->sep_id());
  }
  EXPECT_EQ(tokens, c.num_tokens);
  // Every document's pieces are kept: the total is pieces + one [CLS] per
  // sequence + one [SEP] per (part of a) document in a sequence.
  int64_t pieces = 0;
  for (const std::string& d : f.docs) pieces += static_cast<int64_t>((*tok)->TokenizeToIds(d).size());
  EXPECT_EQ(tokens, pieces + static_cast<int64_t>(c.sequences.size()) + seps);
}

TEST(PretrainerTest, ThirtyStepsLowerHeldOutLoss) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  std::unique_ptr<Pretrainer> p = Create(f, Options(30), dir.path());
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->resumed());
  const PackedCorpus train = PackDocuments(f.docs, p->tokenizer(), 32);
  const PackedCorpus held = PackDocuments(Corpus(40, 2), p->tokenizer(), 32);
  const double before = HeldOutLoss(*p, held);
  std::vector<StepReport> reports;
  ASSERT_TRUE(p->Train(train, 5, [&](const StepReport& r) { reports.push_back(r); }).ok());
  const double after = HeldOutLoss(*p, held);
  EXPECT_EQ(p->step(), 30);
  // Untrained, the loss is about log(vocab) = 5.6; 30 steps must take off
  // at least a quarter of it (it reaches about 3 in practice).
  EXPECT_NEAR(before, std::log(static_cast<double>(f.vocab.size())), 0.5);
  EXPECT_LT(after, 0.75 * before) << "before " << before << " after " << after;
  ASSERT_EQ(reports.size(), 6u);
  EXPECT_EQ(reports.back().step, 30);
  EXPECT_GT(reports.back().accuracy, 0.0);
  EXPECT_NEAR(reports.back().learning_rate, 3e-3 / 27.0, 1e-12);  // linear decay's last step
}

TEST(PretrainerTest, ResumedRunIsBitIdenticalToAnUninterruptedOne) {
  const Fixture f = Make();
  TempDir straight("pretrain_a"), resumed("pretrain_b");
  std::vector<at::Tensor> expected;
  {
    std::unique_ptr<Pretrainer> p = Create(f, Options(30), straight.path());
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 10, nullptr).ok());
    for (const at::Tensor& t : p->Parameters()) expected.push_back(t.detach().clone());
  }
  {
    std::unique_ptr<Pretrainer> p = Create(f, Options(30), resumed.path());
    ASSERT_NE(p, nullptr);
    int64_t checks = 0;
    // Interrupted after 15 steps (the stop callback runs before each step);
    // Train checkpoints on the way out.
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 10, nullptr, [&] { return checks++ == 15; }).ok());
    ASSERT_EQ(p->step(), 15);
  }
  // A fresh process would re-read the checkpoint and its RNG state; perturb
  // the global generator to prove it is restored, not inherited.
  at::manual_seed(12345);
  std::unique_ptr<Pretrainer> p = Create(f, Options(30), resumed.path());
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->resumed());
  EXPECT_EQ(p->step(), 15);
  ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 10, nullptr).ok());
  EXPECT_EQ(p->step(), 30);
  const std::vector<at::Tensor> got = p->Parameters();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(at::equal(got[i], expected[i])) << "parameter " << i << " differs after resume";
  }
}

TEST(PretrainerTest, NewCycleContinuesAFinishedRunWithAFreshSchedule) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  PretrainOptions first = Options(10);
  first.new_cycle = true;
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, first, dir.path()).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "a new cycle needs a checkpoint";
  std::vector<at::Tensor> after_first;
  {
    std::unique_ptr<Pretrainer> p = Create(f, Options(10), dir.path());
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 10, nullptr).ok());
    for (const at::Tensor& t : p->Parameters()) after_first.push_back(t.detach().clone());
  }
  PretrainOptions more = Options(6);
  more.new_cycle = true;
  std::unique_ptr<Pretrainer> p = Create(f, more, dir.path());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->step(), 10);
  EXPECT_EQ(p->total_steps(), 16);
  EXPECT_TRUE(at::equal(p->Parameters()[0], after_first[0])) << "the cycle starts from the checkpoint";
  std::vector<StepReport> reports;
  ASSERT_TRUE(
      p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 1, [&](const StepReport& r) { reports.push_back(r); }).ok());
  EXPECT_EQ(p->step(), 16);
  ASSERT_EQ(reports.size(), 6u);
  // The cycle's own schedule: no warmup step (10% of 6), then linear decay
  // over its 6 steps, from the peak.
  EXPECT_NEAR(reports.front().learning_rate, 3e-3, 1e-12);
  EXPECT_NEAR(reports.back().learning_rate, 3e-3 / 6.0, 1e-12);
  EXPECT_FALSE(at::equal(p->Parameters()[0], after_first[0]));
}

// init_from starts a new run from an exported model (the committed default
// model has no checkpoint): step 0 with the export's exact weights (f32) or
// their f16 rounding, a fresh schedule, and a checkpoint that later resumes
// without init_from and remembers where the run began. An export of another
// config or vocabulary is refused.
TEST(PretrainerTest, InitFromStartsANewRunFromAnExportedModel) {
  Fixture f = Make();
  TempDir dir("pretrain");
  std::vector<at::Tensor> exported;
  {
    std::unique_ptr<Pretrainer> p = Create(f, Options(5), dir.Sub("first"));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 5, nullptr).ok());
    ASSERT_TRUE(p->ExportHf(dir.Sub("hf32"), model::DType::kF32).ok());
    ASSERT_TRUE(p->ExportHf(dir.Sub("hf16"), model::DType::kF16).ok());
    for (const at::Tensor& t : p->Parameters()) exported.push_back(t.detach().clone());
  }
  PretrainOptions o = Options(4);
  o.init_from = dir.Sub("hf32");
  {
    std::unique_ptr<Pretrainer> p = Create(f, o, dir.Sub("second"));
    ASSERT_NE(p, nullptr);
    EXPECT_FALSE(p->resumed());
    EXPECT_EQ(p->step(), 0);
    EXPECT_EQ(p->total_steps(), 4);
    EXPECT_EQ(p->init_from(), o.init_from);
    const std::vector<at::Tensor> got = p->Parameters();
    ASSERT_EQ(got.size(), exported.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(at::equal(got[i], exported[i])) << "parameter " << i << " is not the export's";
    }
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 4, nullptr).ok());
    EXPECT_FALSE(at::equal(p->Parameters()[0], exported[0])) << "the run trains the loaded weights";
  }
  // The checkpoint now wins: resumed without init_from, it still names it.
  std::unique_ptr<Pretrainer> resumed = Create(f, Options(4), dir.Sub("second"));
  ASSERT_NE(resumed, nullptr);
  EXPECT_TRUE(resumed->resumed());
  EXPECT_EQ(resumed->step(), 4);
  EXPECT_EQ(resumed->init_from(), o.init_from);

  PretrainOptions half = Options(4);
  half.init_from = dir.Sub("hf16");
  std::unique_ptr<Pretrainer> from16 = Create(f, half, dir.Sub("third"));
  ASSERT_NE(from16, nullptr);
  const std::vector<at::Tensor> got16 = from16->Parameters();
  ASSERT_EQ(got16.size(), exported.size());
  for (size_t i = 0; i < got16.size(); ++i) {
    EXPECT_EQ(got16[i].scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(got16[i], exported[i].to(at::kHalf).to(at::kFloat))) << "parameter " << i;
  }

  std::vector<std::string> other_vocab = f.vocab;
  std::swap(other_vocab[10], other_vocab[11]);
  EXPECT_EQ(Pretrainer::Create(f.config, other_vocab, o, dir.Sub("fourth")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  f.config.num_hidden_layers = 3;
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.Sub("fifth")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.init_from = dir.Sub("missing");
  f.config.num_hidden_layers = 2;
  EXPECT_FALSE(Pretrainer::Create(f.config, f.vocab, o, dir.Sub("sixth")).ok());
}

TEST(PretrainerTest, CheckpointOfAnotherConfigIsRefused) {
  Fixture f = Make();
  TempDir dir("pretrain");
  {
    std::unique_ptr<Pretrainer> p = Create(f, Options(2), dir.path());
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 1, nullptr).ok());
  }
  f.config.num_hidden_layers = 3;
  auto p = Pretrainer::Create(f.config, f.vocab, Options(2), dir.path());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
}

TEST(PretrainerTest, InvalidOptionsAreRejected) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  PretrainOptions o = Options(0);  // no budget
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(5);
  o.dropout = 1.0;
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(5);
  o.autocast = "fp8";
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> shuffled = f.vocab;
  std::swap(shuffled[0], shuffled[10]);  // specials no longer first
  EXPECT_EQ(Pretrainer::Create(f.config, shuffled, Options(5), dir.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PretrainerTest, ExportLoadsThroughTheModelLoaderWithTheSameOutputs) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  std::unique_ptr<Pretrainer> p = Create(f, Options(5), dir.path());
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 5, nullptr).ok());
  const std::string out = dir.Sub("hf");
  ASSERT_TRUE(p->ExportHf(out, model::DType::kF32).ok());

  auto loaded = model::LoadBertModel(out, {.max_seq_len = 32});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config, f.config);
  auto file = model::SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_NE(file->Find("cls.predictions.bias"), nullptr);
  EXPECT_NE(file->Find("bert.embeddings.word_embeddings.weight"), nullptr) << "HF BertForMaskedLM naming";
  EXPECT_EQ(file->Find("bert.pooler.dense.weight"), nullptr) << "no pooler was trained";
  ASSERT_TRUE(MlmHead::FromSafetensors(*file, f.config, c10::Device(c10::kCPU)).ok());

  const std::vector<int32_t> ids = loaded->tokenizer->TokenizeToIds("the cat walked to the river");
  EXPECT_EQ(ids, p->tokenizer().TokenizeToIds("the cat walked to the river"));
  at::Tensor input = at::empty({1, static_cast<int64_t>(ids.size())}, at::kLong);
  for (size_t i = 0; i < ids.size(); ++i) input[0][static_cast<int64_t>(i)] = ids[i];
  const model::EncoderInput in{input, at::Tensor(), at::ones_like(input)};
  auto a = p->encoder().Forward(in);
  auto b = loaded->encoder->Forward(in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(at::allclose(a->last_hidden_state, b->last_hidden_state, 1e-5, 1e-6));
}

// options.dropout replaces the config's rates while pretraining only: with 0
// two training-mode passes agree, with the config's 0.1 they differ, and the
// checkpoint and the export keep the config's 0.1 for fine-tuning.
TEST(PretrainerTest, DropoutOptionOverridesTrainingDropoutButNotTheSavedConfig) {
  const Fixture f = Make();
  ASSERT_DOUBLE_EQ(f.config.hidden_dropout_prob, 0.1);
  auto two_train_passes_differ = [&](const Pretrainer& p) {
    const std::vector<int32_t> ids = p.tokenizer().TokenizeToIds("the cat walked to the river");
    at::Tensor input = at::empty({1, static_cast<int64_t>(ids.size())}, at::kLong);
    for (size_t i = 0; i < ids.size(); ++i) input[0][static_cast<int64_t>(i)] = ids[i];
    const model::EncoderInput in{input, at::Tensor(), at::ones_like(input)};
    auto a = p.encoder().Forward(in, {.train = true});
    auto b = p.encoder().Forward(in, {.train = true});
    EXPECT_TRUE(a.ok() && b.ok());
    return !at::equal(a->last_hidden_state, b->last_hidden_state);
  };
  TempDir dir("pretrain");
  PretrainOptions o = Options(3);
  o.dropout = 0;
  std::unique_ptr<Pretrainer> off = Create(f, o, dir.Sub("off"));
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(two_train_passes_differ(*off));
  std::unique_ptr<Pretrainer> on = Create(f, Options(3), dir.Sub("on"));  // dropout -1: the config's
  ASSERT_NE(on, nullptr);
  EXPECT_TRUE(two_train_passes_differ(*on));

  ASSERT_TRUE(off->Train(PackDocuments(f.docs, off->tokenizer(), 32), 5, nullptr).ok());
  const std::string out = dir.Sub("hf");
  ASSERT_TRUE(off->ExportHf(out, model::DType::kF32).ok());
  auto loaded = model::LoadBertModel(out, {.max_seq_len = 32});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config, f.config) << "the exported config keeps dropout 0.1";
  // The checkpoint was saved with the config's rates, so a run with the
  // default dropout resumes it (a changed config would be refused).
  PretrainOptions resume = Options(3);
  resume.new_cycle = true;
  std::unique_ptr<Pretrainer> resumed = Create(f, resume, dir.Sub("off"));
  ASSERT_NE(resumed, nullptr);
  EXPECT_TRUE(resumed->resumed());
  EXPECT_EQ(resumed->step(), 3);
}

TEST(PretrainerTest, TimedScheduleEndsAtItsBudgetWithTheRateDecayedAndResumesWithIt) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  PretrainOptions o = Options(0);
  o.max_minutes = 0.02;  // 1.2 s
  o.lr_schedule = "time";
  o.checkpoint_every_steps = 0;
  std::vector<StepReport> reports;
  {
    std::unique_ptr<Pretrainer> p = Create(f, o, dir.path());
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 1, [&](const StepReport& r) {
                   reports.push_back(r);
                 }).ok());
    ASSERT_GE(p->step(), 3);
    EXPECT_EQ(p->total_steps(), p->step()) << "a finished timed cycle knows its length";
  }
  ASSERT_EQ(static_cast<int64_t>(reports.size()), reports.back().step);
  EXPECT_GE(reports.back().elapsed_seconds, 1.2);
  // Up during the warmup (10% of the time), then down to about 0 at the end.
  size_t peak = 0;
  for (size_t i = 1; i < reports.size(); ++i) {
    if (reports[i].learning_rate > reports[peak].learning_rate) peak = i;
  }
  for (size_t i = peak + 1; i < reports.size(); ++i) {
    EXPECT_LE(reports[i].learning_rate, reports[i - 1].learning_rate) << "step " << reports[i].step;
  }
  EXPECT_LT(reports.back().learning_rate, 0.25 * o.learning_rate);
  EXPECT_GT(reports[peak].learning_rate, 0.5 * o.learning_rate);
  auto state = ReadFileToString(dir.path() + "/checkpoint/state.json");
  ASSERT_TRUE(state.ok());
  EXPECT_NE(state->find("\"schedule_seconds\": 1.2"), std::string::npos) << *state;

  // Resumed with another budget, the run keeps its own: it is over.
  o.max_minutes = 0.05;
  std::unique_ptr<Pretrainer> p = Create(f, o, dir.path());
  ASSERT_NE(p, nullptr);
  const int64_t steps = p->step();
  ASSERT_TRUE(p->Train(PackDocuments(f.docs, p->tokenizer(), 32), 1, nullptr).ok());
  EXPECT_EQ(p->step(), steps);
}

TEST(PretrainerTest, TimedScheduleNeedsATimeBudgetOnly) {
  const Fixture f = Make();
  TempDir dir("pretrain");
  PretrainOptions o = Options(10);
  o.lr_schedule = "time";
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_minutes = 1;
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_steps = 0;
  o.lr_schedule = "cosine";
  EXPECT_EQ(Pretrainer::Create(f.config, f.vocab, o, dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClipGradNormTest, ScalesLikeLibTorchsClipGradNorm) {
  for (double max_norm : {0.5, 100.0}) {  // clipped, and left alone
    std::vector<at::Tensor> ours, theirs;
    at::manual_seed(3);
    for (const auto& shape : std::vector<std::vector<int64_t>>{{4, 5}, {7}, {2, 3, 2}}) {
      at::Tensor p = at::randn(shape).requires_grad_(true);
      p.mutable_grad() = at::randn(shape);
      at::Tensor q = p.detach().clone().requires_grad_(true);
      q.mutable_grad() = p.grad().clone();
      ours.push_back(p);
      theirs.push_back(q);
    }
    at::Tensor no_grad = at::randn({3}).requires_grad_(true);  // a parameter without a gradient is skipped
    ours.push_back(no_grad);
    ClipGradNorm(ours, max_norm);
    torch::nn::utils::clip_grad_norm_(theirs, max_norm);
    for (size_t i = 0; i < theirs.size(); ++i) {
      EXPECT_TRUE(at::allclose(ours[i].grad(), theirs[i].grad(), 1e-6, 1e-7)) << "max_norm " << max_norm;
    }
    EXPECT_FALSE(no_grad.grad().defined());
  }
}

}  // namespace
}  // namespace adapterd::pretrain
