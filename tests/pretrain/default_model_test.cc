// The committed default encoder (models/adapterd-mini-en, pretrained on a
// lent GPU: MODEL_CARD.md): it loads through the serving loader, its
// vocabulary reads the held-out English sample without [UNK] for ASCII
// words, and it predicts masked tokens of that sample far better than a
// unigram-frequency baseline, i.e. it is really pretrained.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "tools/pretrain/mlm.h"
#include "tools/pretrain/pretrainer.h"

namespace adapterd::pretrain {
namespace {

std::string ModelDir() {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/models/adapterd-mini-en";
}

std::vector<std::string> Sample() {
  std::ifstream in(ModelDir() + "/heldout_sample.txt");
  std::vector<std::string> docs;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) docs.push_back(line);
  }
  return docs;
}

bool IsAscii(const std::string& s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

TEST(DefaultModelTest, LoadsAsTheDocumentedMiniEncoder) {
  auto m = model::LoadBertModel(ModelDir(), {.max_seq_len = 128});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.num_hidden_layers, 4);
  EXPECT_EQ(m->config.hidden_size, 256);
  EXPECT_EQ(m->config.num_attention_heads, 4);
  EXPECT_EQ(m->config.intermediate_size, 1024);
  EXPECT_EQ(m->config.vocab_size, 8192);
  auto file = model::SafetensorsFile::Open(ModelDir() + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const model::TensorView* emb = file->Find("bert.embeddings.word_embeddings.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, model::DType::kF16) << "committed in fp16";
}

TEST(DefaultModelTest, VocabularyReadsHeldOutEnglishWithoutUnk) {
  auto m = model::LoadBertModel(ModelDir(), {.max_seq_len = 128});
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<std::string> docs = Sample();
  ASSERT_GE(docs.size(), 200u);
  int64_t ascii_words = 0;
  for (const std::string& doc : docs) {
    for (const std::string& word : model::BasicTokenize(doc, /*do_lower_case=*/true)) {
      if (!IsAscii(word)) continue;
      ++ascii_words;
      const std::vector<std::string> pieces = m->tokenizer->Tokenize(word);
      ASSERT_FALSE(pieces.empty()) << word;
      EXPECT_NE(pieces.front(), "[UNK]") << "'" << word << "' in: " << doc;
    }
  }
  EXPECT_GT(ascii_words, 5000);
}

TEST(DefaultModelTest, MaskedTokenAccuracyClearlyBeatsUnigramBaseline) {
  auto m = model::LoadBertModel(ModelDir(), {.max_seq_len = 128});
  ASSERT_TRUE(m.ok()) << m.status();
  auto file = model::SafetensorsFile::Open(ModelDir() + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  auto head = MlmHead::FromSafetensors(*file, m->config, c10::Device(c10::kCPU));
  ASSERT_TRUE(head.ok()) << head.status();
  const PackedCorpus corpus = PackDocuments(Sample(), *m->tokenizer, 128);
  MaskingSpec masking;
  masking.mask_id = m->tokenizer->mask_id();
  masking.vocab_size = m->config.vocab_size;
  auto e = EvaluateMlm(*m->encoder, *head, corpus, masking, /*seed=*/1234, 0, 32);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_GT(e->num_masked, 2000);
  // The unigram baseline (always the sample's most frequent masked token)
  // scores 0.051 here, the model 0.589 (MODEL_CARD.md: 0.585 on the whole
  // held-out 1%; about 3,250 masked tokens here, so a standard error near
  // 0.009). The margin a random or unigram-only model cannot pass: at least
  // 0.25 absolute above the baseline and at least 5x it; and the committed
  // model must keep its quality: 0.55, which the CPU-pretrained encoder it
  // replaced (0.453 here) does not reach.
  EXPECT_GT(e->accuracy, e->unigram_accuracy + 0.25)
      << "accuracy " << e->accuracy << " unigram " << e->unigram_accuracy;
  EXPECT_GT(e->accuracy, 5.0 * e->unigram_accuracy);
  EXPECT_GE(e->accuracy, 0.55) << "below the default model's documented quality";
}

}  // namespace
}  // namespace adapterd::pretrain
