// Tests for BertTokenizer. The table's expected ids are derived by hand from
// HuggingFace's tokenization_bert.py (BasicTokenizer + WordpieceTokenizer)
// over the small vocab below; each case's comment shows the word pieces.
#include "server/model/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Ids are the positions; the comments give the first id of each row.
const std::vector<std::string>& TestVocab() {
  // clang-format off
  static const auto* const kVocab = new std::vector<std::string>{
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",       // 0
      "the", "quick", "brown", "fox", "jump",             // 5
      "##s", "##ed", "##ing", "over", "lazy",             // 10
      "dog", "un", "##aff", "##able", "hello",            // 15
      "world", "cafe", "caf\u00e9", "naive", "Hello",     // 20
      "The", ".", ",", "!", "?",                          // 25
      "'", "-", "[", "]", "$",                            // 30
      "\u201c", "\u201d", "\u2014", "\u00bf", "\u4e2d",   // 35: “ ” — ¿ 中
      "\u56fd", "\u4eba", "a", "##a", "##b",              // 40: 国 人
      "ab", "cl", "don", "t", "4",                        // 45
      "##2", "\u03bf\u03b4\u03bf\u03c2", "\u03c3\u03b1",  // 50: οδος (final ς) σα
      "he", "##llo", "^", "`",                            // 53
  };
  // clang-format on
  return *kVocab;
}

std::unique_ptr<BertTokenizer> MakeTokenizer(bool do_lower_case = true, int max_seq_len = 32) {
  TokenizerOptions options;
  options.do_lower_case = do_lower_case;
  options.max_seq_len = max_seq_len;
  auto tokenizer = BertTokenizer::FromTokens(TestVocab(), options);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(tokenizer).value();
}

std::vector<int32_t> Concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

struct Case {
  const char* name;
  std::string text;
  std::optional<std::string> pair;
  int max_seq_len;
  bool do_lower_case;
  std::vector<int32_t> ids;
  int num_truncated = 0;
};

constexpr bool kLower = true;
constexpr bool kCased = false;

std::vector<Case> Cases() {
  const std::string a100(100, 'a');
  const std::string a101(101, 'a');
  // clang-format off
  return {
      // the quick brown fox
      {"plain words", "the quick brown fox", {}, 32, kLower, {2, 5, 6, 7, 8, 3}},
      // Lowercasing maps every word onto the vocab.
      {"uppercase lowered", "The QUICK Brown FOX", {}, 32, kLower, {2, 5, 6, 7, 8, 3}},
      // The quick Hello hello [UNK]: "HELLO" has no matching prefix at all.
      {"uppercase kept when cased", "The quick Hello hello HELLO", {}, 32, kCased,
       {2, 25, 6, 24, 19, 1, 3}},
      // caf\u00e9 -> cafe, na\u00efve -> naive (NFD, Mn dropped).
      {"accents stripped when lowercasing", "Caf\u00e9 NA\u00cfVE", {}, 32, kLower, {2, 21, 23, 3}},
      // caf\u00e9 is a vocab token; na\u00efve is not and no prefix matches.
      {"accents kept when cased", "caf\u00e9 na\u00efve", {}, 32, kCased, {2, 22, 1, 3}},
      // e + U+0301 composes to \u00e9 (HF NFC-normalises) -> caf\u00e9.
      {"decomposed accent composed when cased", "cafe\u0301", {}, 32, kCased, {2, 22, 3}},
      // CAFE + U+0301 -> cafe + U+0301 -> cafe.
      {"decomposed accent stripped when lowercasing", "CAFE\u0301", {}, 32, kLower, {2, 21, 3}},
      // \u4e2d \u56fd \u4eba, one word each.
      {"cjk split per character", "\u4e2d\u56fd\u4eba", {}, 32, kLower, {2, 39, 40, 41, 3}},
      // hello \u4e2d \u56fd world: ideographs split off adjacent Latin.
      {"cjk splits latin neighbours", "hello\u4e2d\u56fdworld", {}, 32, kLower,
       {2, 19, 39, 40, 20, 3}},
      // \u4e2d [UNK] \u4eba: only the unknown ideograph is lost.
      {"unknown cjk character alone is unk", "\u4e2d\u65e5\u4eba", {}, 32, kLower,
       {2, 39, 1, 41, 3}},
      // hello , world !
      {"ascii punctuation split", "hello, world!", {}, 32, kLower, {2, 19, 27, 20, 28, 3}},
      // \u201c hello \u201d \u2014 \u00bf world ? (Pi Pf Pd Po)
      {"unicode punctuation split", "\u201chello\u201d \u2014\u00bfworld?", {}, 32, kLower,
       {2, 35, 19, 36, 37, 38, 20, 29, 3}},
      // $ 4 ^ `: ASCII symbols count as punctuation in HF.
      {"ascii symbols split like punctuation", "$4^`", {}, 32, kLower, {2, 34, 49, 55, 56, 3}},
      // hello\u00a9 stays one word (So is not punctuation); "##\u00a9" is unknown.
      {"non-punctuation symbol stays in word", "hello\u00a9", {}, 32, kLower, {2, 1, 3}},
      // hello\u2026: the ellipsis is Po, split off, and unknown.
      {"unknown unicode punctuation is unk", "hello\u2026", {}, 32, kLower, {2, 19, 1, 3}},
      // \x01 and DEL (Cc) are dropped, joining the halves.
      {"control characters dropped", "hel\x01lo wor\x7f" "ld", {}, 32, kLower, {2, 19, 20, 3}},
      // U+200B ZERO WIDTH SPACE and U+FEFF BOM are Cf: dropped, not spaces.
      {"zero width characters dropped", "hel\u200blo \ufeffworld", {}, 32, kLower,
       {2, 19, 20, 3}},
      {"nul dropped", std::string("hel\0lo", 6), {}, 32, kLower, {2, 19, 3}},
      {"replacement character dropped", "hel\ufffdlo", {}, 32, kLower, {2, 19, 3}},
      // Private use (Co) is dropped too: HF drops every category starting with C.
      {"private use character dropped", "hel\ue000lo", {}, 32, kLower, {2, 19, 3}},
      // A stray 0xFF, a lead byte before a non-continuation, a truncated tail.
      {"invalid utf8 dropped", "hel\xff" "lo wo\xc3" "rld \xe4\xb8", {}, 32, kLower,
       {2, 19, 20, 3}},
      // An overlong '/' is invalid, not a slash: "helloworld" -> hello + ##w.. -> [UNK].
      {"overlong encoding is not punctuation", "hello\xc0\xafworld", {}, 32, kLower, {2, 1, 3}},
      {"tabs newlines and carriage returns split", "hello\tworld\nthe\r\nfox\r", {}, 32, kLower,
       {2, 19, 20, 5, 8, 3}},
      // U+00A0 and U+3000 are Zs.
      {"no-break and ideographic spaces split", "hello\u00a0world\u3000fox", {}, 32, kLower,
       {2, 19, 20, 8, 3}},
      // U+2028 is Zl, but Python's str.split() in HF splits on it.
      {"line separator splits", "hello\u2028world", {}, 32, kLower, {2, 19, 20, 3}},
      {"repeated and edge whitespace", "  hello   world  ", {}, 32, kLower, {2, 19, 20, 3}},
      // a ##a x99: exactly max_input_chars_per_word.
      {"100 character word is split", a100, {}, 102, kLower,
       Concat({{2, 42}, std::vector<int32_t>(99, 43), {3}})},
      {"101 character word is unk", a101, {}, 32, kLower, {2, 1, 3}},
      // ab then "##x" fails: the whole word, not just the tail, is [UNK].
      {"unknown piece makes whole word unk", "abx dog", {}, 32, kLower, {2, 1, 15, 3}},
      // un ##aff ##able, jump ##s, jump ##ed, jump ##ing
      {"word split into continuation pieces", "unaffable jumps jumped jumping", {}, 32, kLower,
       {2, 16, 17, 18, 9, 10, 9, 11, 9, 12, 3}},
      // ab; a ##a ##b ("aa" and "##ab" are absent); hello ##s (not he ##llo ...)
      {"greedy longest match first", "ab aab hellos", {}, 32, kLower,
       {2, 45, 42, 43, 44, 19, 10, 3}},
      // 4 ##2
      {"digits use continuation pieces", "42", {}, 32, kLower, {2, 49, 50, 3}},
      // don ' t
      {"apostrophe splits a word", "don't", {}, 32, kLower, {2, 47, 30, 48, 3}},
      // [ cl ##s ] the [ [UNK] ]: special tokens in user text are plain text.
      {"special token text is ordinary text", "[CLS] the [SEP]", {}, 32, kLower,
       {2, 32, 46, 10, 33, 5, 32, 1, 33, 3}},
      // \u03bf\u03b4\u03bf\u03c2 (final sigma, as Python's lower()) and \u03c3\u03b1.
      {"greek final sigma", "\u039f\u0394\u039f\u03a3 \u03a3\u0391", {}, 32, kLower,
       {2, 51, 52, 3}},
      // A lone combining mark is stripped away entirely when lowercasing ...
      {"lone combining mark vanishes when lowercasing", "\u0301", {}, 32, kLower, {2, 3}},
      // ... but is an unknown word when cased.
      {"lone combining mark is unk when cased", "\u0301", {}, 32, kCased, {2, 1, 3}},
      {"empty string", "", {}, 32, kLower, {2, 3}},
      {"whitespace only", " \t\n\r\u00a0\u3000 ", {}, 32, kLower, {2, 3}},
      {"only dropped characters", "\x01\u200b\ufffd", {}, 32, kLower, {2, 3}},
      {"single text exactly fits", "the quick brown fox", {}, 6, kLower, {2, 5, 6, 7, 8, 3}},
      // Budget 4 - 2 = 2 pieces: the tail goes.
      {"single text truncated", "the quick brown fox", {}, 4, kLower, {2, 5, 6, 3}, 2},
      // Truncation counts word pieces, so it can cut inside a word.
      {"single text truncated inside a word", "unaffable", {}, 4, kLower, {2, 16, 17, 3}, 1},
      {"max_seq_len 2 leaves only specials", "hello world", {}, 2, kLower, {2, 3}, 2},
      // [CLS] hello [SEP] world [SEP]
      {"pair", "hello", "world", 32, kLower, {2, 19, 3, 20, 3}},
      {"pair exactly fits", "hello", "world", 5, kLower, {2, 19, 3, 20, 3}},
      {"pair with empty second text", "hello", "", 32, kLower, {2, 19, 3, 3}},
      // a = the quick brown fox jump ##s (6), b = lazy dog (2), budget 9 - 3 = 6:
      // a is longer both times, so a loses ##s and jump.
      {"pair truncation trims longer first text", "the quick brown fox jumps", "lazy dog", 9,
       kLower, {2, 5, 6, 7, 8, 3, 14, 15, 3}, 2},
      // a = hello (1), b = the quick brown fox (4), budget 3: b loses fox, brown.
      {"pair truncation trims longer second text", "hello", "the quick brown fox", 6, kLower,
       {2, 19, 3, 5, 6, 3}, 2},
      // 3 vs 3, budget 4: tie -> b (3, 2), then a is longer -> a (2, 2).
      {"pair truncation tie trims second text first", "the quick brown", "over the lazy", 7,
       kLower, {2, 5, 6, 3, 13, 5, 3}, 2},
      // 2 vs 2, budget 3: one removal, on the tie from b.
      {"pair truncation single tie removal", "the quick", "lazy dog", 6, kLower,
       {2, 5, 6, 3, 14, 3}, 1},
  };
  // clang-format on
}

// Token type ids follow from the ids: 0 through the first [SEP], then 1.
std::vector<int32_t> ExpectedTypes(const std::vector<int32_t>& ids, bool is_pair) {
  std::vector<int32_t> types(ids.size(), 0);
  if (!is_pair) return types;
  bool second = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    types[i] = second ? 1 : 0;
    if (ids[i] == 3) second = true;
  }
  return types;
}

TEST(BertTokenizer, EncodesTableCasesLikeHuggingFace) {
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 30u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto tokenizer = MakeTokenizer(c.do_lower_case, c.max_seq_len);
    ASSERT_NE(tokenizer, nullptr);
    Encoding encoding = c.pair.has_value() ? tokenizer->Encode(c.text, *c.pair) : tokenizer->Encode(c.text);
    EXPECT_EQ(encoding.input_ids, c.ids);
    EXPECT_EQ(encoding.token_type_ids, ExpectedTypes(c.ids, c.pair.has_value()));
    EXPECT_EQ(encoding.num_truncated, c.num_truncated);
  }
}

TEST(BertTokenizer, TokenizeReturnsPieceStrings) {
  auto tokenizer = MakeTokenizer();
  EXPECT_THAT(tokenizer->Tokenize("Unaffable, hello\u4e2d!"),
              ElementsAre("un", "##aff", "##able", ",", "hello", "\u4e2d", "!"));
  EXPECT_THAT(tokenizer->Tokenize("abx"), ElementsAre("[UNK]"));
  EXPECT_THAT(tokenizer->TokenizeToIds("jumped dog"), ElementsAre(9, 11, 15));
  EXPECT_TRUE(tokenizer->Tokenize("").empty());
}

TEST(BertTokenizer, TokenizeUnderConcurrentCallsIsConsistent) {
  auto tokenizer = MakeTokenizer();
  const std::vector<int32_t> expected = tokenizer->TokenizeToIds("The quick brown fox jumped");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (tokenizer->TokenizeToIds("The quick brown fox jumped") != expected) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

TEST(BertTokenizer, TokenToIdAndIdToTokenRoundTrip) {
  auto tokenizer = MakeTokenizer();
  EXPECT_EQ(tokenizer->TokenToId("hello"), 19);
  EXPECT_EQ(tokenizer->TokenToId("##aff"), 17);
  EXPECT_EQ(tokenizer->TokenToId("caf\u00e9"), 22);
  EXPECT_EQ(tokenizer->TokenToId("absent"), std::nullopt);
  EXPECT_EQ(tokenizer->TokenToId(""), std::nullopt);
  EXPECT_EQ(tokenizer->IdToToken(19), "hello");
  EXPECT_EQ(tokenizer->IdToToken(0), "[PAD]");
  EXPECT_EQ(tokenizer->IdToToken(-1), "[UNK]");
  EXPECT_EQ(tokenizer->IdToToken(static_cast<int32_t>(TestVocab().size())), "[UNK]");
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    EXPECT_EQ(tokenizer->TokenToId(tokenizer->IdToToken(id)), id);
  }
}

TEST(BertTokenizer, SpecialIdsComeFromTheVocab) {
  auto tokenizer = MakeTokenizer();
  EXPECT_EQ(tokenizer->pad_id(), 0);
  EXPECT_EQ(tokenizer->unk_id(), 1);
  EXPECT_EQ(tokenizer->cls_id(), 2);
  EXPECT_EQ(tokenizer->sep_id(), 3);
  EXPECT_EQ(tokenizer->mask_id(), 4);
  EXPECT_EQ(tokenizer->vocab_size(), static_cast<int64_t>(TestVocab().size()));

  // Specials anywhere in the vocab: padding and framing use their ids.
  auto reordered =
      BertTokenizer::FromTokens({"hello", "[MASK]", "[SEP]", "world", "[CLS]", "[UNK]", "[PAD]"}, TokenizerOptions{});
  ASSERT_OK(reordered);
  const auto& t = **reordered;
  EXPECT_EQ(t.pad_id(), 6);
  EXPECT_EQ(t.unk_id(), 5);
  EXPECT_EQ(t.cls_id(), 4);
  EXPECT_EQ(t.sep_id(), 2);
  EXPECT_EQ(t.mask_id(), 1);
  EXPECT_THAT(t.Encode("hello there").input_ids, ElementsAre(4, 0, 5, 2));
  const std::vector<std::string> texts = {"hello", "hello world"};
  EncodedBatch batch = t.EncodeBatch(texts);
  EXPECT_THAT(batch.input_ids, ElementsAre(4, 0, 2, 6, 4, 0, 3, 2));
}

TEST(BertTokenizer, EncodeBatchPadsToLongestRow) {
  auto tokenizer = MakeTokenizer();
  const std::vector<std::string> texts = {"hello", "the quick brown fox", ""};
  EncodedBatch batch = tokenizer->EncodeBatch(texts);
  EXPECT_EQ(batch.batch, 3);
  EXPECT_EQ(batch.seq_len, 6);
  EXPECT_THAT(batch.input_ids, ElementsAre(2, 19, 3, 0, 0, 0,  //
                                           2, 5, 6, 7, 8, 3,   //
                                           2, 3, 0, 0, 0, 0));
  EXPECT_THAT(batch.attention_mask, ElementsAre(1, 1, 1, 0, 0, 0,  //
                                                1, 1, 1, 1, 1, 1,  //
                                                1, 1, 0, 0, 0, 0));
  EXPECT_EQ(batch.token_type_ids, std::vector<int64_t>(18, 0));
  EXPECT_THAT(batch.lengths, ElementsAre(3, 6, 2));
  EXPECT_THAT(batch.num_truncated, ElementsAre(0, 0, 0));
}

TEST(BertTokenizer, EncodeBatchWithPairsSetsTypesAndTruncates) {
  auto tokenizer = MakeTokenizer(kLower, /*max_seq_len=*/7);
  const std::vector<std::string> texts = {"hello", "the quick brown"};
  const std::vector<std::string> pairs = {"world", "over the lazy"};
  EncodedBatch batch = tokenizer->EncodeBatch(texts, pairs);
  EXPECT_EQ(batch.batch, 2);
  EXPECT_EQ(batch.seq_len, 7);
  // Row 1 is the tie case: 3 + 3 pieces into a budget of 4.
  EXPECT_THAT(batch.input_ids, ElementsAre(2, 19, 3, 20, 3, 0, 0,  //
                                           2, 5, 6, 3, 13, 5, 3));
  EXPECT_THAT(batch.token_type_ids, ElementsAre(0, 0, 0, 1, 1, 0, 0,  //
                                                0, 0, 0, 0, 1, 1, 1));
  EXPECT_THAT(batch.attention_mask, ElementsAre(1, 1, 1, 1, 1, 0, 0,  //
                                                1, 1, 1, 1, 1, 1, 1));
  EXPECT_THAT(batch.lengths, ElementsAre(5, 7));
  EXPECT_THAT(batch.num_truncated, ElementsAre(0, 2));
}

// The serving batcher's rows are int64 and pretraining's carry no types:
// the same padding serves both.
TEST(PadRows, PadsInt64RowsWithAnyPadIdAndRowsWithoutTypes) {
  const std::vector<std::vector<int64_t>> ids = {{7, 8}, {9}, {1, 2, 3}};
  const std::vector<std::vector<int64_t>> types = {{0, 1}, {1}, {0, 0, 1}};
  EncodedBatch typed = PadRows(
      ids.size(), 42, [&](size_t r) -> const std::vector<int64_t>& { return ids[r]; },
      [&](size_t r) -> const std::vector<int64_t>& { return types[r]; });
  EXPECT_EQ(typed.batch, 3);
  EXPECT_EQ(typed.seq_len, 3);
  EXPECT_THAT(typed.input_ids, ElementsAre(7, 8, 42, 9, 42, 42, 1, 2, 3));
  EXPECT_THAT(typed.token_type_ids, ElementsAre(0, 1, 0, 1, 0, 0, 0, 0, 1));
  EXPECT_THAT(typed.attention_mask, ElementsAre(1, 1, 0, 1, 0, 0, 1, 1, 1));
  EXPECT_THAT(typed.lengths, ElementsAre(2, 1, 3));

  EncodedBatch untyped = PadRows(
      ids.size(), 0, [&](size_t r) -> const std::vector<int64_t>& { return ids[r]; },
      [](size_t) { return std::span<const int64_t>(); });
  EXPECT_THAT(untyped.input_ids, ElementsAre(7, 8, 0, 9, 0, 0, 1, 2, 3));
  EXPECT_EQ(untyped.token_type_ids, std::vector<int64_t>(9, 0));
  EXPECT_EQ(untyped.attention_mask, typed.attention_mask);
}

TEST(BertTokenizer, EncodeBatchOfNothingIsEmpty) {
  auto tokenizer = MakeTokenizer();
  EncodedBatch batch = tokenizer->EncodeBatch({});
  EXPECT_EQ(batch.batch, 0);
  EXPECT_EQ(batch.seq_len, 0);
  EXPECT_TRUE(batch.input_ids.empty());
  EXPECT_TRUE(batch.attention_mask.empty());
  EXPECT_TRUE(batch.lengths.empty());
}

TEST(BertTokenizer, EncodeBatchMatchesEncodePerRow) {
  auto tokenizer = MakeTokenizer(kLower, /*max_seq_len=*/8);
  const std::vector<std::string> texts = {"Unaffable jumping dogs", "\u4e2d", "a b a b a b a b a b"};
  EncodedBatch batch = tokenizer->EncodeBatch(texts);
  for (size_t r = 0; r < texts.size(); ++r) {
    SCOPED_TRACE(texts[r]);
    Encoding row = tokenizer->Encode(texts[r]);
    ASSERT_EQ(batch.lengths[r], static_cast<int64_t>(row.input_ids.size()));
    for (size_t t = 0; t < row.input_ids.size(); ++t) {
      EXPECT_EQ(batch.input_ids[r * batch.seq_len + t], row.input_ids[t]);
    }
    EXPECT_EQ(batch.num_truncated[r], row.num_truncated);
  }
  // Ten one-piece words ("b" alone is [UNK]) into a budget of 6.
  EXPECT_EQ(batch.num_truncated[2], 4);
}

using ::adapterd::testing::TempDir;

std::string JoinLines(const std::vector<std::string>& tokens, const std::string& eol) {
  std::string out;
  for (const auto& token : tokens) out += token + eol;
  return out;
}

TEST(BertTokenizer, FromVocabFileMatchesFromTokens) {
  TempDir dir;
  const std::string path = dir.Write("vocab.txt", JoinLines(TestVocab(), "\n"));
  ASSERT_OK_AND_ASSIGN(auto tokenizer, BertTokenizer::FromVocabFile(path, TokenizerOptions{}));
  EXPECT_EQ(tokenizer->tokens(), TestVocab());
  EXPECT_THAT(tokenizer->Encode("hello, world").input_ids, ElementsAre(2, 19, 27, 20, 3));
}

TEST(BertTokenizer, FromVocabFileWithCrLfLineEndingsStripsCarriageReturns) {
  TempDir dir;
  const std::string path = dir.Write("vocab.txt", JoinLines(TestVocab(), "\r\n"));
  ASSERT_OK_AND_ASSIGN(auto tokenizer, BertTokenizer::FromVocabFile(path, TokenizerOptions{}));
  EXPECT_EQ(tokenizer->tokens(), TestVocab());
  EXPECT_EQ(tokenizer->TokenToId("hello"), 19);
  EXPECT_EQ(tokenizer->cls_id(), 2);
}

TEST(BertTokenizer, FromVocabFileWithoutFinalNewlineKeepsLastToken) {
  TempDir dir;
  std::string contents = JoinLines(TestVocab(), "\n") + "extra";
  const std::string path = dir.Write("vocab.txt", contents);
  ASSERT_OK_AND_ASSIGN(auto tokenizer, BertTokenizer::FromVocabFile(path, TokenizerOptions{}));
  EXPECT_EQ(tokenizer->vocab_size(), static_cast<int64_t>(TestVocab().size()) + 1);
  EXPECT_EQ(tokenizer->TokenToId("extra"), static_cast<int32_t>(TestVocab().size()));
}

TEST(BertTokenizer, FromVocabFileMissingIsNotFound) {
  EXPECT_THAT(BertTokenizer::FromVocabFile(::testing::TempDir() + "/no/such/vocab.txt", TokenizerOptions{}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("vocab.txt")));
}

TEST(BertTokenizer, FromVocabFileWithDuplicateTokenIsInvalidArgument) {
  TempDir dir;
  // "the" is on lines 6 and 8.
  const std::string path = dir.Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nthe\n");
  EXPECT_THAT(
      BertTokenizer::FromVocabFile(path, TokenizerOptions{}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("duplicate token \"the\""), HasSubstr("line 8"), HasSubstr("line 6"), HasSubstr(path))));
}

TEST(BertTokenizer, FromVocabFileMissingSpecialTokenIsInvalidArgument) {
  TempDir dir;
  const std::string path = dir.Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  EXPECT_THAT(BertTokenizer::FromVocabFile(path, TokenizerOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[MASK]")));
}

TEST(BertTokenizer, FromVocabFileEmptyIsInvalidArgument) {
  TempDir dir;
  const std::string path = dir.Write("vocab.txt", "");
  EXPECT_THAT(BertTokenizer::FromVocabFile(path, TokenizerOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
}

TEST(BertTokenizer, FromTokensWithEachSpecialMissingNamesIt) {
  const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (const std::string& missing : specials) {
    SCOPED_TRACE(missing);
    std::vector<std::string> tokens = {"word"};
    for (const std::string& s : specials) {
      if (s != missing) tokens.push_back(s);
    }
    EXPECT_THAT(BertTokenizer::FromTokens(tokens, TokenizerOptions{}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(missing)));
  }
}

TEST(BertTokenizer, FromTokensWithTooSmallMaxSeqLenIsInvalidArgument) {
  TokenizerOptions options;
  options.max_seq_len = 1;
  EXPECT_THAT(BertTokenizer::FromTokens(TestVocab(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_seq_len")));
}

// --- Offsets ----------------------------------------------------------------------

// Code points [start, end) of UTF-8 `text` (Python's text[start:end]).
std::string CodePoints(std::string_view text, int start, int end) {
  std::string out;
  int index = -1;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++index;
    if (index >= start && index < end) out.push_back(c);
  }
  return out;
}

int CountCodePoints(std::string_view text) {
  int n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

struct OffsetCase {
  const char* name;
  std::string text;
  bool do_lower_case;
  // Each piece as (its token, the text it covers).
  std::vector<std::pair<std::string, std::string>> pieces;
};

std::vector<OffsetCase> OffsetCases() {
  // clang-format off
  return {
      {"repeated whitespace", "the  quick\t\n brown", kLower,
       {{"the", "the"}, {"quick", "quick"}, {"brown", "brown"}}},
      {"offsets count code points, not bytes", "caf\u00e9 world", kLower,
       {{"cafe", "caf\u00e9"}, {"world", "world"}}},
      {"accents stripped, still covered", "Caf\u00e9 NA\u00cfVE", kLower,
       {{"cafe", "Caf\u00e9"}, {"naive", "NA\u00cfVE"}}},
      {"dropped combining marks belong to their word", "CAFE\u0301\u0323 dog", kLower,
       {{"cafe", "CAFE\u0301\u0323"}, {"dog", "dog"}}},
      {"a leading combining mark belongs to the word after it", "\u0301hello", kLower,
       {{"hello", "\u0301hello"}}},
      {"composed when cased covers what it was composed from", "cafe\u0301 the", kCased,
       {{"caf\u00e9", "cafe\u0301"}, {"the", "the"}}},
      {"cjk ideographs each their own", "hello\u4e2d\u56fdworld", kLower,
       {{"hello", "hello"}, {"\u4e2d", "\u4e2d"}, {"\u56fd", "\u56fd"}, {"world", "world"}}},
      {"word pieces split their word", "Jumps unaffable", kLower,
       {{"jump", "Jump"}, {"##s", "s"}, {"un", "un"}, {"##aff", "aff"}, {"##able", "able"}}},
      {"a control character inside a word is covered", std::string("he\0llo, dog", 11), kLower,
       {{"hello", std::string("he\0llo", 6)}, {",", ","}, {"dog", "dog"}}},
      {"control characters around words are not", "dog\u200b \x01the", kLower,
       {{"dog", "dog"}, {"the", "the"}}},
      {"emoji stays in its word, which is unknown", "hello\U0001F600 world", kLower,
       {{"[UNK]", "hello\U0001F600"}, {"world", "world"}}},
      {"unicode punctuation split off", "\u201chello\u201d\u2014world?", kLower,
       {{"\u201c", "\u201c"}, {"hello", "hello"}, {"\u201d", "\u201d"}, {"\u2014", "\u2014"},
        {"world", "world"}, {"?", "?"}}},
      {"hangul decomposes to jamo and back, one span", "\ud55c\uad6d world", kLower,
       {{"[UNK]", "\ud55c\uad6d"}, {"world", "world"}}},
      {"hangul when cased", "\ud55c\uad6d world", kCased,
       {{"[UNK]", "\ud55c\uad6d"}, {"world", "world"}}},
  };
  // clang-format on
}

TEST(BertTokenizer, OffsetsCoverTheSpansOfTheOriginalText) {
  for (const OffsetCase& c : OffsetCases()) {
    SCOPED_TRACE(c.name);
    auto tokenizer = MakeTokenizer(c.do_lower_case);
    const std::vector<TokenPiece> pieces = tokenizer->TokenizeWithOffsets(c.text);
    std::vector<std::pair<std::string, std::string>> got;
    for (const TokenPiece& p : pieces) got.push_back({tokenizer->IdToToken(p.id), CodePoints(c.text, p.start, p.end)});
    EXPECT_EQ(got, c.pieces);
  }
}

TEST(BertTokenizer, OffsetsNumberTheWordsAfterPunctuationSplitting) {
  auto tokenizer = MakeTokenizer();
  std::vector<int32_t> words;
  for (const TokenPiece& p : tokenizer->TokenizeWithOffsets("Unaffable, hello\u4e2d! jumps")) words.push_back(p.word);
  // un ##aff ##able | , | hello | 中 | ! | jump ##s
  EXPECT_THAT(words, ElementsAre(0, 0, 0, 1, 2, 3, 4, 5, 5));
  EXPECT_TRUE(tokenizer->TokenizeWithOffsets(" \t ").empty());
}

// On random texts of the characters the pipeline treats specially, the ids
// are TokenizeToIds' and the spans are in the text, in order, never
// overlapping, each piece inside its word's.
TEST(BertTokenizer, OffsetsOnRandomTrickyTextsKeepTheIdsAndStayInOrder) {
  const std::vector<std::string> alphabet = {"a",
                                             "b",
                                             "l",
                                             "o",
                                             "he",
                                             "caf",
                                             "A",
                                             "E",
                                             " ",
                                             "  ",
                                             "\t",
                                             "\n",
                                             "\u00a0",
                                             "\u0301",
                                             "\u0323",
                                             "\u00e9",
                                             "\u00cf",
                                             "\u03a3",
                                             "\u03b1",
                                             "\u4e2d",
                                             "\u56fd",
                                             "\U0001F600",
                                             std::string("\0", 1),
                                             "\x01",
                                             "\u200b",
                                             "\ud55c",
                                             "\u1100",
                                             "\u1161",
                                             "\ufb01",
                                             "\u0130",
                                             ",",
                                             "!",
                                             "\u201c",
                                             "$",
                                             "##",
                                             "[SEP]",
                                             "\ufffd"};
  std::mt19937 rng(7);
  for (bool lower : {kLower, kCased}) {
    auto tokenizer = MakeTokenizer(lower);
    for (int t = 0; t < 2000; ++t) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      SCOPED_TRACE(::testing::PrintToString(text));
      const std::vector<TokenPiece> pieces = tokenizer->TokenizeWithOffsets(text);
      std::vector<int32_t> ids;
      for (const TokenPiece& p : pieces) ids.push_back(p.id);
      ASSERT_EQ(ids, tokenizer->TokenizeToIds(text));
      const int length = CountCodePoints(text);
      for (size_t i = 0; i < pieces.size(); ++i) {
        ASSERT_LE(0, pieces[i].start);
        ASSERT_LT(pieces[i].start, pieces[i].end);
        ASSERT_LE(pieces[i].end, length);
        if (i > 0) {
          ASSERT_GE(pieces[i].start, pieces[i - 1].end) << "piece " << i << " overlaps the one before";
          ASSERT_GE(pieces[i].word, pieces[i - 1].word);
          ASSERT_LE(pieces[i].word, pieces[i - 1].word + 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace adapterd::model
