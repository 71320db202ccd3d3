#include "server/api/tenants.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::api {
namespace {

using adapterd::storage::testing::TempDir;

absl::StatusOr<std::unique_ptr<TenantRegistry>> FromText(const TempDir& dir, const std::string& text,
                                                         std::function<absl::Time()> now = nullptr) {
  const std::string path = dir.Sub("tenants.json");
  std::ofstream(path) << text;
  TenantRegistry::Options o;
  o.tenants_file = path;
  if (now) o.now = std::move(now);
  return TenantRegistry::Create(o);
}

TEST(TenantRegistry, SingleTenantModeNeedsNoKey) {
  auto r = TenantRegistry::Create({});
  ASSERT_OK(r.status());
  EXPECT_TRUE((*r)->single_tenant());
  auto t = (*r)->Authenticate(nullptr);
  ASSERT_OK(t.status());
  EXPECT_EQ((*t)->id(), "default");
}

TEST(TenantRegistry, MapsKeyHashesToTenantsWithQuotas) {
  TempDir dir;
  auto r = FromText(dir, absl::StrCat(R"({"tenants":[{"id":"acme","api_key_sha256":")", Sha256Hex("k1"),
                                      R"(","max_tasks":3,"max_texts_per_predict":7}]})"));
  ASSERT_OK(r.status());
  const std::string good = "Bearer k1";
  auto t = (*r)->Authenticate(&good);
  ASSERT_OK(t.status());
  EXPECT_EQ((*t)->id(), "acme");
  EXPECT_EQ((*t)->quotas().max_tasks, 3);
  EXPECT_EQ((*t)->quotas().max_texts_per_predict, 7);
  EXPECT_EQ((*t)->quotas().max_queued_jobs, TenantQuotas{}.max_queued_jobs);  // default
  EXPECT_EQ((*t)->quotas().batch_weight, 1);                                  // default
  for (const std::string bad : {"Bearer k2", "k1", "Bearer ", "Basic k1", ""}) {
    EXPECT_EQ((*r)->Authenticate(&bad).status().code(), absl::StatusCode::kUnauthenticated) << bad;
  }
  EXPECT_EQ((*r)->Authenticate(nullptr).status().code(), absl::StatusCode::kUnauthenticated);
}

// Authenticate compares the key's hash with every stored hash (in constant
// time, no early exit): each key still finds exactly its own tenant.
TEST(TenantRegistry, EveryKeyFindsItsOwnTenantAmongMany) {
  TempDir dir;
  std::string text = R"({"tenants":[)";
  for (int t = 0; t < 5; ++t) {
    if (t > 0) text += ",";
    text += absl::StrCat(R"({"id":"t)", t, R"(","api_key_sha256":[")", Sha256Hex(absl::StrCat("key-", t, "-a")),
                         R"(",")", Sha256Hex(absl::StrCat("key-", t, "-b")), R"("]})");
  }
  text += "]}";
  auto r = FromText(dir, text);
  ASSERT_OK(r.status());
  for (int t = 0; t < 5; ++t) {
    for (const char* suffix : {"-a", "-b"}) {
      const std::string auth = absl::StrCat("Bearer key-", t, suffix);
      auto found = (*r)->Authenticate(&auth);
      ASSERT_OK(found.status()) << auth;
      EXPECT_EQ((*found)->id(), absl::StrCat("t", t)) << auth;
    }
  }
  const std::string unknown = "Bearer key-5-a";
  EXPECT_EQ((*r)->Authenticate(&unknown).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TenantRegistry, ABatchWeightIsReadWithinItsRange) {
  TempDir dir;
  const auto with_weight = [&](const std::string& weight) {
    return FromText(dir, absl::StrCat(R"({"tenants":[{"id":"acme","api_key_sha256":")", Sha256Hex("k1"),
                                      R"(","batch_weight":)", weight, "}]}"));
  };
  for (const int64_t ok : {int64_t{1}, int64_t{3}, kMaxBatchWeight}) {
    ASSERT_OK_AND_ASSIGN(auto r, with_weight(absl::StrCat(ok)));
    const std::string key = "Bearer k1";
    ASSERT_OK_AND_ASSIGN(auto t, r->Authenticate(&key));
    EXPECT_EQ(t->quotas().batch_weight, ok);
  }
  for (const std::string& bad : {std::string("0"), std::string("-1"), absl::StrCat(kMaxBatchWeight + 1),
                                 std::string("1e300"), std::string("\"2\"")}) {
    EXPECT_THAT(with_weight(bad).status(),
                ::adapterd::testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("batch_weight")))
        << bad;
  }
}

TEST(TenantRegistry, RejectsMalformedFiles) {
  TempDir dir;
  const std::string h = Sha256Hex("k");
  for (const std::string& text : {
           std::string("not json"),
           std::string(R"({"nope": []})"),
           std::string(R"({"tenants":[{"api_key_sha256":")") + h + "\"}]}",
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":"abc"}]})"),
           std::string(R"({"tenants":[{"id":"a"}]})"),
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":")") + h + R"("},{"id":"b","api_key_sha256":")" + h +
               "\"}]}",
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":")") + h + R"(","max_tasks":-1}]})",
           // Past the quota's integer type (converting those was undefined).
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":")") + h + R"(","max_tasks":1e300}]})",
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":")") + h +
               R"(","max_dataset_bytes":9223372036854775808.0}]})",
           std::string(R"({"tenants":[{"id":"../a","api_key_sha256":")") + h + "\"}]}",
           // The same tenant id twice.
           std::string(R"({"tenants":[{"id":"a","api_key_sha256":")") + h + R"("},{"id":"a","api_key_sha256":")" +
               Sha256Hex("k2") + "\"}]}",
       }) {
    EXPECT_EQ(FromText(dir, text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  TenantRegistry::Options o;
  o.tenants_file = dir.Sub("missing.json");
  EXPECT_FALSE(TenantRegistry::Create(o).ok());
}

// Files in the format that predates the schema (proto/adapterd/config/v1/
// tenants.proto) load as they always have: snake_case names, api_key_sha256
// as one string or a list, omitted quotas at the server's defaults, 0 kept as
// 0, and of a key given twice the last.
TEST(TenantRegistry, FilesInTheFormatBeforeTheSchemaLoadWithTheSameQuotas) {
  TempDir dir;
  const std::string path = dir.Sub("tenants.json");
  std::ofstream(path) << absl::StrCat(R"({"tenants": [
    {"id": "acme", "api_key_sha256": ")",
                                      absl::AsciiStrToUpper(Sha256Hex("k1")), R"(",
     "max_tasks": 100, "max_queued_jobs": 4, "max_texts_per_predict": 64,
     "max_dataset_bytes": 67108864, "predict_rate_per_second": 0.5, "predict_burst": 100,
     "batch_weight": 2},
    {"id": "beta", "api_key_sha256": [")",
                                      Sha256Hex("k2"), R"(", ")", Sha256Hex("k3"), R"("]},
    {"id": "gamma", "api_key_sha256": [")",
                                      Sha256Hex("k4"), R"("], "max_tasks": 1, "max_tasks": 0,
     "max_dataset_bytes": 1e3, "predict_rate_per_second": 0}
  ]})");
  TenantRegistry::Options o;
  o.tenants_file = path;
  o.defaults.max_tasks = 7;
  o.defaults.predict_rate_per_second = 3;
  ASSERT_OK_AND_ASSIGN(auto r, TenantRegistry::Create(o));
  const auto quotas_of = [&r](const std::string& key) -> TenantQuotas {
    const std::string auth = absl::StrCat("Bearer ", key);
    auto t = r->Authenticate(&auth);
    EXPECT_OK(t.status()) << key;
    return t.ok() ? (*t)->quotas() : TenantQuotas{};
  };
  EXPECT_EQ(quotas_of("k1"), (TenantQuotas{.max_tasks = 100,
                                           .max_queued_jobs = 4,
                                           .max_texts_per_predict = 64,
                                           .max_dataset_bytes = 67108864,
                                           .predict_rate_per_second = 0.5,
                                           .predict_burst = 100,
                                           .batch_weight = 2}));
  EXPECT_EQ(quotas_of("k2"), o.defaults);
  EXPECT_EQ(quotas_of("k3"), o.defaults);
  TenantQuotas gamma = o.defaults;
  gamma.max_tasks = 0;
  gamma.max_dataset_bytes = 1000;
  gamma.predict_rate_per_second = 0;
  EXPECT_EQ(quotas_of("k4"), gamma);
  EXPECT_EQ(r->TenantIds(), (std::vector<std::string>{"acme", "beta", "gamma"}));
}

TEST(TenantRegistry, AFieldTheSchemaDoesNotHaveIsRefusedNamingIt) {
  TempDir dir;
  const std::string h = Sha256Hex("k");
  EXPECT_THAT(FromText(dir, absl::StrCat(R"({"tenants":[{"id":"a","api_key_sha256":")", h, R"(","max_taks":3}]})")),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::AllOf(::testing::HasSubstr("tenants[0]"), ::testing::HasSubstr("max_taks"),
                                                 ::testing::HasSubstr("tenants.proto"))));
  EXPECT_THAT(FromText(dir, absl::StrCat(R"({"tenants":[{"id":"a","api_key_sha256":")", h, R"("}],"comment":""})")),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("comment")));
}

TEST(TenantRegistry, AValueOfTheWrongTypeIsRefusedNamingTheField) {
  TempDir dir;
  const std::string h = Sha256Hex("k");
  for (const std::string value : {R"("5")", R"("many")", "null", "true", "3.5", "[5]", "{}"}) {
    EXPECT_THAT(FromText(dir, absl::StrCat(R"({"tenants":[{"id":"a","api_key_sha256":")", h, R"(","max_tasks":)", value,
                                           "}]}")),
                testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("max_tasks")))
        << value;
  }
  EXPECT_THAT(FromText(dir, absl::StrCat(R"({"tenants":[{"id":"a","api_key_sha256":")", h,
                                         R"(","predict_rate_per_second":"Infinity"}]})")),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("predict_rate_per_second")));
  EXPECT_THAT(FromText(dir, absl::StrCat(R"({"tenants":[{"id":5,"api_key_sha256":")", h, R"("}]})")),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("tenants[0].id")));
  EXPECT_THAT(FromText(dir, R"({"tenants":[{"id":"a","api_key_sha256":[5]}]})"),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("api_key_sha256")));
}

std::string OneTenant(const std::string& id, const std::string& key, int max_tasks = 5) {
  return absl::StrCat(R"({"tenants":[{"id":")", id, R"(","api_key_sha256":")", Sha256Hex(key), R"(","max_tasks":)",
                      max_tasks, R"(,"predict_rate_per_second":1,"predict_burst":1}]})");
}

TEST(TenantRegistry, ReloadRevokesKeysAndAppliesNewQuotas) {
  TempDir dir;
  auto r = FromText(dir, OneTenant("acme", "old-key"));
  ASSERT_OK(r.status());
  const std::string old_key = "Bearer old-key";
  const std::string new_key = "Bearer new-key";
  auto before = (*r)->Authenticate(&old_key);
  ASSERT_OK(before.status());

  std::ofstream(dir.Sub("tenants.json")) << OneTenant("acme", "new-key", /*max_tasks=*/9);
  ASSERT_OK((*r)->Reload());
  EXPECT_EQ((*r)->Authenticate(&old_key).status().code(), absl::StatusCode::kUnauthenticated);
  auto after = (*r)->Authenticate(&new_key);
  ASSERT_OK(after.status());
  EXPECT_EQ((*after)->quotas().max_tasks, 9);
  // A call authenticated before the reload keeps its tenant alive and intact.
  EXPECT_EQ((*before)->id(), "acme");
  EXPECT_EQ((*before)->quotas().max_tasks, 5);
}

TEST(TenantRegistry, AFailedReloadKeepsTheOldTable) {
  TempDir dir;
  auto r = FromText(dir, OneTenant("acme", "k"));
  ASSERT_OK(r.status());
  const std::string key = "Bearer k";
  std::ofstream(dir.Sub("tenants.json")) << R"({"tenants":[{"id":"acme","api_key_sha256":"not-hex"}]})";
  EXPECT_EQ((*r)->Reload().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK((*r)->Authenticate(&key).status());
  std::filesystem::remove(dir.Sub("tenants.json"));
  EXPECT_EQ((*r)->Reload().code(), absl::StatusCode::kNotFound);
  ASSERT_OK((*r)->Authenticate(&key).status());
  EXPECT_EQ((*TenantRegistry::Create({}))->Reload().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TenantRegistry, AnUnchangedTenantKeepsItsTokenBucketAcrossReloads) {
  TempDir dir;
  const absl::Time now = absl::FromUnixSeconds(100);
  auto r = FromText(dir, OneTenant("acme", "k"), [now] { return now; });
  ASSERT_OK(r.status());
  const std::string key = "Bearer k";
  ASSERT_OK((*(*r)->Authenticate(&key))->AdmitPredict(now));  // the burst of 1 is spent
  ASSERT_OK((*r)->Reload());                                  // same file
  EXPECT_EQ((*(*r)->Authenticate(&key))->AdmitPredict(now).code(), absl::StatusCode::kResourceExhausted);
}

TEST(TenantRegistry, AFileOthersMayWriteIsRefusedOneOthersMayReadIsWarnedAbout) {
  TempDir dir;
  const std::string path = dir.Write("tenants.json", OneTenant("acme", "k"));
  std::vector<std::string> warnings;
  TenantRegistry::Options o;
  o.tenants_file = path;
  o.warn = [&warnings](const std::string& m) { warnings.push_back(m); };

  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_OK(TenantRegistry::Create(o).status());
  EXPECT_TRUE(warnings.empty());

  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto readable = TenantRegistry::Create(o);
  ASSERT_OK(readable.status());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("0644"));
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("chmod o-r"));

  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  EXPECT_THAT(TenantRegistry::Create(o),
              testing::StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("chmod o-w")));
  // ... and a reload to such a file keeps the old table.
  EXPECT_EQ((*readable)->Reload().code(), absl::StatusCode::kFailedPrecondition);
  const std::string key = "Bearer k";
  EXPECT_OK((*readable)->Authenticate(&key).status());
}

// A 0600 tenants file in a directory any user may write (without the sticky
// bit) is refused: anyone could rename another file over it.
TEST(TenantRegistry, AFileInADirectoryOthersMayWriteIsRefusedUnlessTheDirectoryIsSticky) {
  TempDir dir;
  const std::string open_dir = dir.path() + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  const std::string path = open_dir + "/tenants.json";
  {
    std::ofstream f(path);
    f << OneTenant("acme", "k");
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  TenantRegistry::Options o;
  o.tenants_file = path;
  o.warn = [](const std::string&) {};
  ASSERT_OK(TenantRegistry::Create(o).status());

  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  EXPECT_THAT(TenantRegistry::Create(o),
              testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                ::testing::AllOf(::testing::HasSubstr(open_dir), ::testing::HasSubstr("0777"))));
  // As /tmp: others may write, but only a file's owner may rename it.
  ASSERT_EQ(::chmod(open_dir.c_str(), 01777), 0);
  EXPECT_OK(TenantRegistry::Create(o).status());
  ASSERT_EQ(::chmod(open_dir.c_str(), 0700), 0);
}

TEST(TokenBucket, AllowsABurstThenRefillsAtTheRate) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  TokenBucket b(/*rate=*/2, /*burst=*/3, t0);
  EXPECT_TRUE(b.TryTake(1, t0));
  EXPECT_TRUE(b.TryTake(1, t0));
  EXPECT_TRUE(b.TryTake(1, t0));
  EXPECT_FALSE(b.TryTake(1, t0));
  EXPECT_FALSE(b.TryTake(1, t0 + absl::Milliseconds(400)));  // 0.8 tokens
  EXPECT_TRUE(b.TryTake(1, t0 + absl::Milliseconds(500)));   // 1.0 token
  EXPECT_TRUE(b.TryTake(3, t0 + absl::Seconds(100)));        // capped at the burst
  EXPECT_FALSE(b.TryTake(1, t0 + absl::Seconds(100)));
}

TEST(Tenant, PredictRateIsEnforced) {
  absl::Time now = absl::FromUnixSeconds(5);
  TenantQuotas q;
  q.predict_rate_per_second = 1;
  q.predict_burst = 1;
  Tenant t("x", q, now);
  EXPECT_OK(t.AdmitPredict(now));
  EXPECT_EQ(t.AdmitPredict(now).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_OK(t.AdmitPredict(now + absl::Seconds(1)));
  Tenant unlimited("y", TenantQuotas{}, now);
  for (int i = 0; i < 100; ++i) EXPECT_OK(unlimited.AdmitPredict(now));
}

}  // namespace
}  // namespace adapterd::api
