#include "server/model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::IsOk;
using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string_view AsString(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

std::string Le64(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// A file whose length prefix says `header_len`, followed by `rest` verbatim,
// for inputs where the prefix must lie.
std::string RawFile(uint64_t header_len, std::string_view rest) { return Le64(header_len) + std::string(rest); }

// A well-framed file: correct length prefix, then `header` and `data`.
std::string MakeFile(std::string_view header, std::string_view data = "") {
  return RawFile(header.size(), std::string(header) + std::string(data));
}

absl::StatusOr<SafetensorsFile> ParseString(std::string bytes, SafetensorsLimits limits = {}) {
  return SafetensorsFile::FromString(std::move(bytes), limits);
}

struct Sample {
  std::string f32 = std::string(
      "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40"
      "\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc0\x40",
      24);                                                       // 1..6 as F32, shape [2,3]
  std::string f16 = std::string("\x00\x3c\x00\x40\x00\x42", 6);  // shape [3]
  std::string bf16 = std::string("\x80\x3f\x00\xc0", 4);         // shape [2]
  std::string i64 = Le64(7) + Le64(static_cast<uint64_t>(-9));   // shape [2,1]
  std::string scalar = std::string("\x01\x02\x03\x04", 4);       // F32, shape []
};

SafetensorsWriter SampleWriter(const Sample& s) {
  SafetensorsWriter w;
  EXPECT_OK(w.Add("layer.weight", DType::kF32, {2, 3}, AsBytes(s.f32)));
  EXPECT_OK(w.Add("half", DType::kF16, {3}, AsBytes(s.f16)));
  EXPECT_OK(w.Add("brain", DType::kBF16, {2}, AsBytes(s.bf16)));
  EXPECT_OK(w.Add("ids", DType::kI64, {2, 1}, AsBytes(s.i64)));
  EXPECT_OK(w.Add("scale", DType::kF32, {}, AsBytes(s.scalar)));
  EXPECT_OK(w.Add("empty", DType::kF32, {0, 4}, {}));
  w.SetMetadata("format", "pt");
  w.SetMetadata("task", "sst2");
  return w;
}

void ExpectMatchesSample(const SafetensorsFile& file, const Sample& s) {
  std::vector<std::string> names;
  for (const auto& [name, view] : file.tensors()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("brain", "empty", "half", "ids", "layer.weight", "scale"));

  struct Want {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
    int64_t numel;
  };
  const std::vector<Want> wants = {
      {"layer.weight", DType::kF32, {2, 3}, s.f32, 6}, {"half", DType::kF16, {3}, s.f16, 3},
      {"brain", DType::kBF16, {2}, s.bf16, 2},         {"ids", DType::kI64, {2, 1}, s.i64, 2},
      {"scale", DType::kF32, {}, s.scalar, 1},         {"empty", DType::kF32, {0, 4}, "", 0},
  };
  for (const Want& want : wants) {
    SCOPED_TRACE(want.name);
    const TensorView* view = file.Find(want.name);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->dtype, want.dtype);
    EXPECT_EQ(view->shape, want.shape);
    EXPECT_EQ(view->numel(), want.numel);
    EXPECT_EQ(AsString(view->data), want.bytes);
  }
  EXPECT_EQ(file.Find("missing"), nullptr);
  EXPECT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("task"), "sst2");
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(Safetensors, RoundTripInMemoryPreservesTensorsAndMetadata) {
  Sample s;
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(SampleWriter(s).Serialize()));
  ExpectMatchesSample(file, s);
}

TEST(Safetensors, RoundTripThroughWriteFileAndOpen) {
  Sample s;
  const ::adapterd::testing::TempDir dir("safetensors");
  const std::string path = dir.path() + "/model.safetensors";
  ASSERT_OK(SampleWriter(s).WriteFile(path));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::Open(path));
  ExpectMatchesSample(file, s);
  // The on-disk bytes are exactly what Serialize produces.
  ASSERT_OK_AND_ASSIGN(std::string on_disk, ReadFileToString(path));
  EXPECT_EQ(on_disk, SampleWriter(s).Serialize());
}

TEST(Safetensors, SerializedHeaderIsPaddedAndDataAlignedInNameOrder) {
  // Sizes that are multiples of 8 so that every tensor should start aligned.
  SafetensorsWriter w;
  std::string a(8 * 3, '\x11'), b(8, '\x22'), c(16, '\x33');
  ASSERT_OK(w.Add("c", DType::kU8, {16}, AsBytes(c)));
  ASSERT_OK(w.Add("a", DType::kF64, {3}, AsBytes(a)));
  ASSERT_OK(w.Add("b", DType::kI32, {2}, AsBytes(b)));
  w.SetMetadata("k", "a value of odd length");
  std::string bytes = w.Serialize();

  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_len + a.size() + b.size() + c.size());
  EXPECT_EQ(bytes[0 + 8], '{');
  // Padding is spaces after the JSON object.
  std::string header = bytes.substr(8, header_len);
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
  EXPECT_THAT(header, HasSubstr("__metadata__"));

  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(bytes));
  // FromString's holder is the std::string whose bytes the views borrow.
  const auto* owned = static_cast<const std::string*>(file.holder().get());
  ASSERT_NE(owned, nullptr);
  const auto* base = reinterpret_cast<const std::byte*>(owned->data());
  // Data laid out in name order, contiguous, every start 8-byte aligned in the file.
  EXPECT_EQ(file.Find("a")->data.data() - base, static_cast<std::ptrdiff_t>(8 + header_len));
  EXPECT_EQ(file.Find("b")->data.data(), file.Find("a")->data.data() + a.size());
  EXPECT_EQ(file.Find("c")->data.data(), file.Find("b")->data.data() + b.size());
  for (const auto& [name, view] : file.tensors()) {
    EXPECT_EQ((view.data.data() - base) % 8, 0) << name;
  }
}

TEST(Safetensors, SerializeOmitsEmptyMetadata) {
  SafetensorsWriter w;
  std::string a(4, '\0');
  ASSERT_OK(w.Add("a", DType::kI32, {1}, AsBytes(a)));
  std::string bytes = w.Serialize();
  EXPECT_THAT(bytes, Not(HasSubstr("__metadata__")));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(bytes));
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(file.tensors().size(), 1u);
}

TEST(Safetensors, EmptyWriterProducesParseableFileWithNoTensors) {
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(SafetensorsWriter().Serialize()));
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, HolderKeepsBytesAliveAfterFileIsDestroyed) {
  Sample s;
  std::shared_ptr<const void> holder;
  std::span<const std::byte> data;
  {
    ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(SampleWriter(s).Serialize()));
    holder = file.holder();
    data = file.Find("layer.weight")->data;
  }
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(AsString(data), s.f32);  // valgrind/ASan would flag a dangling span here
}

TEST(Safetensors, ParseBorrowsCallerBytesWithNullHolder) {
  std::string bytes = MakeFile(R"({"x":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", "abc");
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::Parse(AsBytes(bytes), /*holder=*/nullptr));
  EXPECT_EQ(file.holder(), nullptr);
  ASSERT_NE(file.Find("x"), nullptr);
  EXPECT_EQ(file.Find("x")->data.data(), AsBytes(bytes).data() + bytes.size() - 3);
}

TEST(Safetensors, ParseAcceptsHandWrittenFileWithZeroSizedTensorBetweenOthers) {
  // Key order differs from offset order, and a zero-sized tensor sits at a
  // boundary; extra whitespace in the header is legal JSON.
  std::string header = R"( { "z": {"dtype":"F32","shape":[0],"data_offsets":[4,4]},
      "b": {"dtype":"I16","shape":[2],"data_offsets":[4,8]},
      "a": {"dtype":"BOOL","shape":[2,2],"data_offsets":[0,4]},
      "__metadata__": {} }   )";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(MakeFile(header, std::string("\x01\x00\x00\x01wxyz", 8))));
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.Find("z")->numel(), 0);
  EXPECT_TRUE(file.Find("z")->data.empty());
  EXPECT_EQ(AsString(file.Find("b")->data), "wxyz");
  EXPECT_EQ(file.Find("a")->dtype, DType::kBool);
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, ParseAcceptsZeroDimAlongsideHugeDim) {
  // numel is 0 even though the other dims alone would overflow int64.
  std::string header = R"({"e":{"dtype":"F64","shape":[9223372036854775807,9223372036854775807,0],)"
                       R"("data_offsets":[0,0]}})";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(MakeFile(header)));
  EXPECT_EQ(file.Find("e")->numel(), 0);
}

// ---------------------------------------------------------------------------
// DType helpers.

TEST(Safetensors, DTypeNamesRoundTripAndSizesMatchFormat) {
  struct Case {
    DType dtype;
    const char* name;
    size_t size;
  };
  for (const Case& c : {Case{DType::kF64, "F64", 8}, Case{DType::kF32, "F32", 4}, Case{DType::kF16, "F16", 2},
                        Case{DType::kBF16, "BF16", 2}, Case{DType::kI64, "I64", 8}, Case{DType::kI32, "I32", 4},
                        Case{DType::kI16, "I16", 2}, Case{DType::kI8, "I8", 1}, Case{DType::kU8, "U8", 1},
                        Case{DType::kBool, "BOOL", 1}}) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeSize(c.dtype), c.size);
    ASSERT_OK_AND_ASSIGN(DType parsed, ParseDType(c.name));
    EXPECT_EQ(parsed, c.dtype);
  }
  EXPECT_THAT(ParseDType("f32"), StatusIs(kInvalid, HasSubstr("f32")));
  EXPECT_THAT(ParseDType("F8_E4M3"), StatusIs(kInvalid, HasSubstr("F8_E4M3")));
  EXPECT_THAT(ParseDType(""), StatusIs(kInvalid, HasSubstr("unknown")));
}

TEST(Safetensors, NumelOfScalarIsOneAndOfEmptyShapeIsZero) {
  TensorView scalar{DType::kF32, {}, {}};
  TensorView empty{DType::kF32, {3, 0, 5}, {}};
  TensorView matrix{DType::kF32, {3, 4, 5}, {}};
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(matrix.numel(), 60);
}

// ---------------------------------------------------------------------------
// Malformed framing.

TEST(Safetensors, RejectsEmptyInput) { EXPECT_THAT(ParseString(""), StatusIs(kInvalid, HasSubstr("too short"))); }

TEST(Safetensors, RejectsInputShorterThanLengthPrefix) {
  EXPECT_THAT(ParseString(std::string("\x05\x00\x00", 3)), StatusIs(kInvalid, HasSubstr("too short")));
  EXPECT_THAT(ParseString(std::string(7, '\0')), StatusIs(kInvalid, HasSubstr("7 bytes")));
}

TEST(Safetensors, RejectsZeroHeaderLength) {
  EXPECT_THAT(ParseString(RawFile(0, "{}")), StatusIs(kInvalid, HasSubstr("header length is 0")));
}

TEST(Safetensors, RejectsHeaderLengthPastEndOfInput) {
  EXPECT_THAT(ParseString(RawFile(100, "{}")),
              StatusIs(kInvalid, AllOf(HasSubstr("header length 100"), HasSubstr("past the end"))));
}

TEST(Safetensors, RejectsHeaderLengthOverConfiguredLimit) {
  std::string bytes = MakeFile(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "a");
  SafetensorsLimits limits;
  limits.max_header_bytes = 16;
  EXPECT_THAT(ParseString(bytes, limits), StatusIs(kInvalid, AllOf(HasSubstr("exceeds the limit"), HasSubstr("16"))));
  // The same file is fine under the default limit.
  EXPECT_OK(ParseString(bytes));
}

TEST(Safetensors, RejectsHugeHeaderLengthWithoutAllocating) {
  EXPECT_THAT(ParseString(RawFile(uint64_t{1} << 63, "{}")), StatusIs(kInvalid, HasSubstr("exceeds the limit")));
  EXPECT_THAT(ParseString(RawFile(~uint64_t{0}, "{}")), StatusIs(kInvalid, HasSubstr("exceeds the limit")));
}

TEST(Safetensors, RejectsTruncatedDataSection) {
  std::string bytes = SampleWriter(Sample()).Serialize();
  bytes.resize(bytes.size() - 2);  // cut inside the last tensor's bytes
  EXPECT_THAT(ParseString(bytes), StatusIs(kInvalid, AllOf(HasSubstr("tensor 'scale'"), HasSubstr("out of range"))));
}

// ---------------------------------------------------------------------------
// Malformed JSON.

TEST(Safetensors, RejectsMalformedJson) {
  EXPECT_THAT(ParseString(MakeFile(R"({"x": {"dtype": "F32",)")), StatusIs(kInvalid, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseString(MakeFile("{} trailing")), StatusIs(kInvalid, HasSubstr("not valid JSON")));
  // Padding with NULs instead of spaces is not JSON either.
  EXPECT_THAT(ParseString(MakeFile(std::string("{}\0\0", 4))), StatusIs(kInvalid, HasSubstr("not valid JSON")));
  // nlohmann alone would stop at the NUL and accept the object before it.
  EXPECT_THAT(ParseString(MakeFile(std::string("{}\0{\"junk\"", 9))),
              StatusIs(kInvalid, HasSubstr("NUL byte at header offset 2")));
  // Invalid UTF-8 inside a string.
  EXPECT_THAT(ParseString(MakeFile("{\"\xff\":1}")), StatusIs(kInvalid, HasSubstr("JSON")));
}

TEST(Safetensors, RejectsJsonThatIsNotAnObject) {
  EXPECT_THAT(ParseString(MakeFile("[1, 2]")), StatusIs(kInvalid, HasSubstr("not an object")));
  EXPECT_THAT(ParseString(MakeFile("\"str\"")), StatusIs(kInvalid, HasSubstr("not an object")));
  EXPECT_THAT(ParseString(MakeFile("null")), StatusIs(kInvalid, HasSubstr("not an object")));
}

TEST(Safetensors, RejectsDuplicateTensorName) {
  std::string header = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"( "w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  EXPECT_THAT(ParseString(MakeFile(header, "ab")), StatusIs(kInvalid, AllOf(HasSubstr("duplicate"), HasSubstr("'w'"))));
}

TEST(Safetensors, RejectsDuplicateFieldInsideEntry) {
  std::string header = R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_THAT(ParseString(MakeFile(header, "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("duplicate"), HasSubstr("'dtype'"))));
}

TEST(Safetensors, RejectsDeeplyNestedJsonWithoutRecursing) {
  std::string deep = R"({"w":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THAT(ParseString(MakeFile(deep)), StatusIs(kInvalid, HasSubstr("nests deeper")));
}

// ---------------------------------------------------------------------------
// Malformed entries.

TEST(Safetensors, RejectsEntryThatIsNotAnObject) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":[1,2]})")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("not an object"))));
}

TEST(Safetensors, RejectsEntryMissingField) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[1]}})", "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("missing field 'data_offsets'"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "a")),
              StatusIs(kInvalid, HasSubstr("missing field 'dtype'")));
}

TEST(Safetensors, RejectsEntryWithExtraField) {
  std::string header = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"stride":[1]}})";
  EXPECT_THAT(ParseString(MakeFile(header, "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("unexpected extra field 'stride'"))));
}

TEST(Safetensors, RejectsUnknownDtype) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})", "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("unknown dtype 'F8_E5M2'"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("dtype"))));
}

TEST(Safetensors, RejectsNegativeShapeDim) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("shape dim 1 is negative"))));
}

TEST(Safetensors, RejectsNonIntegerShapeDim) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("shape dim 0"), HasSubstr("non-integer"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", "ab")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("not a non-negative integer"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":7,"data_offsets":[0,7]}})", "abcdefg")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("not an array"))));
}

TEST(Safetensors, RejectsShapeDimAboveInt64Max) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("too large"))));
}

TEST(Safetensors, RejectsNumelOverflow) {
  // 2^40 * 2^40 overflows int64.
  EXPECT_THAT(
      ParseString(MakeFile(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})")),
      StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("overflow"))));
  // numel fits int64 but numel * 8 bytes does not fit uint64.
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("overflow"))));
}

TEST(Safetensors, RejectsDataOffsetsWithWrongArityOrType) {
  for (const char* offsets : {"[0]", "[0,1,1]", "[]", "\"0,1\"", "{}"}) {
    SCOPED_TRACE(offsets);
    std::string header = std::string(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":)") + offsets + "}}";
    EXPECT_THAT(ParseString(MakeFile(header, "a")),
                StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("exactly 2 integers"))));
  }
  for (const char* offsets : {"[-1,0]", "[0,1.0]", "[0,\"1\"]", "[null,1]"}) {
    SCOPED_TRACE(offsets);
    std::string header = std::string(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":)") + offsets + "}}";
    EXPECT_THAT(ParseString(MakeFile(header, "a")),
                StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("not a non-negative integer"))));
  }
}

TEST(Safetensors, RejectsDataOffsetsWithBeginAfterEnd) {
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", "ab")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("begin > end"))));
}

TEST(Safetensors, RejectsDataOffsetsPastDataSection) {
  EXPECT_THAT(
      ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abc")),
      StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("out of range"), HasSubstr("holds 3 bytes"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", "a")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'w'"), HasSubstr("begin > end"))));
}

TEST(Safetensors, RejectsShapeSizeMismatch) {
  EXPECT_THAT(ParseString(MakeFile(R"({"a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})",
                                   std::string(12, 'x'))),
              StatusIs(kInvalid, HasSubstr("safetensors: tensor 'a.weight': data_offsets [0, 12) hold 12 "
                                           "bytes but shape [2,3] of F32 needs 24")));
}

TEST(Safetensors, RejectsOverlappingTensors) {
  std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                       R"( "b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})";
  EXPECT_THAT(ParseString(MakeFile(header, "abcdef")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'b'"), HasSubstr("overlap"), HasSubstr("'a'"))));
  // Two tensors sharing the exact same bytes.
  std::string aliased = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                        R"( "b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_THAT(ParseString(MakeFile(aliased, "abcd")), StatusIs(kInvalid, HasSubstr("overlap")));
}

TEST(Safetensors, RejectsGapBetweenTensors) {
  std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"( "b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})";
  EXPECT_THAT(
      ParseString(MakeFile(header, "abcdef")),
      StatusIs(kInvalid, AllOf(HasSubstr("tensor 'b'"), HasSubstr("gap"), HasSubstr("uncovered bytes [2, 4)"))));
}

TEST(Safetensors, RejectsUncoveredBytesAtEndOrBeforeFirstTensor) {
  EXPECT_THAT(ParseString(MakeFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "abcd")),
              StatusIs(kInvalid, HasSubstr("uncovered bytes [2, 4)")));
  EXPECT_THAT(ParseString(MakeFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "abcd")),
              StatusIs(kInvalid, AllOf(HasSubstr("tensor 'a'"), HasSubstr("uncovered bytes [0, 2)"))));
  // Data with no tensors at all.
  EXPECT_THAT(ParseString(MakeFile("{}", "zz")), StatusIs(kInvalid, HasSubstr("uncovered")));
}

TEST(Safetensors, RejectsMetadataWithNonStringValue) {
  EXPECT_THAT(ParseString(MakeFile(R"({"__metadata__":{"epoch":3}})")),
              StatusIs(kInvalid, AllOf(HasSubstr("__metadata__"), HasSubstr("'epoch'"), HasSubstr("not a string"))));
  EXPECT_THAT(ParseString(MakeFile(R"({"__metadata__":["a"]})")),
              StatusIs(kInvalid, AllOf(HasSubstr("__metadata__"), HasSubstr("not an object"))));
}

TEST(Safetensors, OpenReportsMissingFileAndNamesPathOnBadContent) {
  const ::adapterd::testing::TempDir dir("safetensors");
  EXPECT_THAT(SafetensorsFile::Open(dir.path() + "/absent.safetensors"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.safetensors")));

  const std::string bad = dir.path() + "/bad.safetensors";
  ASSERT_OK(WriteFileAtomically(bad, RawFile(0, "{}")));
  EXPECT_THAT(SafetensorsFile::Open(bad), StatusIs(kInvalid, AllOf(HasSubstr(bad), HasSubstr("header length is 0"))));

  const std::string empty = dir.path() + "/empty.safetensors";
  ASSERT_OK(WriteFileAtomically(empty, ""));
  EXPECT_THAT(SafetensorsFile::Open(empty), StatusIs(kInvalid, HasSubstr("too short")));
}

// ---------------------------------------------------------------------------
// Robustness: arbitrary damage must give a Status, never a crash, and an OK
// result must still describe bytes inside the input.

void ExpectSaneIfOk(const absl::StatusOr<SafetensorsFile>& result, const std::string& input) {
  if (!result.ok()) {
    EXPECT_EQ(result.status().code(), kInvalid) << result.status();
    return;
  }
  const auto* begin = reinterpret_cast<const std::byte*>(input.data());
  for (const auto& [name, view] : result->tensors()) {
    if (view.data.empty()) continue;
    EXPECT_GE(view.data.data(), begin) << name;
    EXPECT_LE(view.data.data() + view.data.size(), begin + input.size()) << name;
    EXPECT_EQ(view.data.size(), static_cast<size_t>(view.numel()) * DTypeSize(view.dtype));
  }
}

TEST(Safetensors, EveryTruncationIsRejectedWithoutCrashing) {
  const std::string full = SampleWriter(Sample()).Serialize();
  ASSERT_OK(ParseString(full));
  for (size_t len = 0; len < full.size(); ++len) {
    std::string prefix = full.substr(0, len);
    auto result = SafetensorsFile::Parse(AsBytes(prefix), nullptr);
    // Every strict prefix loses either header bytes or covered data bytes.
    ASSERT_THAT(result, StatusIs(kInvalid, HasSubstr("safetensors"))) << "len=" << len;
  }
}

TEST(Safetensors, RandomByteCorruptionsNeverCrash) {
  const std::string full = SampleWriter(Sample()).Serialize();
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> pos(0, full.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  int rejected = 0;
  for (int i = 0; i < 500; ++i) {
    std::string damaged = full;
    // Mostly one byte, sometimes a few, to reach states a single flip cannot.
    int flips = (i % 5 == 0) ? 3 : 1;
    for (int f = 0; f < flips; ++f) damaged[pos(rng)] = static_cast<char>(byte(rng));
    auto result = SafetensorsFile::Parse(AsBytes(damaged), nullptr);
    ExpectSaneIfOk(result, damaged);
    if (!result.ok()) ++rejected;
  }
  // Most damage lands in the header or length and must be noticed.
  EXPECT_GT(rejected, 100);
}

// ---------------------------------------------------------------------------
// Writer validation.

TEST(Safetensors, WriterRejectsDuplicateName) {
  SafetensorsWriter w;
  std::string a(4, '\0');
  ASSERT_OK(w.Add("w", DType::kF32, {1}, AsBytes(a)));
  EXPECT_THAT(w.Add("w", DType::kF32, {1}, AsBytes(a)),
              StatusIs(kInvalid, AllOf(HasSubstr("'w'"), HasSubstr("already added"))));
}

TEST(Safetensors, WriterRejectsEmptyAndReservedNames) {
  SafetensorsWriter w;
  std::string a(4, '\0');
  EXPECT_THAT(w.Add("", DType::kF32, {1}, AsBytes(a)), StatusIs(kInvalid, HasSubstr("empty tensor name")));
  EXPECT_THAT(w.Add("__metadata__", DType::kF32, {1}, AsBytes(a)), StatusIs(kInvalid, HasSubstr("reserved")));
  EXPECT_THAT(w.Add("bad\xff", DType::kU8, {4}, AsBytes(a)), StatusIs(kInvalid, HasSubstr("UTF-8")));
  // Nothing rejected was kept.
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(w.Serialize()));
  EXPECT_TRUE(file.tensors().empty());
}

TEST(Safetensors, WriterRejectsSizeMismatch) {
  SafetensorsWriter w;
  std::string a(10, '\0');
  EXPECT_THAT(w.Add("w", DType::kF32, {2, 2}, AsBytes(a)),
              StatusIs(kInvalid, AllOf(HasSubstr("'w'"), HasSubstr("data holds 10 bytes"), HasSubstr("needs 16"))));
  EXPECT_THAT(w.Add("s", DType::kF32, {}, {}), StatusIs(kInvalid, HasSubstr("needs 4")));
}

TEST(Safetensors, WriterRejectsNegativeDimAndOverflowingShape) {
  SafetensorsWriter w;
  EXPECT_THAT(w.Add("w", DType::kF32, {2, -3}, {}), StatusIs(kInvalid, AllOf(HasSubstr("'w'"), HasSubstr("negative"))));
  EXPECT_THAT(w.Add("w", DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, {}),
              StatusIs(kInvalid, HasSubstr("overflow")));
}

TEST(Safetensors, WriterDoesNotAliasCallerBuffer) {
  SafetensorsWriter w;
  std::string a = "abcd";
  ASSERT_OK(w.Add("w", DType::kU8, {4}, AsBytes(a)));
  a = "zzzz";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile file, ParseString(w.Serialize()));
  EXPECT_EQ(AsString(file.Find("w")->data), "abcd");
}

}  // namespace
}  // namespace adapterd::model
