// Text pieces (text_pieces.h): the words and pieces the token-reading kinds
// build rows from, with code-point spans into the caller's text.
#include "server/model/text_pieces.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace adapterd::model {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<BertTokenizer> Tokenizer() {
  auto tok = BertTokenizer::FromTokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "opens", "at", "nine", "nin", "##e", ".", "中"}, {});
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(TextPieces, PiecesOfTextKeepSpansWordsAndFirstPieces) {
  auto tok = Tokenizer();
  ASSERT_NE(tok, nullptr);
  // "Café" is 4 code points (5 bytes); the control character and the double
  // space belong to no piece.
  const TextPieces p = PiecesOfText(*tok, "Café\x01  opens 中 at nine.");
  EXPECT_THAT(p.spans, ElementsAre(Span{0, 4}, Span{7, 12}, Span{13, 14}, Span{15, 17}, Span{18, 22}, Span{22, 23}));
  EXPECT_THAT(p.word_of_piece, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(p.first_piece, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(p.word_spans[4], (Span{18, 22}));
}

TEST(TextPieces, PreSplitWordsKeepTheirPiecesTogether) {
  auto tok = Tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> words = {"Café", "nine.", "\x01"};
  EXPECT_EQ(JoinWords(words), "Café nine. \x01");
  const TextPieces p = PiecesOfWords(*tok, words);
  // "nine." is one word of two pieces; the control character is a word with
  // no piece.
  EXPECT_THAT(p.word_of_piece, ElementsAre(0, 1, 1));
  EXPECT_THAT(p.spans, ElementsAre(Span{0, 4}, Span{5, 9}, Span{9, 10}));
  EXPECT_THAT(p.word_spans, ElementsAre(Span{0, 4}, Span{5, 10}, Span{11, 12}));
  EXPECT_THAT(p.first_piece, ElementsAre(0, 1, -1));
}

TEST(TextPieces, CoveringPiecesAndCodePointSubstrings) {
  auto tok = Tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "Café opens at nine.";
  const TextPieces p = PiecesOfText(*tok, text);
  EXPECT_EQ(PiecesCovering(p, 14, 18), (std::pair<int32_t, int32_t>{3, 3}));  // "nine"
  EXPECT_EQ(PiecesCovering(p, 2, 8), (std::pair<int32_t, int32_t>{0, 1}));    // partial words count
  EXPECT_EQ(PiecesCovering(p, 4, 5), std::nullopt);                           // the space
  EXPECT_EQ(PiecesCovering(p, 40, 45), std::nullopt);
  EXPECT_EQ(CodePointSubstr(text, 0, 4), "Café");
  EXPECT_EQ(CodePointSubstr(text, 3, 6), "é o");
  EXPECT_EQ(CodePointSubstr(text, 14, 99), "nine.");
  EXPECT_EQ(CodePointSubstr(text, 9, 2), "");
}

TEST(TextPieces, DefaultStridesFollowTheWindow) {
  EXPECT_EQ(DefaultDocStride(384), 128);  // run_squad's
  EXPECT_EQ(DefaultDocStride(128), 42);
  EXPECT_EQ(TaggingStride(128), 63);
  EXPECT_EQ(TaggingStride(2), 1);
}

}  // namespace
}  // namespace adapterd::model
