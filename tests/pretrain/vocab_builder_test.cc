// VocabBuilder (tools/pretrain/vocab_builder.h): layout, the likelihood
// merge criterion, determinism, and that the project's tokenizer reads
// ordinary English with the built vocabulary and never emits [UNK] for an
// ASCII word.
#include "tools/pretrain/vocab_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "server/model/tokenizer.h"

namespace adapterd::pretrain {
namespace {

// A few paragraphs of ordinary English (package-description and dictionary
// style, like the real corpus), repeated so that frequent words qualify.
const char* const kSample[] = {
    "This package provides a library for reading and writing compressed files.",
    "The program displays the current time and date in a small window.",
    "A tool to convert images between many different formats, with support for colour profiles.",
    "It is written in Python and works with both local and remote repositories.",
    "The server listens on a network port and answers requests from its clients.",
    "An animal that lives in the sea and feeds on small fish.",
    "A plant with yellow flowers that grows in dry and sunny places.",
    "The act of moving something from one place to another.",
    "This manual page documents the command line options of the program.",
    "Games for children: puzzles, card games and a simple chess engine.",
    "Development files for the library, including headers and static libraries.",
    "The documentation is provided in HTML and PDF formats.",
};

VocabBuilder SampleBuilder(int repeats) {
  VocabBuilder b;
  for (int r = 0; r < repeats; ++r) {
    for (const char* line : kSample) b.AddText(line);
  }
  return b;
}

TEST(VocabBuilderTest, SpecialsFirstThenBothAlphabetFormsNoDuplicates) {
  const VocabBuilder b = SampleBuilder(5);
  auto vocab = b.Build({.vocab_size = 600});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  ASSERT_GE(vocab->size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ((*vocab)[i], kSpecialTokens[i]);
  const std::set<std::string> unique(vocab->begin(), vocab->end());
  EXPECT_EQ(unique.size(), vocab->size()) << "duplicate tokens";
  EXPECT_LE(vocab->size(), 600u);
  // Every printable ASCII character, in both forms.
  for (char c = 0x21; c < 0x7f; ++c) {
    EXPECT_TRUE(unique.count(std::string(1, c))) << "missing '" << c << "'";
    EXPECT_TRUE(unique.count("##" + std::string(1, c))) << "missing '##" << c << "'";
  }
  // Merges happened: the most frequent words are whole tokens.
  for (const char* w : {"the", "and", "a", "library", "program"}) {
    EXPECT_TRUE(unique.count(w)) << "'" << w << "' was not learnt";
  }
}

TEST(VocabBuilderTest, ReachesTheRequestedSizeWhenTheCorpusAllows) {
  const VocabBuilder b = SampleBuilder(5);
  auto vocab = b.Build({.vocab_size = 300});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->size(), 300u);
}

TEST(VocabBuilderTest, MergesByLikelihoodGainNotPairFrequency) {
  // "ab" occurs 10 times, but 'a' is mostly a word of its own (1000 times):
  // merging a+##b barely raises the likelihood (gain 10*log(10T/(1010*10))
  // with T = 1036 pieces, about 0.3). "cd" occurs only 8 times, but c and
  // ##d never occur apart (gain 8*log(8T/64), about 39). Frequency (BPE)
  // would merge "ab"; the likelihood criterion merges "cd".
  VocabBuilder b;
  b.AddWord("ab", 10);
  b.AddWord("a", 1000);
  b.AddWord("cd", 8);
  auto all = b.Build({.vocab_size = 100000});
  ASSERT_TRUE(all.ok()) << all.status();
  const size_t learnt_from = all->size() - 2;  // exactly two pairs exist
  ASSERT_EQ(all->size() - learnt_from, 2u);
  EXPECT_EQ((*all)[learnt_from], "cd");
  EXPECT_EQ((*all)[learnt_from + 1], "ab");

  auto one = b.Build({.vocab_size = static_cast<int>(learnt_from) + 1});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->back(), "cd");
}

TEST(VocabBuilderTest, RarePairsAreNeverMerged) {
  VocabBuilder b;
  b.AddWord("xy", 1);  // below min_pair_frequency 2
  b.AddWord("qz", 3);
  auto vocab = b.Build({.vocab_size = 100000, .min_word_frequency = 1, .min_pair_frequency = 2});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_NE(std::find(vocab->begin(), vocab->end(), "qz"), vocab->end());
  EXPECT_EQ(std::find(vocab->begin(), vocab->end(), "xy"), vocab->end());
}

TEST(VocabBuilderTest, Deterministic) {
  auto a = SampleBuilder(3).Build({.vocab_size = 400});
  auto b = SampleBuilder(3).Build({.vocab_size = 400});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(VocabBuilderTest, TooSmallForSpecialsAndAlphabetIsAnError) {
  auto vocab = SampleBuilder(1).Build({.vocab_size = 50});
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(VocabBuilderTest, TokenizerRoundTripsEnglishWithoutUnk) {
  auto vocab = SampleBuilder(5).Build({.vocab_size = 400});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto tok = model::BertTokenizer::FromTokens(*vocab, {.do_lower_case = true, .max_seq_len = 512});
  ASSERT_TRUE(tok.ok()) << tok.status();

  // The sample itself and English the builder never saw: capitals, digits,
  // punctuation, rare and made-up words.
  std::vector<std::string> texts(std::begin(kSample), std::end(kSample));
  texts.push_back("Zanzibar's quixotic XYLOPHONE-players can't parse RFC-2616 in 2026 (sic)!");
  texts.push_back("jackdaws love my big sphinx of quartz; pack my box with five dozen liquor jugs.");
  for (const std::string& text : texts) {
    const std::vector<std::string> pieces = (*tok)->Tokenize(text);
    ASSERT_FALSE(pieces.empty());
    EXPECT_EQ(std::count(pieces.begin(), pieces.end(), "[UNK]"), 0) << text;
    // Joining the pieces (dropping "##" and re-inserting word breaks) gives
    // back the basic-tokenised words.
    std::vector<std::string> words;
    for (const std::string& p : pieces) {
      if (p.starts_with("##")) {
        ASSERT_FALSE(words.empty()) << text;
        words.back() += p.substr(2);
      } else {
        words.push_back(p);
      }
    }
    EXPECT_EQ(words, model::BasicTokenize(text, /*do_lower_case=*/true)) << text;
  }
}

}  // namespace
}  // namespace adapterd::pretrain
