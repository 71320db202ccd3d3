// The token-id corpus (tools/pretrain/token_corpus.h): tokenizing on any
// number of threads gives the same ids, a written file reads back to the
// same documents and packs to the same sequences as the text, and every
// damaged or mismatched file is refused with its reason instead of feeding
// out-of-range ids to the encoder.
#include "tools/pretrain/token_corpus.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/testing/temp_dir.h"
#include "tools/pretrain/pretrainer.h"
#include "tools/pretrain/vocab_builder.h"

namespace adapterd::pretrain {
namespace {

using adapterd::testing::TempDir;

struct Fixture {
  std::vector<std::string> docs;
  std::vector<std::string> vocab;
  std::unique_ptr<model::BertTokenizer> tokenizer;
};

Fixture Make() {
  Fixture f;
  for (int i = 0; i < 300; ++i) {
    f.docs.push_back(absl::StrCat("document ", i, " tells of the river and the ", i % 7, " bridges of the old town."));
  }
  f.docs.push_back("");  // tokenizes to nothing: left out
  f.docs.push_back("zebra");
  VocabBuilder b;
  for (const std::string& d : f.docs) b.AddText(d);
  auto vocab = b.Build({.vocab_size = 200});
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  f.vocab = *vocab;
  auto tok = model::BertTokenizer::FromTokens(f.vocab, {.do_lower_case = true});
  EXPECT_TRUE(tok.ok()) << tok.status();
  f.tokenizer = std::move(*tok);
  return f;
}

void ExpectSameDocuments(const TokenizedDocuments& a, const TokenizedDocuments& b) {
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.num_unk, b.num_unk);
}

TEST(TokenCorpusTest, ThreadsDoNotChangeTheIds) {
  const Fixture f = Make();
  const TokenizedDocuments one = TokenizeDocuments(f.docs, *f.tokenizer, 1);
  EXPECT_EQ(one.num_documents(), 301);  // the empty document is left out
  for (int threads : {2, 3, 7}) ExpectSameDocuments(TokenizeDocuments(f.docs, *f.tokenizer, threads), one);
  for (size_t d = 0; d < 300; ++d) {
    const std::vector<int32_t> ids = f.tokenizer->TokenizeToIds(f.docs[d]);
    ASSERT_EQ(std::vector<int32_t>(one.ids.begin() + one.offsets[d], one.ids.begin() + one.offsets[d + 1]), ids);
  }
}

TEST(TokenCorpusTest, FileRoundTripsAndPacksLikeTheText) {
  const Fixture f = Make();
  TempDir dir("token_corpus");
  const std::string path = dir.path() + "/train.ids";
  const TokenizedDocuments docs = TokenizeDocuments(f.docs, *f.tokenizer, 2);
  ASSERT_TRUE(WriteTokenIds(path, docs, f.vocab).ok());
  EXPECT_TRUE(IsTokenIdsFile(path));
  auto read = ReadTokenIds(path, f.vocab, f.tokenizer->unk_id());
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameDocuments(*read, docs);
  // 2 bytes an id (a vocabulary of 200), one separator per document, a header.
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 8 + 4 + 4 + 64 + 8 + 8 + 2 * (docs.ids.size() + 301));

  const PackedCorpus from_ids = PackTokenized(*read, f.tokenizer->cls_id(), f.tokenizer->sep_id(), 32);
  const PackedCorpus from_text = PackDocuments(f.docs, *f.tokenizer, 32);
  EXPECT_EQ(from_ids.sequences, from_text.sequences);
  EXPECT_EQ(from_ids.num_documents, from_text.num_documents);
  EXPECT_EQ(from_ids.num_tokens, from_text.num_tokens);
  EXPECT_EQ(from_ids.num_unk, from_text.num_unk);
}

TEST(TokenCorpusTest, LargeVocabulariesUseFourBytesAnId) {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 5; i < 70000; ++i) vocab.push_back(absl::StrCat("w", i));
  TokenizedDocuments docs;
  docs.ids = {5, 69999, 65536, 70000 - 2, 1};
  docs.offsets = {0, 3, 5};
  docs.num_unk = 1;
  TempDir dir("token_corpus");
  const std::string path = dir.path() + "/big.ids";
  ASSERT_TRUE(WriteTokenIds(path, docs, vocab).ok());
  auto read = ReadTokenIds(path, vocab, /*unk_id=*/1);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameDocuments(*read, docs);
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 96 + 4 * (5 + 2));
}

TEST(TokenCorpusTest, RefusesDamagedAndMismatchedFiles) {
  const Fixture f = Make();
  TempDir dir("token_corpus");
  const std::string good = dir.path() + "/good.ids";
  const TokenizedDocuments docs = TokenizeDocuments(f.docs, *f.tokenizer, 1);
  ASSERT_TRUE(WriteTokenIds(good, docs, f.vocab).ok());
  auto bytes = ReadFileToString(good);
  ASSERT_TRUE(bytes.ok());
  const int32_t unk = f.tokenizer->unk_id();
  auto read_bytes = [&](const std::string& name, const std::string& content) {
    const std::string path = dir.path() + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, content).ok());
    return ReadTokenIds(path, f.vocab, unk).status();
  };

  std::vector<std::string> other = f.vocab;
  other.back() = "something-else";
  EXPECT_EQ(ReadTokenIds(good, other, unk).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(read_bytes("truncated.ids", bytes->substr(0, bytes->size() - 3)).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_bytes("header.ids", bytes->substr(0, 40)).code(), absl::StatusCode::kDataLoss);
  std::string wide = *bytes;
  wide[8] = 3;  // 3 bytes an id
  EXPECT_EQ(read_bytes("width.ids", wide).code(), absl::StatusCode::kDataLoss);
  std::string out_of_range = *bytes;
  out_of_range[96] = static_cast<char>(0xFF);  // the first id becomes >= 200
  out_of_range[97] = static_cast<char>(0xFF);
  EXPECT_EQ(read_bytes("range.ids", out_of_range).code(), absl::StatusCode::kDataLoss);
  std::string moved_separator = *bytes;  // the first id becomes a separator: an empty document
  moved_separator[96] = 0;
  moved_separator[97] = 0;
  EXPECT_EQ(read_bytes("separator.ids", moved_separator).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_bytes("text.ids", "the river and the bridges\n").code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(IsTokenIdsFile(dir.path() + "/text.ids"));
  EXPECT_FALSE(IsTokenIdsFile(dir.path() + "/missing.ids"));

  TokenizedDocuments bad = docs;
  bad.ids[0] = 0;  // [PAD] inside a document would read back as a separator
  EXPECT_EQ(WriteTokenIds(dir.path() + "/bad.ids", bad, f.vocab).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace adapterd::pretrain
