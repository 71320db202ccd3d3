#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace adapterd {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80"));
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));
}

TEST(Utf8, RejectsMalformedSequences) {
  EXPECT_FALSE(IsValidUtf8("\xff"));              // never valid
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ok\x80"));            // stray continuation
}

TEST(Utf8, ToValidUtf8ReplacesEachBadByteAndKeepsTheRest) {
  EXPECT_EQ(ToValidUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(ToValidUtf8(""), "");
  EXPECT_EQ(ToValidUtf8("a\xff"
                        "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(ToValidUtf8("\xc3"), "\xef\xbf\xbd");                                  // truncated sequence
  EXPECT_EQ(ToValidUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8(std::string("\x80\xc0\xaf\xf5\x00z", 6))));
}

TEST(Utf8, CodePointOffsetsStartEachCodePointAndEndWithTheSize) {
  EXPECT_EQ(CodePointOffsets(""), (std::vector<size_t>{0}));
  // a, é (2 bytes), 中 (3 bytes), 😀 (4 bytes), z.
  EXPECT_EQ(CodePointOffsets("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80z"), (std::vector<size_t>{0, 1, 3, 6, 10, 11}));
  // Each bad byte is one code point, as the tokenizer counts them.
  EXPECT_EQ(CodePointOffsets("a\xff\xc3"), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(Utf8, IsBlankOnlyForSpaceAndControls) {
  EXPECT_TRUE(IsBlank(""));
  EXPECT_TRUE(IsBlank(" \t\r\n\v\f"));
  EXPECT_TRUE(IsBlank("\xc2\xa0\xe3\x80\x80\xe2\x80\xa8"));  // NBSP, ideographic space, line separator
  EXPECT_TRUE(IsBlank("\x01\xe2\x80\x8b"));                  // a control, a zero-width space (Cf)
  EXPECT_FALSE(IsBlank("  a  "));
  EXPECT_FALSE(IsBlank(" \xe4\xb8\xad"));  // 中
  EXPECT_FALSE(IsBlank(" \xff"));          // not text
}

}  // namespace
}  // namespace adapterd
