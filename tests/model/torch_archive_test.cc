// TorchArchive: torch.save files written by Debian's PyTorch
// (testdata/torch_archive/make_fixtures.py) read back value for value, and
// hostile or malformed files refused by name without running anything.
#include "server/model/torch_archive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zip.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/subprocess.h"
#include "common/testing/temp_dir.h"

namespace adapterd::model {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/model/testdata/torch_archive/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

template <typename T>
std::vector<T> Values(const TensorView& v) {
  std::vector<T> out(v.data.size() / sizeof(T));
  std::memcpy(out.data(), v.data.data(), out.size() * sizeof(T));
  return out;
}

// The fixtures' float values: element k of the original tensor is k/4 - 1.
std::vector<float> Ramp(int64_t n) {
  std::vector<float> out;
  for (int64_t k = 0; k < n; ++k) out.push_back(static_cast<float>(k) * 0.25f - 1.0f);
  return out;
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(TorchArchive, ReadsAModulesStateDictWithItsMetadata) {
  auto archive = TorchArchive::Open(Fixture("state_dict.bin"));
  ASSERT_TRUE(archive.ok()) << archive.status();
  std::vector<std::string> names;
  for (const auto& [name, view] : archive->tensors()) names.push_back(name);
  EXPECT_THAT(names, ::testing::ElementsAre("0.bias", "0.weight", "1.bias", "1.weight"));
  const TensorView* w = archive->Find("0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Values<float>(*w), Ramp(12));
  EXPECT_EQ(Values<float>(*archive->Find("1.bias")), Ramp(4));
  EXPECT_EQ(archive->Find("missing"), nullptr);
}

TEST(TorchArchive, MapsEveryStorageType) {
  auto archive = TorchArchive::Open(Fixture("dtypes.bin"));
  ASSERT_TRUE(archive.ok()) << archive.status();
  const auto& t = archive->tensors();
  ASSERT_EQ(t.size(), 10u);
  for (const auto& [name, view] : t) EXPECT_EQ(view.shape, (std::vector<int64_t>{2, 3})) << name;
  EXPECT_EQ(t.at("f32").dtype, DType::kF32);
  EXPECT_EQ(Values<float>(t.at("f32")), Ramp(6));
  EXPECT_EQ(t.at("f64").dtype, DType::kF64);
  std::vector<double> f64 = Values<double>(t.at("f64"));
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(f64[k], static_cast<double>(k) * 0.25 - 1) << k;
  EXPECT_EQ(t.at("bf16").dtype, DType::kBF16);
  std::vector<uint16_t> bf16 = Values<uint16_t>(t.at("bf16"));
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(Bf16ToFloat(bf16[k]), Ramp(6)[k]) << k;
  EXPECT_EQ(t.at("f16").dtype, DType::kF16);
  EXPECT_EQ(Values<uint16_t>(t.at("f16"))[0], 0xBC00);  // -1.0 in IEEE half
  EXPECT_EQ(t.at("i64").dtype, DType::kI64);
  EXPECT_EQ(Values<int64_t>(t.at("i64")), (std::vector<int64_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(Values<int32_t>(t.at("i32")), (std::vector<int32_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(Values<int16_t>(t.at("i16")), (std::vector<int16_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(Values<int8_t>(t.at("i8")), (std::vector<int8_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(t.at("u8").dtype, DType::kU8);
  EXPECT_EQ(Values<uint8_t>(t.at("u8")), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(t.at("bool").dtype, DType::kBool);
  EXPECT_EQ(Values<uint8_t>(t.at("bool")), (std::vector<uint8_t>{0, 1, 0, 1, 0, 1}));
}

TEST(TorchArchive, StridedAndOffsetViewsComeOutContiguousWithTheRightValues) {
  auto archive = TorchArchive::FromBytes(ReadAll(Fixture("views.bin")));
  ASSERT_TRUE(archive.ok()) << archive.status();
  const auto& t = archive->tensors();
  const std::vector<float> a = Ramp(12);  // [3, 4]
  EXPECT_EQ(Values<float>(t.at("a")), a);
  ASSERT_EQ(t.at("a_t").shape, (std::vector<int64_t>{4, 3}));
  std::vector<float> a_t;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) a_t.push_back(a[static_cast<size_t>(i * 4 + j)]);
  EXPECT_EQ(Values<float>(t.at("a_t")), a_t);
  EXPECT_EQ(Values<float>(t.at("row1")), (std::vector<float>{a[4], a[5], a[6], a[7]}));
  EXPECT_EQ(Values<float>(t.at("col2")), (std::vector<float>{a[2], a[6], a[10]}));
  EXPECT_TRUE(t.at("scalar").shape.empty());
  EXPECT_EQ(Values<float>(t.at("scalar")), (std::vector<float>{3.5f}));
  EXPECT_EQ(t.at("empty").shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(t.at("empty").data.empty());
  EXPECT_EQ(Values<float>(t.at("param")), Ramp(4));
  // The row shares the full tensor's storage: no copy for a contiguous view.
  EXPECT_EQ(t.at("row1").data.data(), t.at("a").data.data() + 4 * sizeof(float));
}

TEST(TorchArchive, ReadsProtocol4Pickles) {
  auto archive = TorchArchive::Open(Fixture("protocol4.bin"));
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(Values<float>(*archive->Find("w")), Ramp(4));
}

TEST(TorchArchive, RefusesAHostileGlobalByNameWithoutRunningIt) {
  auto archive = TorchArchive::Open(Fixture("evil.bin"));
  ASSERT_FALSE(archive.ok());
  EXPECT_EQ(archive.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(archive.status().message(), HasSubstr("refused global 'posix.system'"));
}

TEST(TorchArchive, RefusesTheLegacyFormatNestedDictsAndNonArchives) {
  auto legacy = TorchArchive::Open(Fixture("legacy.bin"));
  ASSERT_FALSE(legacy.ok());
  EXPECT_THAT(legacy.status().message(), HasSubstr("pre-1.6 torch.save format"));
  auto nested = TorchArchive::Open(Fixture("nested.bin"));
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.status().message(), HasSubstr("entry 'model' is not a tensor"));
  auto text = TorchArchive::FromBytes("just some text, not a zip");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("not a torch.save zip archive"));
  EXPECT_EQ(TorchArchive::Open("/nonexistent/pytorch_model.bin").status().code(), absl::StatusCode::kNotFound);
}

TEST(TorchArchive, ACorruptedStorageIsRefused) {
  std::string bytes = ReadAll(Fixture("state_dict.bin"));
  // The first weight's bytes: 0.weight's value -1.0f (0xBF800000) is in the
  // archive once; flip a bit of it. libzip's CRC check refuses the entry.
  const std::string minus_one("\x00\x00\x80\xbf", 4);
  const size_t at = bytes.find(minus_one);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = static_cast<char>(bytes[at + 1] ^ 0x01);
  auto archive = TorchArchive::FromBytes(bytes);
  ASSERT_FALSE(archive.ok());
  EXPECT_THAT(archive.status().message(), HasSubstr("cannot read"));
}

TEST(TorchArchive, StorageBytesAreBoundedAtTheLimit) {
  // state_dict.bin holds 12 + 4 + 4 + 4 floats: 96 bytes of storage.
  EXPECT_TRUE(TorchArchive::Open(Fixture("state_dict.bin"), {.max_storage_bytes = 96}).ok());
  auto over = TorchArchive::Open(Fixture("state_dict.bin"), {.max_storage_bytes = 95});
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("limit of 95 bytes"));
  auto pickle = TorchArchive::Open(Fixture("state_dict.bin"), {.max_pickle_bytes = 16});
  ASSERT_FALSE(pickle.ok());
  EXPECT_THAT(pickle.status().message(), HasSubstr("over the limit of 16"));
}

// Hand-written pickles, through the interpreter alone.
absl::StatusOr<std::map<std::string, TensorView, std::less<>>> Unpickle(const std::string& pickle,
                                                                        size_t storage_bytes = 16) {
  std::shared_ptr<const void> holder;
  TorchStorageLoader load = [&](const TorchStorageRef&) -> absl::StatusOr<std::shared_ptr<const std::string>> {
    return std::make_shared<const std::string>(storage_bytes, '\0');
  };
  return UnpickleStateDict(pickle, load, &holder);
}

// {'w': _rebuild_tensor_v2(<storage '0' of 4 floats>, offset, size, stride, False, OrderedDict())}
std::string TensorPickle(const std::string& offset, const std::string& size, const std::string& stride) {
  using namespace std::string_literals;
  return "\x80\x02}X\x01\x00\x00\x00w"
         "ctorch._utils\n_rebuild_tensor_v2\n"
         "((X\x07\x00\x00\x00storage"
         "ctorch\nFloatStorage\n"
         "X\x01\x00\x00\x00"
         "0"
         "X\x03\x00\x00\x00"
         "cpu"
         "K\x04tQ"s +
         offset + size + stride +
         "\x89"
         "ccollections\nOrderedDict\n)RtRs.";
}

TEST(TorchPickle, TheHandWrittenTensorPickleReads) {
  // Guards the helper the refusals below modify.
  auto ok = Unpickle(TensorPickle("K\x01", "K\x03\x85", "K\x01\x85"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at("w").shape, (std::vector<int64_t>{3}));
}

TEST(TorchPickle, RefusesMalformedPicklesByName) {
  using namespace std::string_literals;
  struct Case {
    std::string pickle;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"\x80\x02"s
       "cos\nsystem\n.",
       "refused global 'os.system'"},
      {"\x80\x02"s
       "cbuiltins\neval\n.",
       "refused global 'builtins.eval'"},
      {"\x80\x02h\x05."s, "memo entry 5, never stored"},
      {"\x80\x02}X\x10\x00\x00\x00w"s, "ends early"},
      {"\x80\x02}.extra"s, "bytes follow the pickle's STOP"},
      {"\x80\x02i."s, "opcode 0x69"},
      {"\x80\x02R."s, "pops an empty stack"},
      {"\x80\x02}X\x01\x00\x00\x00wK\x01s."s, "entry 'w' is not a tensor"},
      {"\x80\x02]X\x01\x00\x00\x00wK\x01s."s, "SETITEM(S) on something that is not a dict"},
      {"\x80\x09}."s, "pickle protocol 9"},
      {"\x80\x02"s
       "ctorch\nFloatStorage\n)R.",
       "refused call of 'torch.FloatStorage'"},
      {"\x80\x02}(X\x01\x00\x00\x00wN\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09u."s, "wider than 64 bits"},
      // offset 2 + 3 elements > 4; a stride-0 broadcast of 8 over 4; a
      // negative offset.
      {TensorPickle("K\x02"s, "K\x03\x85"s, "K\x01\x85"s), "reaches past its storage"},
      {TensorPickle("K\x00"s, "K\x08\x85"s, "K\x00\x85"s), "reaches past its storage"},
      {TensorPickle("J\xff\xff\xff\xff"s, "K\x01\x85"s, "K\x01\x85"s), "reaches past its storage"},
      {TensorPickle("K\x00"s, "K\x02K\x02\x86"s, "K\x01\x85"s), "size and stride differ"},
  };
  for (const Case& c : cases) {
    auto out = Unpickle(c.pickle);
    ASSERT_FALSE(out.ok()) << c.message;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(out.status().message(), HasSubstr(c.message));
  }
  // A storage that does not hold the elements its id says.
  auto short_storage = Unpickle(TensorPickle("K\x00"s, "K\x01\x85"s, "K\x01\x85"s), /*storage_bytes=*/12);
  ASSERT_FALSE(short_storage.ok());
  EXPECT_THAT(short_storage.status().message(), HasSubstr("does not hold 4 elements of F32"));
}

// --- WriteTorchStateDict --------------------------------------------------------

// A view over `bytes` (which must outlive it).
TensorView ViewOf(DType dtype, std::vector<int64_t> shape, const std::string& bytes) {
  return TensorView{dtype, std::move(shape), std::as_bytes(std::span(bytes.data(), bytes.size()))};
}

std::string Counting(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 1);
  return s;
}

TEST(WriteTorchStateDict, ReadsBackThroughTorchArchiveByteForByte) {
  const std::string f32 = Counting(4 * 6), bf16 = Counting(2 * 5), i64 = Counting(8 * 3), big = Counting(4 * 300),
                    scalar = Counting(4), no_bytes;
  const std::map<std::string, TensorView, std::less<>> tensors = {
      {"bert.encoder.layer.0.output.adapters.a.adapter_up.weight", ViewOf(DType::kF32, {2, 3}, f32)},
      {"heads.a.1.bias", ViewOf(DType::kBF16, {5}, bf16)},
      {"ids", ViewOf(DType::kI64, {3, 1}, i64)},
      {"scalar", ViewOf(DType::kF32, {}, scalar)},
      {"empty", ViewOf(DType::kF16, {0, 4}, no_bytes)},
      {"wide", ViewOf(DType::kF32, {300}, big)},  // a dimension past BININT1
  };
  absl::StatusOr<std::string> file = WriteTorchStateDict(tensors);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<TorchArchive> back = TorchArchive::FromBytes(*file);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors().size(), tensors.size());
  for (const auto& [name, view] : tensors) {
    const TensorView* got = back->Find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype, view.dtype) << name;
    EXPECT_EQ(got->shape, view.shape) << name;
    ASSERT_EQ(got->data.size(), view.data.size()) << name;
    if (!view.data.empty()) {
      EXPECT_EQ(std::memcmp(got->data.data(), view.data.data(), view.data.size()), 0) << name;
    }
  }
  // An empty dict too.
  absl::StatusOr<std::string> none = WriteTorchStateDict({});
  ASSERT_TRUE(none.ok()) << none.status();
  absl::StatusOr<TorchArchive> none_back = TorchArchive::FromBytes(*none);
  ASSERT_TRUE(none_back.ok()) << none_back.status();
  EXPECT_TRUE(none_back->tensors().empty());
}

TEST(WriteTorchStateDict, TorchLoadReadsItWithWeightsOnly) {
  // Debian's python3-torch loads what adapterd wrote, with the restricted
  // unpickler the `adapters` library uses (weights_only=True), and sees the
  // values.
  std::string f32(4 * 6, '\0'), bf16(2 * 3, '\0');
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i) / 4 - 1;
    std::memcpy(&f32[4 * i], &v, 4);
  }
  const uint16_t ones[3] = {0x3f80, 0x3f80, 0x3f80};  // bf16 1.0
  std::memcpy(bf16.data(), ones, sizeof ones);
  absl::StatusOr<std::string> file =
      WriteTorchStateDict({{"w", ViewOf(DType::kF32, {2, 3}, f32)}, {"b", ViewOf(DType::kBF16, {3}, bf16)}});
  ASSERT_TRUE(file.ok()) << file.status();
  const adapterd::testing::TempDir dir;
  const std::string path = dir.Write("state_dict.bin", *file);
  absl::StatusOr<adapterd::testing::RunResult> r =
      adapterd::testing::RunProgram({"/usr/bin/python3", "-c",
                                     "import sys, torch; d = torch.load(sys.argv[1], weights_only=True); "
                                     "print(sorted(d), d['w'].tolist(), str(d['b'].dtype), d['b'].tolist())",
                                     path});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  const std::string& output = r->out;
  EXPECT_EQ(output, "['b', 'w'] [[-1.0, -0.75, -0.5], [-0.25, 0.0, 0.25]] torch.bfloat16 [1.0, 1.0, 1.0]\n");
}

TEST(WriteTorchStateDict, AViewWhoseBytesDoNotMatchItsShapeIsRefused) {
  const std::string bytes = Counting(10);
  EXPECT_FALSE(WriteTorchStateDict({{"x", ViewOf(DType::kF32, {3}, bytes)}}).ok());
  EXPECT_FALSE(WriteTorchStateDict({{"x", ViewOf(DType::kF32, {-1}, bytes)}}).ok());
}

}  // namespace
}  // namespace adapterd::model
