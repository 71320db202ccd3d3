// Cold loads through the serving form (server/serving/adapter_loading.h),
// seen through AdapterCache over a real RocksDB: the first load writes the
// form, later cold loads read it; a corrupt form is DATA_LOSS and is
// rebuilt from the untouched adapter file; a stale one is rebuilt; a failed
// write does not fail the load; the host tier holds the form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "common/testing/status_matchers.h"
#include "server/model/adapter_format.h"
#include "server/model/bert_encoder.h"
#include "server/model/serving_form.h"
#include "server/serving/adapter_cache.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "tests/serving/serving_fixture.h"

namespace adapterd::serving {
namespace {

using ::adapterd::serving::testing::AdapterBytes;
using ::adapterd::serving::testing::CountingObserver;
using ::adapterd::serving::testing::FixtureEncoder;
using ::adapterd::serving::testing::Promote;
using ::adapterd::serving::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

// Bit-for-bit equality of two sets' tensors.
void ExpectSameTensors(const model::AdapterSet& a, const model::AdapterSet& b) {
  const auto x = a.Named();
  const auto y = b.Named();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].second.scalar_type(), y[i].second.scalar_type()) << x[i].first;
    EXPECT_TRUE(at::equal(x[i].second, y[i].second)) << x[i].first;
  }
}

class AdapterLoadingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = FixtureEncoder();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_OK(OpenDb());
    ASSERT_OK_AND_ASSIGN(canonical_, AdapterBytes(*encoder_, 2, 100));
    ASSERT_OK(Promote(*db_, "acme", "t", 2, canonical_).status());
  }

  absl::Status OpenDb() {
    storage::Database::Options o;
    o.path = dir_.Sub("db");
    o.sync_writes = false;
    o.min_free_bytes = 1 << 20;
    o.free_bytes = [this] { return std::optional<int64_t>(free_bytes_); };
    ASSIGN_OR_RETURN(db_, storage::Database::Open(o));
    return absl::OkStatus();
  }

  // A new (cold) cache over the same database.
  std::unique_ptr<AdapterCache> Cold(int64_t device_budget = 1 << 30) {
    AdapterCache::Options o;
    o.encoder = encoder_.get();
    o.db = db_.get();
    o.device_budget_bytes = device_budget;
    o.observer = &observer_;
    auto cache = AdapterCache::Create(std::move(o));
    EXPECT_OK(cache.status());
    return cache.ok() ? *std::move(cache) : nullptr;
  }

  std::optional<std::string> StoredForm() {
    auto form = db_->adapters().GetServingForm("acme", "t", 1);
    EXPECT_OK(form.status());
    return form.ok() ? *form : std::nullopt;
  }

  absl::Status StoreForm(const std::string& bytes) {
    return db_->adapters().PutServingForm("acme", "t", 1, bytes, db_->adapters().ServingFormEpoch());
  }

  // `file` parsed the way loads did before serving forms.
  absl::StatusOr<std::unique_ptr<model::AdapterSet>> Parsed(const std::string& file) const {
    return model::DeserializeAdapterSet(file, encoder_->config(), encoder_->fingerprint(), encoder_->device(),
                                        {.dtype = encoder_->dtype()});
  }

  int64_t Event(ServingFormEvent e) const { return observer_.serving_forms(e); }

  TempDir dir_;
  int64_t free_bytes_ = int64_t{1} << 40;
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<storage::Database> db_;
  CountingObserver observer_;
  std::string canonical_;
};

TEST_F(AdapterLoadingTest, FirstLoadWritesTheServingFormAndTheNextColdLoadReadsIt) {
  EXPECT_EQ(StoredForm(), std::nullopt);  // today's data: no serving form
  ASSERT_OK_AND_ASSIGN(auto first, Cold()->Get("acme", "t"));
  EXPECT_EQ(Event(ServingFormEvent::kWritten), 1);
  EXPECT_EQ(Event(ServingFormEvent::kRead), 0);
  ASSERT_NE(StoredForm(), std::nullopt);
  ASSERT_OK(db_->Flush());

  for (int64_t version : {0, 1}) {  // the current version, and by number
    ASSERT_OK_AND_ASSIGN(auto again, Cold()->Get("acme", "t", version));
    EXPECT_EQ(again->version, 1);
    EXPECT_EQ(again->labels, first->labels);
    ExpectSameTensors(*first->set, *again->set);
  }
  EXPECT_EQ(Event(ServingFormEvent::kRead), 2);
  EXPECT_EQ(Event(ServingFormEvent::kWritten), 1);
  // The same set as the adapter file parsed the old way.
  ASSERT_OK_AND_ASSIGN(auto parsed, Parsed(canonical_));
  ExpectSameTensors(*parsed, *first->set);
}

TEST_F(AdapterLoadingTest, AFlippedByteInTheStoredFormIsDataLossAndIsRebuiltFromTheUntouchedFile) {
  ASSERT_OK(Cold()->Get("acme", "t").status());
  std::optional<std::string> form = StoredForm();
  ASSERT_NE(form, std::nullopt);
  (*form)[form->size() / 2] ^= 0x10;  // in a tensor
  ASSERT_OK(StoreForm(*form));
  ASSERT_OK(db_->Flush());

  auto cache = Cold();
  EXPECT_THAT(cache->Get("acme", "t"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(storage::keys::Adapter("acme", "t", 1))));
  EXPECT_EQ(Event(ServingFormEvent::kCorrupt), 1);
  ASSERT_OK_AND_ASSIGN(std::string file, db_->adapters().Get("acme", "t", 1));
  EXPECT_EQ(file, canonical_);
  EXPECT_EQ(StoredForm(), std::nullopt);  // deleted

  // The next Get rebuilds it from the file; the failure was not cached.
  ASSERT_OK_AND_ASSIGN(auto loaded, cache->Get("acme", "t"));
  EXPECT_EQ(Event(ServingFormEvent::kWritten), 2);
  ASSERT_OK_AND_ASSIGN(auto parsed, Parsed(canonical_));
  ExpectSameTensors(*parsed, *loaded->set);
}

TEST_F(AdapterLoadingTest, AStaleFormIsIgnoredAndRebuilt) {
  ASSERT_OK_AND_ASSIGN(auto parsed, Parsed(canonical_));
  const std::string key = storage::keys::Adapter("acme", "t", 1);
  ASSERT_OK_AND_ASSIGN(auto other_dtype, parsed->Clone(encoder_->device(), at::kBFloat16));
  ASSERT_NE(encoder_->dtype(), at::kBFloat16);
  ASSERT_OK_AND_ASSIGN(std::string bf16, model::EncodeServingForm(*other_dtype, key, encoder_->fingerprint(), ""));
  ASSERT_OK_AND_ASSIGN(std::string other_encoder, model::EncodeServingForm(*parsed, key, "sha256:other", ""));
  ASSERT_OK_AND_ASSIGN(
      std::string other_version,
      model::EncodeServingForm(*parsed, storage::keys::Adapter("acme", "t", 2), encoder_->fingerprint(), ""));
  int64_t rebuilt = 0;
  for (const std::string& stale : {bf16, other_encoder, other_version}) {
    ASSERT_OK(StoreForm(stale));
    ASSERT_OK_AND_ASSIGN(auto loaded, Cold()->Get("acme", "t"));
    ExpectSameTensors(*parsed, *loaded->set);
    EXPECT_EQ(Event(ServingFormEvent::kStale), ++rebuilt);
    EXPECT_EQ(Event(ServingFormEvent::kWritten), rebuilt);
    // Rewritten for this encoder: it decodes.
    std::optional<std::string> form = StoredForm();
    ASSERT_NE(form, std::nullopt);
    EXPECT_OK(model::DecodeServingForm(
                  *form, encoder_->config(), encoder_->device(),
                  {.source = key, .encoder_fingerprint = encoder_->fingerprint(), .dtype = encoder_->dtype()})
                  .status());
  }
}

TEST_F(AdapterLoadingTest, AFailedWriteDoesNotFailTheLoad) {
  free_bytes_ = 1 << 19;  // under the reserve: every write is refused
  auto cache = Cold(/*device_budget=*/0);
  ASSERT_OK_AND_ASSIGN(auto loaded, cache->Get("acme", "t"));
  EXPECT_EQ(Event(ServingFormEvent::kWriteFailed), 1);
  EXPECT_EQ(Event(ServingFormEvent::kWritten), 0);
  EXPECT_EQ(StoredForm(), std::nullopt);
  // The host tier holds the form all the same.
  EXPECT_GT(cache->host_stats().bytes, 0);
  const int64_t reads = observer_.loads(CacheTier::kHost);
  ASSERT_OK(cache->Get("acme", "t", 1).status());
  EXPECT_EQ(observer_.loads(CacheTier::kHost), reads);
}

TEST_F(AdapterLoadingTest, AHostTierHitDecodesTheFormWithoutRocksDb) {
  auto cache = Cold(/*device_budget=*/0);  // every Get decodes
  ASSERT_OK_AND_ASSIGN(auto first, cache->Get("acme", "t", 1));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> stored, db_->adapters().GetServingForm("acme", "t", 1));
  ASSERT_NE(stored, std::nullopt);
  EXPECT_EQ(cache->host_stats().bytes, static_cast<int64_t>(stored->size()));
  const int64_t reads = observer_.loads(CacheTier::kHost);
  const int64_t decodes = observer_.loads(CacheTier::kDevice);
  const int64_t hits = observer_.hits(CacheTier::kHost);
  ASSERT_OK_AND_ASSIGN(auto second, cache->Get("acme", "t", 1));
  EXPECT_EQ(observer_.loads(CacheTier::kHost), reads);
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), decodes + 1);
  EXPECT_EQ(observer_.hits(CacheTier::kHost), hits + 1);
  EXPECT_NE(first->set.get(), second->set.get());
  ExpectSameTensors(*first->set, *second->set);
}

TEST_F(AdapterLoadingTest, DeletingTheTaskRemovesItsForm) {
  ASSERT_OK(Cold()->Get("acme", "t").status());
  ASSERT_NE(StoredForm(), std::nullopt);
  ASSERT_OK(db_->tasks().Delete("acme", "t"));
  EXPECT_EQ(StoredForm(), std::nullopt);
  // Recreated with other weights: the new version 1 loads as itself.
  ASSERT_OK_AND_ASSIGN(std::string other, AdapterBytes(*encoder_, 2, 200));
  ASSERT_OK(Promote(*db_, "acme", "t", 2, other).status());
  ASSERT_OK_AND_ASSIGN(auto loaded, Cold()->Get("acme", "t"));
  ASSERT_OK_AND_ASSIGN(auto parsed, Parsed(other));
  ExpectSameTensors(*parsed, *loaded->set);
}

}  // namespace
}  // namespace adapterd::serving
