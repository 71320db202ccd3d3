#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace adapterd
