// The serving form codec (server/model/serving_form.h): bit-exact round
// trips in the serving dtype, every kind's config, DATA_LOSS for any flipped
// or missing byte, FAILED_PRECONDITION for an intact but stale form.
#include "server/model/serving_form.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/testing/status_matchers.h"
#include "server/model/adapter_format.h"
#include "server/model/bert_encoder.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using testing::BitEqual;
using ::testing::HasSubstr;
using testing::MakeAdapterConfig;
using testing::MakeEncoder;
using testing::MakeTrainedLikeSet;
using testing::TinyConfig;

constexpr char kSource[] = "acme/task/00000000000000000001";

class ServingFormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = MakeEncoder(TinyConfig());
    ASSERT_NE(encoder_, nullptr);
  }

  ServingFormExpectation Expect(c10::ScalarType dtype) const {
    return {.source = kSource, .encoder_fingerprint = encoder_->fingerprint(), .dtype = dtype};
  }

  // `set` in `dtype`, and its serving form.
  std::pair<std::unique_ptr<AdapterSet>, std::string> Encoded(const AdapterSet& set, c10::ScalarType dtype) {
    auto cast = set.Clone(at::kCPU, dtype);
    EXPECT_OK(cast.status());
    auto form = EncodeServingForm(**cast, kSource, encoder_->fingerprint(), "canonical bytes");
    EXPECT_OK(form.status());
    return {*std::move(cast), form.ok() ? *std::move(form) : std::string()};
  }

  std::unique_ptr<BertEncoder> encoder_;
};

void ExpectSameSet(const AdapterSet& want, const AdapterSet& got) {
  const auto w = want.Named();
  const auto g = got.Named();
  ASSERT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].first, g[i].first);
    EXPECT_TRUE(BitEqual(w[i].second, g[i].second)) << w[i].first;
  }
  const AdapterConfig& a = want.config();
  const AdapterConfig& b = got.config();
  EXPECT_EQ(a.bottleneck_size, b.bottleneck_size);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.init_std, b.init_std);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.target.mean, b.target.mean);
  EXPECT_EQ(a.target.stddev, b.target.stddev);
  EXPECT_EQ(a.qa, b.qa);
  EXPECT_EQ(a.tagging_max_seq_len, b.tagging_max_seq_len);
}

TEST_F(ServingFormTest, RoundTripIsBitExactInTheServingDtype) {
  auto set = MakeTrainedLikeSet(*encoder_, 3, 7);
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto [cast, form] = Encoded(*set, dtype);
    ASSERT_OK_AND_ASSIGN(auto decoded, DecodeServingForm(form, encoder_->config(), at::kCPU, Expect(dtype)));
    EXPECT_EQ(decoded->dtype(), dtype);
    ExpectSameSet(*cast, *decoded);
    // Tensors own their bytes: the form may go away.
    form.assign(form.size(), '\0');
    EXPECT_TRUE(BitEqual(cast->head_weight(), decoded->head_weight()));
  }
}

TEST_F(ServingFormTest, HalfTheBytesOfTheFp32FileInBf16) {
  auto set = MakeTrainedLikeSet(*encoder_, 2, 3, /*bottleneck=*/16);
  ASSERT_OK_AND_ASSIGN(std::string file, SerializeAdapterSet(*set, encoder_->fingerprint()));
  auto [cast, form] = Encoded(*set, at::kBFloat16);
  // Tensor bytes halve; the header and 64-byte alignment add a little.
  EXPECT_LT(form.size(), file.size() * 6 / 10);
  EXPECT_GE(static_cast<int64_t>(form.size()), cast->ByteSize());
}

TEST_F(ServingFormTest, EveryKindsConfigRoundTrips) {
  AdapterConfig qa;
  qa.kind = TaskKind::kExtractiveQa;
  qa.qa = {
      .max_seq_len = 48, .doc_stride = 16, .max_question_tokens = 12, .max_answer_tokens = 5, .allow_no_answer = true};
  AdapterConfig regression;
  regression.kind = TaskKind::kRegression;
  regression.target = {.mean = 2.5, .stddev = 0.75};
  regression.activation = Activation::kSilu;
  AdapterConfig tagging;
  tagging.kind = TaskKind::kTokenClassification;
  tagging.labels = {"O", "B-X", "I-X"};
  tagging.tagging_max_seq_len = 24;
  for (const AdapterConfig& c : {qa, regression, tagging, MakeAdapterConfig(4)}) {
    auto set = MakeTrainedLikeSet(*encoder_, c, 11);
    auto [cast, form] = Encoded(*set, at::kBFloat16);
    ASSERT_OK_AND_ASSIGN(auto decoded, DecodeServingForm(form, encoder_->config(), at::kCPU, Expect(at::kBFloat16)));
    ExpectSameSet(*cast, *decoded);
  }
}

TEST_F(ServingFormTest, AnyFlippedOrMissingByteIsDataLoss) {
  auto set = MakeTrainedLikeSet(*encoder_, 2, 5);
  auto [cast, form] = Encoded(*set, at::kBFloat16);
  // The magic, the version, the header, a tensor, the digest itself.
  for (size_t at : {size_t{0}, size_t{9}, size_t{40}, form.size() / 2, form.size() - 1}) {
    SCOPED_TRACE(at);
    std::string flipped = form;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x04);
    EXPECT_THAT(DecodeServingForm(flipped, encoder_->config(), at::kCPU, Expect(at::kBFloat16)),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr(kSource)));
  }
  EXPECT_THAT(DecodeServingForm(std::string_view(form).substr(0, form.size() - 100), encoder_->config(), at::kCPU,
                                Expect(at::kBFloat16)),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeServingForm("short", encoder_->config(), at::kCPU, Expect(at::kBFloat16)),
              StatusIs(absl::StatusCode::kDataLoss));
  // An adapter file is not a serving form.
  ASSERT_OK_AND_ASSIGN(std::string file, SerializeAdapterSet(*set, encoder_->fingerprint()));
  EXPECT_THAT(DecodeServingForm(file, encoder_->config(), at::kCPU, Expect(at::kBFloat16)),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(ServingFormTest, VerifiedBytesDecodeWithoutTheDigest) {
  auto set = MakeTrainedLikeSet(*encoder_, 2, 5);
  auto [cast, form] = Encoded(*set, at::kBFloat16);
  // Only the digest is changed: a decode that skips it (the host tier's)
  // does not notice, one that checks it does.
  form.back() = static_cast<char>(form.back() ^ 0x01);
  ServingFormExpectation expect = Expect(at::kBFloat16);
  EXPECT_THAT(DecodeServingForm(form, encoder_->config(), at::kCPU, expect), StatusIs(absl::StatusCode::kDataLoss));
  expect.verify_digest = false;
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeServingForm(form, encoder_->config(), at::kCPU, expect));
  ExpectSameSet(*cast, *decoded);
}

TEST_F(ServingFormTest, AnUncheckedHeaderIsBoundsCheckedNotTrusted) {
  // Without the digest (the host tier's decode) a damaged header must still
  // never read or allocate past the blob: each byte of the header and the
  // tensor table, flipped, decodes to a set or to an error.
  auto set = MakeTrainedLikeSet(*encoder_, 2, 5);
  auto [cast, form] = Encoded(*set, at::kBFloat16);
  ServingFormExpectation expect = Expect(at::kBFloat16);
  expect.verify_digest = false;
  int errors = 0;
  for (size_t at = 0; at < std::min<size_t>(form.size(), 2048); ++at) {
    std::string flipped = form;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x80);
    absl::StatusOr<std::unique_ptr<AdapterSet>> got = DecodeServingForm(flipped, encoder_->config(), at::kCPU, expect);
    if (!got.ok()) {
      ++errors;
      EXPECT_TRUE(absl::IsDataLoss(got.status()) || absl::IsFailedPrecondition(got.status())) << got.status();
    }
  }
  EXPECT_GT(errors, 100);
}

TEST_F(ServingFormTest, IntactFormForAnotherSourceEncoderDtypeOrGeometryIsStale) {
  auto set = MakeTrainedLikeSet(*encoder_, 2, 5);
  auto [cast, form] = Encoded(*set, at::kBFloat16);
  ServingFormExpectation other_source = Expect(at::kBFloat16);
  other_source.source = "acme/task/00000000000000000002";
  ServingFormExpectation other_encoder = Expect(at::kBFloat16);
  other_encoder.encoder_fingerprint = "sha256:another";
  for (const ServingFormExpectation& e : {other_source, other_encoder, Expect(at::kFloat)}) {
    EXPECT_THAT(DecodeServingForm(form, encoder_->config(), at::kCPU, e),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale")));
  }
  BertConfig wider = encoder_->config();
  wider.hidden_size *= 2;
  EXPECT_THAT(DecodeServingForm(form, wider, at::kCPU, Expect(at::kBFloat16)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale")));
}

TEST_F(ServingFormTest, OnlyFloatingSetsEncode) {
  auto set = MakeTrainedLikeSet(*encoder_, 2, 5);
  ASSERT_OK_AND_ASSIGN(auto doubles, set->Clone(at::kCPU, at::kDouble));
  EXPECT_THAT(EncodeServingForm(*doubles, kSource, encoder_->fingerprint(), ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd::model
