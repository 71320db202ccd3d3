// BERT's masking rule and the MLM head (tools/pretrain/mlm.h).
#include "tools/pretrain/mlm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "server/model/bert_config.h"

namespace adapterd::pretrain {
namespace {

constexpr int64_t kVocab = 1000;

MaskingSpec Spec() {
  MaskingSpec s;
  s.mask_id = 4;
  s.first_normal_id = 5;
  s.vocab_size = kVocab;
  return s;
}

// [rows, cols] ids: normal tokens, with [CLS] (2) first, [SEP] (3) last and
// [PAD] (0) in the last quarter of every other row.
at::Tensor Ids(int64_t rows, int64_t cols, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor ids = at::randint(5, kVocab, {rows, cols}, gen, at::kLong);
  ids.select(1, 0).fill_(2);
  ids.select(1, cols - 1).fill_(3);
  for (int64_t r = 0; r < rows; r += 2) ids[r].slice(0, cols * 3 / 4).fill_(0);
  return ids;
}

TEST(MaskTokensTest, RatesWithinTolerance) {
  // 64 x 512 positions, ~24.6k normal: selection's standard deviation is
  // sqrt(.15 * .85 / 24.6k) = 0.0023, so +-0.01 is over 4 sigma; among the
  // ~3.7k selected, the 80/10/10 split has sd <= 0.0066, so +-0.03.
  const at::Tensor ids = Ids(64, 512, 7);
  const MaskingSpec spec = Spec();
  const MaskedBatch m = MaskTokens(ids, spec, 123);
  ASSERT_TRUE(m.input_ids.sizes().equals(ids.sizes()));
  ASSERT_TRUE(m.labels.sizes().equals(ids.sizes()));

  const int64_t* in = ids.data_ptr<int64_t>();
  const int64_t* out = m.input_ids.data_ptr<int64_t>();
  const int64_t* label = m.labels.data_ptr<int64_t>();
  int64_t normal = 0, selected = 0, masked = 0, random = 0, unchanged = 0;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const bool special = in[i] < spec.first_normal_id;
    if (label[i] == kIgnoreLabel) {
      // Labels only at selected positions: everything else is untouched.
      EXPECT_EQ(out[i], in[i]) << i;
    } else {
      ASSERT_FALSE(special) << "special token selected at " << i;
      EXPECT_EQ(label[i], in[i]) << "the label is the original token";
      ++selected;
      if (out[i] == spec.mask_id)
        ++masked;
      else if (out[i] == in[i])
        ++unchanged;
      else {
        ++random;
        EXPECT_GE(out[i], spec.first_normal_id) << "a random replacement must be a normal token";
        EXPECT_LT(out[i], kVocab);
      }
    }
    if (!special) ++normal;
  }
  EXPECT_EQ(selected, m.num_selected);
  const double n = static_cast<double>(selected);
  EXPECT_NEAR(n / static_cast<double>(normal), 0.15, 0.01);
  EXPECT_NEAR(masked / n, 0.80, 0.03);
  // A random draw equal to the original (1 in 995) counts as unchanged.
  EXPECT_NEAR(random / n, 0.10, 0.03);
  EXPECT_NEAR(unchanged / n, 0.10, 0.03);
}

TEST(MaskTokensTest, SameSeedSameMasksOtherSeedOthers) {
  const at::Tensor ids = Ids(8, 128, 1);
  const MaskedBatch a = MaskTokens(ids, Spec(), 5);
  const MaskedBatch b = MaskTokens(ids, Spec(), 5);
  const MaskedBatch c = MaskTokens(ids, Spec(), 6);
  EXPECT_TRUE(at::equal(a.input_ids, b.input_ids));
  EXPECT_TRUE(at::equal(a.labels, b.labels));
  EXPECT_FALSE(at::equal(a.labels, c.labels));
  // The input is not modified.
  EXPECT_TRUE(at::equal(ids, Ids(8, 128, 1)));
}

TEST(MlmHeadTest, DecoderIsTiedToTheWordEmbeddings) {
  auto config = model::BertConfig::Preset("tiny", 50);
  ASSERT_TRUE(config.ok()) << config.status();
  const MlmHead head = MlmHead::Random(*config, 3, 0.02, c10::Device(c10::kCPU));
  EXPECT_EQ(head.Named().size(), 5u);
  at::Tensor emb = at::randn({50, config->hidden_size}).requires_grad_(true);
  const at::Tensor hidden = at::randn({7, config->hidden_size});
  const at::Tensor logits = head.Logits(hidden, emb, config->layer_norm_eps);
  ASSERT_EQ(logits.size(0), 7);
  ASSERT_EQ(logits.size(1), 50);
  logits.sum().backward();
  ASSERT_TRUE(emb.grad().defined()) << "no gradient reaches the tied embeddings";
  EXPECT_GT(emb.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace adapterd::pretrain
