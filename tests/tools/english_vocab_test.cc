#include "tools/make_model/english_vocab.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/testing/status_matchers.h"
#include "server/model/tokenizer.h"

namespace adapterd::tools {
namespace {

using ::testing::ElementsAre;

TEST(EnglishVocab, HasNoDuplicates) {
  const std::vector<std::string> vocab = DefaultEnglishVocab();
  std::unordered_set<std::string> seen;
  for (const std::string& token : vocab) {
    EXPECT_TRUE(seen.insert(token).second) << "duplicate: " << token;
  }
}

TEST(EnglishVocab, SpecialsTakeIdsZeroToFour) {
  const std::vector<std::string> vocab = DefaultEnglishVocab();
  ASSERT_GE(vocab.size(), 5u);
  EXPECT_THAT(std::vector<std::string>(vocab.begin(), vocab.begin() + 5),
              ElementsAre("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"));
}

TEST(EnglishVocab, IsLargeAndDeterministic) {
  const std::vector<std::string> vocab = DefaultEnglishVocab();
  EXPECT_GT(vocab.size(), 1500u);
  EXPECT_EQ(DefaultEnglishVocab(), vocab);
}

TEST(EnglishVocab, IsUncasedAndNonEmpty) {
  for (const std::string& token : DefaultEnglishVocab()) {
    ASSERT_FALSE(token.empty());
    if (token.front() == '[') continue;  // Specials, and "[" itself.
    for (char c : token) {
      EXPECT_FALSE(std::isupper(static_cast<unsigned char>(c))) << token;
      EXPECT_FALSE(std::isspace(static_cast<unsigned char>(c))) << token;
    }
  }
}

TEST(EnglishVocab, CoversEveryPrintableAsciiCharacter) {
  const std::vector<std::string> vocab = DefaultEnglishVocab();
  const std::unordered_set<std::string> tokens(vocab.begin(), vocab.end());
  for (char c = 33; c <= 126; ++c) {
    if (c >= 'A' && c <= 'Z') continue;
    EXPECT_TRUE(tokens.contains(std::string(1, c))) << c;
    if (std::isalnum(static_cast<unsigned char>(c))) {
      EXPECT_TRUE(tokens.contains(std::string("##") + c)) << c;
    }
  }
}

TEST(EnglishVocab, TokenizesOrdinaryEnglishIntoWholeWords) {
  model::TokenizerOptions options;
  options.do_lower_case = true;
  ASSERT_OK_AND_ASSIGN(auto tokenizer, model::BertTokenizer::FromTokens(DefaultEnglishVocab(), options));
  const std::string paragraph =
      "The small team met early on Monday morning to discuss the new project. "
      "Several people said the plan was too expensive, but the manager believed it "
      "could still work if they moved quickly. After a long debate, everyone agreed to "
      "test the idea with a few customers during the next two weeks. The results would "
      "help the company decide whether to build the product or try something different. "
      "Most of the students thought the final report was clear, useful and easy to read.";

  const std::vector<std::string> pieces = tokenizer->Tokenize(paragraph);
  for (const std::string& piece : pieces) EXPECT_NE(piece, "[UNK]");

  // Words are the paragraph's runs of letters; a word is whole when it is
  // a single piece.
  int words = 0;
  int whole = 0;
  std::string word;
  for (size_t i = 0; i <= paragraph.size(); ++i) {
    const unsigned char c = i < paragraph.size() ? paragraph[i] : ' ';
    if (std::isalpha(c)) {
      word += static_cast<char>(std::tolower(c));
      continue;
    }
    if (word.empty()) continue;
    ++words;
    if (tokenizer->Tokenize(word).size() == 1) ++whole;
    word.clear();
  }
  EXPECT_GT(words, 60);
  EXPECT_GT(whole, words * 8 / 10) << whole << " of " << words << " words are one piece";
}

TEST(EnglishVocab, UnlistedWordsStillSplitWithoutUnknowns) {
  ASSERT_OK_AND_ASSIGN(auto tokenizer,
                       model::BertTokenizer::FromTokens(DefaultEnglishVocab(), model::TokenizerOptions{}));
  for (const char* text : {"Zyxwvut qwerty 1234567890", "xylophones, quizzically!", "a-b/c&d"}) {
    SCOPED_TRACE(text);
    const std::vector<std::string> pieces = tokenizer->Tokenize(text);
    EXPECT_FALSE(pieces.empty());
    for (const std::string& piece : pieces) EXPECT_NE(piece, "[UNK]");
  }
}

}  // namespace
}  // namespace adapterd::tools
