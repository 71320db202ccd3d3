// End to end: the real `adapterd`, `adapterctl`, `adapterd-make-model` and
// Prometheus binaries, on 127.0.0.1 with a generated tiny model in a temp dir.
//
//   - Workflow: upload + train + watch (adapterctl train), predict, export,
//     import under a new id (identical scores), graceful restart (the tasks
//     are still served with bit-identical scores).
//   - Crash: SIGKILL adapterd in the middle of a training job; the restarted
//     server resumes it from its checkpoint and it succeeds.
//   - Metrics: promtool accepts a scrape, and a real Prometheus scraping the
//     server reports exactly the Predict calls the test made.
//   - Quickstart: the committed pretrained default encoder learns the README
//     walkthrough's real dataset well above the majority class.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset_file.h"
#include "common/testing/status_matchers.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/server_fixture.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::e2e {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizedAllocator = true;
#else
constexpr bool kSanitizedAllocator = false;
#endif

using ::adapterd::storage::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// The fixture (server_fixture.h) under the name the README cites.
class E2eTest : public ServerProcessTest {};

// The walkthrough (README): its hyperparameters, and the test accuracy it
// must reach on the first kTestExamples test examples. Measured: 0.91
// (273/300; majority class 0.18) on the default encoder of 2026-11-28
// (pretrained on a lent GPU, held-out masked-token accuracy 0.585); the
// CPU-pretrained encoder it replaced reached 0.75. The bar, 0.85, is the
// issue's target, with room for thread- and kernel-dependent rounding.
constexpr char kWalkthroughEpochs[] = "3";
constexpr char kWalkthroughLr[] = "1e-3";
constexpr size_t kTestExamples = 300;
constexpr double kMinTestAccuracy = 0.85;
// examples/everyday_descriptions.csv: the README's two walkthrough texts and
// ten everyday descriptions written before the encoder was trained; all 12
// are right on the committed encoder (scores 0.94-1.00). At most one may
// flip on another machine's kernels; the README's two must not.
constexpr int kMinEverydayRight = 11;
// The training takes about 70 s on an idle 2-core machine; a loaded one (a
// parallel ctest, a shared CI runner) can take several times that.
constexpr int kWalkthroughTrainTimeoutSeconds = 900;

const std::vector<std::string> kTexts = {"the screen was great and fast, I love it",
                                         "it arrived broken and the service was rude and slow", "an ordinary chair"};

TEST_F(E2eTest, TrainPredictExportImportAndRestartKeepBitIdenticalScores) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult health = Ctl({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;

  CommandResult train = Ctl({"train", "--task", "sentiment", "--data", Example("sentiment_train.csv"), "--validation",
                             Example("sentiment_validation.csv"), "--epochs", "2", "--seed", "7"});
  ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
  EXPECT_THAT(train.out + train.err, HasSubstr("SUCCEEDED"));

  std::vector<std::string> predict = {"predict", "--task", "sentiment", "--all-scores"};
  predict.insert(predict.end(), kTexts.begin(), kTexts.end());
  const nlohmann::json before = CtlJson(predict);
  ASSERT_EQ(before["predictions"].size(), kTexts.size()) << before.dump();
  EXPECT_EQ(before["version"], 1);
  for (const auto& p : before["predictions"]) {
    EXPECT_THAT(p["label"].get<std::string>(), ::testing::AnyOf("positive", "negative")) << p.dump();
    EXPECT_EQ(p["all_scores"].size(), 2u);
  }

  const std::string exported = dir_.Sub("sentiment.safetensors");
  CommandResult exp = Ctl({"tasks", "export", "sentiment", "--out", exported});
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  ASSERT_GT(std::filesystem::file_size(exported), 8u);
  CommandResult imp = Ctl({"tasks", "import", "sentiment-copy", exported});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  std::vector<std::string> predict_copy = predict;
  predict_copy[2] = "sentiment-copy";
  const nlohmann::json copy = CtlJson(predict_copy);
  EXPECT_EQ(copy["predictions"], before["predictions"]);

  // A graceful restart: both tasks survive, scores bit for bit (the JSON
  // carries every float at round-trip precision).
  EXPECT_EQ(StopServer(), 0) << server_->Log();
  EXPECT_THAT(server_->Log(), HasSubstr("stopped cleanly"));
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_EQ(CtlJson(predict)["predictions"], before["predictions"]);
  EXPECT_EQ(CtlJson(predict_copy)["predictions"], before["predictions"]);
  const nlohmann::json tasks = CtlJson({"tasks", "list"});
  EXPECT_THAT(tasks.dump(), HasSubstr("\"sentiment\""));
  EXPECT_THAT(tasks.dump(), HasSubstr("\"sentiment-copy\""));
  EXPECT_EQ(StopServer(), 0);
}

// The README's quickstart and walkthrough: the server on the project's
// pretrained default encoder (models/adapterd-mini-en, what scripts/run.sh
// serves), trained with adapterctl on the walkthrough dataset (WordNet noun
// supersenses: 6 balanced labels, majority class 16.7%), then judged on
// held-out test examples it never saw, through adapterctl predict.
TEST_F(E2eTest, DefaultModelLearnsTheWalkthroughDatasetWellAboveMajority) {
  ASSERT_NO_FATAL_FAILURE(StartServer(kSourceDir + "/models/adapterd-mini-en", "2"));
  CommandResult train = Ctl({"train", "--task", "supersenses", "--data", Example("wordnet_supersenses_train.csv"),
                             "--validation", Example("wordnet_supersenses_validation.csv"), "--epochs",
                             kWalkthroughEpochs, "--learning-rate", kWalkthroughLr, "--seed", "1"},
                            /*stdin_text=*/"", kWalkthroughTrainTimeoutSeconds);
  ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
  EXPECT_THAT(train.out + train.err, HasSubstr("SUCCEEDED"));

  ASSERT_OK_AND_ASSIGN(const std::vector<v1::Example> test,
                       adapterd::ReadDatasetFile(Example("wordnet_supersenses_test.csv")));
  ASSERT_GE(test.size(), kTestExamples);
  std::string texts;
  std::map<std::string, int> majority;
  for (size_t i = 0; i < kTestExamples; ++i) {
    absl::StrAppend(&texts, test[i].text(), "\n");
    ++majority[test[i].label()];
  }
  const std::string file = dir_.Sub("test_texts.txt");
  std::ofstream(file) << texts;
  const nlohmann::json p = CtlJson({"predict", "--task", "supersenses", "--file", file});
  ASSERT_EQ(p["predictions"].size(), kTestExamples) << p.dump();
  size_t correct = 0;
  for (size_t i = 0; i < kTestExamples; ++i) {
    correct += p["predictions"][i]["label"].get<std::string>() == test[i].label() ? 1 : 0;
  }
  int most = 0;
  for (const auto& [label, n] : majority) most = std::max(most, n);
  const double accuracy = static_cast<double>(correct) / kTestExamples;
  const double majority_rate = static_cast<double>(most) / kTestExamples;
  std::cout << "walkthrough: test accuracy " << accuracy << " (" << correct << "/" << kTestExamples
            << "), majority class " << majority_rate << "\n";
  RecordProperty("test_accuracy", std::to_string(accuracy));
  // kMinTestAccuracy (see its definition) is over four times the majority rate.
  EXPECT_LT(majority_rate, 0.2);
  EXPECT_GE(accuracy, kMinTestAccuracy) << correct << " of " << kTestExamples << " correct; majority class "
                                        << majority_rate;

  ASSERT_OK_AND_ASSIGN(const std::vector<v1::Example> everyday,
                       adapterd::ReadDatasetFile(Example("everyday_descriptions.csv")));
  ASSERT_EQ(everyday.size(), 12u);
  std::vector<std::string> everyday_predict = {"predict", "--task", "supersenses"};
  for (const v1::Example& e : everyday) everyday_predict.push_back(e.text());
  const nlohmann::json ep = CtlJson(everyday_predict);
  ASSERT_EQ(ep["predictions"].size(), everyday.size()) << ep.dump();
  int everyday_right = 0;
  for (size_t i = 0; i < everyday.size(); ++i) {
    const std::string label = ep["predictions"][i]["label"].get<std::string>();
    everyday_right += label == everyday[i].label() ? 1 : 0;
    std::cout << "everyday: " << everyday[i].text() << " -> " << label << " (expected " << everyday[i].label() << ")\n";
  }
  EXPECT_EQ(ep["predictions"][0]["label"], "animal") << "the README's first walkthrough example";
  EXPECT_EQ(ep["predictions"][1]["label"], "artifact") << "the README's second walkthrough example";
  EXPECT_GE(everyday_right, kMinEverydayRight);
  EXPECT_EQ(StopServer(), 0);

  // --dtype bf16 (what --dtype auto serves on CPUs with AMX or AVX512-BF16
  // where it measures bf16 faster;
  // elsewhere the ATen fallback, which keeps the attention in fp32)
  // against fp32 on the same adapters and the same held-out texts: the same
  // label for at least 99.5% of them (docs/PERFORMANCE.md has the figures on
  // both real datasets' whole test splits).
  auto serve = [&](std::vector<std::string> args) {
    extra_args_ = std::move(args);
    StartServer(kSourceDir + "/models/adapterd-mini-en", "2");
    const nlohmann::json out = CtlJson({"predict", "--task", "supersenses", "--all-scores", "--file", file});
    EXPECT_EQ(StopServer(), 0);
    return out;
  };
  // How many labels two servers' predictions share, and their largest
  // probability difference.
  auto compare = [&](const nlohmann::json& x, const nlohmann::json& y) -> std::pair<size_t, double> {
    EXPECT_EQ(x["predictions"].size(), kTestExamples);
    EXPECT_EQ(y["predictions"].size(), kTestExamples);
    size_t agree = 0;
    double max_diff = 0;
    for (size_t i = 0; i < std::min(x["predictions"].size(), y["predictions"].size()); ++i) {
      const auto& a = x["predictions"][i];
      const auto& b = y["predictions"][i];
      agree += a["label"] == b["label"] ? 1 : 0;
      std::map<std::string, double> scores;
      for (const auto& ls : a["all_scores"]) scores[ls["label"].get<std::string>()] = ls["score"].get<double>();
      EXPECT_EQ(b["all_scores"].size(), scores.size());
      for (const auto& ls : b["all_scores"]) {
        EXPECT_TRUE(scores.count(ls["label"].get<std::string>())) << ls.dump();
        max_diff = std::max(max_diff, std::abs(scores[ls["label"].get<std::string>()] - ls["score"].get<double>()));
      }
    }
    return {agree, max_diff};
  };
  const nlohmann::json fp32 = serve({"--dtype", "fp32"});
  const nlohmann::json bf16 = serve({"--dtype", "bf16"});
  const auto [agree, max_diff] = compare(fp32, bf16);
  std::cout << "walkthrough: bf16 vs fp32 argmax agreement " << agree << "/" << kTestExamples
            << ", largest probability difference " << max_diff << "\n";
  EXPECT_GE(static_cast<double>(agree), 0.995 * kTestExamples) << "bf16 and fp32 disagree too often";
  EXPECT_GT(max_diff, 0.0) << "the two servers did not compute in different dtypes";

  // --residual_stream serving (what auto chooses on CUDA) sums the residuals
  // in bf16 too: other probabilities than the fp32 stream's. On a CPU it
  // loses labels (99.3-99.4% on the real datasets, docs/PERFORMANCE.md), so
  // only a bound well below P3's target is asserted here.
  const nlohmann::json bf16_stream = serve({"--dtype", "bf16", "--residual_stream", "serving"});
  const auto [stream_vs_wide_agree, stream_vs_wide_diff] = compare(bf16, bf16_stream);
  const auto [stream_agree, stream_diff] = compare(fp32, bf16_stream);
  std::cout << "walkthrough: bf16 with a bf16 residual stream vs fp32: argmax agreement " << stream_agree << "/"
            << kTestExamples << ", largest probability difference " << stream_diff << "\n";
  EXPECT_GT(stream_vs_wide_diff, 0.0) << "--residual_stream serving changed nothing";
  EXPECT_GE(static_cast<double>(stream_agree), 0.98 * kTestExamples);
  (void)stream_vs_wide_agree;
}

TEST_F(E2eTest, SigkillDuringTrainingThenRestartResumesTheJobToSuccess) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  // Long enough (~12 steps per epoch) to be killed in the middle.
  const nlohmann::json job = CtlJson({"train", "--detach", "--task", "topics", "--data", Example("topics_train.csv"),
                                      "--epochs", "30", "--seed", "3"});
  const std::string job_id = job.value("job_id", "");
  ASSERT_FALSE(job_id.empty()) << job.dump();

  // Wait until it has passed an epoch end (a checkpoint) and is mid-epoch.
  int64_t step_before_kill = 0;
  const bool progressed = PollUntil(
      [&] {
        const nlohmann::json j = CtlJson({"jobs", "get", job_id});
        if (j.value("state", "") != "JOB_STATE_RUNNING" || !j.contains("progress")) return false;
        step_before_kill = std::stoll(j["progress"].value("step", std::string("0")));
        return step_before_kill >= 20;
      },
      absl::Minutes(5), absl::Milliseconds(200));
  ASSERT_TRUE(progressed) << server_->Log();
  server_->Signal(SIGKILL);
  ASSERT_OK_AND_ASSIGN(int code, server_->Wait(absl::Minutes(1)));
  EXPECT_EQ(code, 128 + SIGKILL);

  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult watch = Ctl({"jobs", "watch", job_id});
  EXPECT_EQ(watch.exit_code, 0) << watch.err << watch.out;
  EXPECT_THAT(watch.out + watch.err, HasSubstr("resumed from the checkpoint at step"));
  const nlohmann::json done = CtlJson({"jobs", "get", job_id});
  EXPECT_EQ(done.value("state", ""), "JOB_STATE_SUCCEEDED") << done.dump();
  EXPECT_EQ(done.value("result_version", ""), "1") << done.dump();
  const nlohmann::json p = CtlJson({"predict", "--task", "topics", "the team won the match"});
  EXPECT_EQ(p["predictions"].size(), 1u);
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(E2eTest, PrometheusScrapesThePredictCountTheTestGenerated) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult train =
      Ctl({"train", "--task", "sentiment", "--data", Example("sentiment_train.csv"), "--epochs", "1"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  constexpr int kPredicts = 7;
  for (int i = 0; i < kPredicts; ++i) {
    ASSERT_EQ(Ctl({"predict", "--task", "sentiment", kTexts[static_cast<size_t>(i) % kTexts.size()]}).exit_code, 0);
  }

  // Our own scrape passes promtool's checks.
  ASSERT_OK_AND_ASSIGN(HttpResponse scrape, HttpGet(metrics_port_, "/metrics", absl::Seconds(30)));
  ASSERT_EQ(scrape.status, 200);
  EXPECT_THAT(scrape.content_type, HasSubstr("version=0.0.4"));
  EXPECT_THAT(scrape.body, HasSubstr("adapterd_model_info{"));
  // The endpoint has no authentication: it must not show where the model
  // lives on the server's disk (docs/METRICS.md, "Exposure").
  EXPECT_THAT(scrape.body, Not(HasSubstr(model_root_->Sub("model"))));
  EXPECT_THAT(scrape.body, Not(HasSubstr("model_dir")));
  // Memory by owner (docs/METRICS.md): the encoder and the trained task
  // are on the C heap, and training wrote records into RocksDB's memtables.
  // A sanitizer build's adapterd allocates through the sanitizer, not
  // glibc's malloc, whose accounting the heap series report: there they
  // exist but say nothing.
  const std::optional<double> heap_in_use = SampleValue(scrape.body, "adapterd_process_heap_bytes{state=\"in_use\"}");
  ASSERT_TRUE(heap_in_use.has_value());
  if (!kSanitizedAllocator) {
    EXPECT_GT(*heap_in_use, 1 << 20);
  }
  EXPECT_TRUE(SampleValue(scrape.body, "adapterd_process_heap_bytes{state=\"free\"}").has_value());
  EXPECT_GE(SampleValue(scrape.body, "adapterd_process_heap_released_bytes_total").value_or(-1), 0);
  EXPECT_GT(SampleValue(scrape.body, "adapterd_storage_memory_bytes{kind=\"memtables\"}").value_or(0), 0);
  for (const char* kind : {"table_readers", "block_cache"}) {
    EXPECT_GE(SampleValue(scrape.body, absl::StrCat("adapterd_storage_memory_bytes{kind=\"", kind, "\"}")).value_or(-1),
              0)
        << kind;
  }
  ASSERT_OK_AND_ASSIGN(CommandResult lint,
                       RunCommand({"/usr/bin/promtool", "check", "metrics"}, absl::Minutes(1), scrape.body));
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;

  // A real Prometheus scraping every second.
  ASSERT_OK_AND_ASSIGN(int prom_port, PickFreePort());
  const std::string config = dir_.Sub("prometheus.yml");
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: adapterd\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << metrics_port_ << "']\n";
  ASSERT_OK_AND_ASSIGN(
      Process prometheus,
      Process::Start({"/usr/bin/prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir_.Sub("tsdb"),
                      "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                     dir_.Sub("prometheus.log")));
  const std::string query =
      "/api/v1/query?query=" + UrlEncode("sum(adapterd_requests_total{method=\"Predict\",code=\"OK\"})");
  std::string last;
  const bool seen = PollUntil(
      [&] {
        absl::StatusOr<HttpResponse> r = HttpGet(prom_port, query, absl::Seconds(5));
        if (!r.ok() || r->status != 200) return false;
        last = r->body;
        nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
        if (j.is_discarded() || j.value("status", "") != "success") return false;
        const auto& result = j["data"]["result"];
        return result.size() == 1 && result[0]["value"][1] == std::to_string(kPredicts);
      },
      absl::Seconds(120), absl::Milliseconds(500));
  EXPECT_TRUE(seen) << "last answer: " << last << "\nprometheus log:\n" << prometheus.Log();
  prometheus.Signal(SIGTERM);
  (void)prometheus.Wait(absl::Seconds(30));
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace adapterd::e2e
