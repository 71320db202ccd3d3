// Stored data written by an earlier adapterd reads back the same with today's.
//
// Each directory under tests/e2e/compat/ (named by the commit whose binaries
// wrote it; tests/e2e/compat/make_fixture.sh wrote it and says what it holds)
// is a data directory those binaries left behind when killed mid-training,
// and the answers they gave about it before. This test starts today's real
// `adapterd` on a copy of it and checks, through the real `adapterctl`:
// - every finished job, its whole event log, every dataset and the trained
//   tasks read back exactly as that binary answered (the protos' JSON: every
//   field it printed, with the same value; fields added since may be printed
//   too), and their predictions, computed afresh, match its scores to 1e-6;
// - the job killed while RUNNING resumes from its stored checkpoint and
//   succeeds, and the job that was QUEUED behind it runs too.
// A change to the storage records' schema that old data cannot meet (a field
// renumbered or retyped, a key changed) fails here.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cpu_features.h"
#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

namespace fs = std::filesystem;

std::string CompatRoot() { return kSourceDir + "/tests/e2e/compat"; }

// The fixture directories (each holds jobs.env), sorted.
std::vector<std::string> FixtureNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(CompatRoot())) {
    if (fs::exists(entry.path() / "jobs.env")) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json ReadJson(const fs::path& path) {
  nlohmann::json j = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

// jobs.env: NAME=job id lines ('#' starts a comment).
std::map<std::string, std::string> ReadJobIds(const fs::path& path) {
  std::map<std::string, std::string> ids;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipWhitespace())) {
    if (absl::StartsWith(line, "#")) continue;
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    ids[kv.first] = kv.second;
  }
  return ids;
}

// Whether `now` answers everything `then` did: every key of `then` is in
// `now` with the same value (recursively; arrays element by element), numbers
// within `tolerance` of each other (0: equal). Keys only `now` has are fields
// added since the fixture was written. Returns where they differ, "" when
// they do not.
std::string Difference(const nlohmann::json& now, const nlohmann::json& then, double tolerance = 0,
                       const std::string& at = "") {
  if (then.is_object()) {
    if (!now.is_object()) return at + ": not an object";
    for (const auto& [key, value] : then.items()) {
      if (!now.contains(key)) return at + "." + key + ": missing";
      if (std::string d = Difference(now[key], value, tolerance, at + "." + key); !d.empty()) return d;
    }
    return "";
  }
  if (then.is_array()) {
    if (!now.is_array() || now.size() != then.size()) return at + ": arrays of different sizes";
    for (size_t i = 0; i < then.size(); ++i) {
      if (std::string d = Difference(now[i], then[i], tolerance, at + "[" + std::to_string(i) + "]"); !d.empty())
        return d;
    }
    return "";
  }
  if (tolerance > 0 && now.is_number() && then.is_number() &&
      std::abs(now.get<double>() - then.get<double>()) <= tolerance) {
    return "";
  }
  return now == then ? "" : at + ": " + now.dump() + " now, " + then.dump() + " then";
}

class StoredDataCompatTest : public ServerProcessTest, public ::testing::WithParamInterface<std::string> {
 protected:
  // `adapterctl --json` output that may span lines, parsed; `exit_code` is
  // the one expected (12: watching a CANCELLED job).
  nlohmann::json CtlJsonOut(const std::vector<std::string>& args, int exit_code = 0) {
    std::vector<std::string> all = {"--json"};
    all.insert(all.end(), args.begin(), args.end());
    CommandResult r = Ctl(all);
    EXPECT_EQ(r.exit_code, exit_code) << r.err << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
};

TEST_P(StoredDataCompatTest, EveryRecordReadsBackAsItsWriterAnsweredAndInterruptedJobsResume) {
  const fs::path fixture = fs::path(CompatRoot()) / GetParam();
  const fs::path expected = fixture / "expected";
  std::map<std::string, std::string> jobs = ReadJobIds(fixture / "jobs.env");
  for (const char* name : {"DONE", "RETRAINED", "CANCELLED", "RUNNING", "QUEUED"}) {
    ASSERT_FALSE(jobs[name].empty()) << name << " missing from jobs.env";
  }
  fs::copy(fixture / "data", dir_.Sub("data"), fs::copy_options::recursive);
  // The fixtures' predictions were answered in bf16 (--dtype auto on a CPU
  // with avx512_bf16, before auto measured); auto serves fp32 on a CPU
  // without it, and on one where bf16 measures slower.
  extra_args_ = {"--dtype", "bf16"};
  ASSERT_NO_FATAL_FAILURE(StartServer());

  // Finished jobs and their whole event logs (a watch of a finished job
  // prints the job and every event, then ends).
  for (const std::string name : {"done", "retrained", "cancelled"}) {
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(c));
    const std::string& id = jobs[upper];
    EXPECT_EQ(Difference(CtlJsonOut({"jobs", "get", id}), ReadJson(expected / ("job-" + name + ".json"))), "") << name;
    EXPECT_EQ(Difference(CtlJsonOut({"jobs", "watch", id}, name == "cancelled" ? 12 : 0),
                         ReadJson(expected / ("events-" + name + ".json"))),
              "")
        << name;
  }
  EXPECT_EQ(Difference(CtlJsonOut({"datasets", "list"}), ReadJson(expected / "datasets.json")), "");
  EXPECT_EQ(Difference(CtlJsonOut({"tasks", "get", "sentiment"}), ReadJson(expected / "task.json")), "");
  // The stored adapters on the regenerated encoder score as they did, to
  // float32 rounding. The scores are computed afresh, and the order of the
  // sums follows the CPU's kernels: OpenBLAS's AVX-512 or AVX2 ones, ATen's
  // AVX-512, AVX2 or plain ones move them by up to 6e-8, where serving the
  // same weights in fp32 instead of bf16 moves them by 2e-4 to 7e-4.
  // The fixture was answered by native bf16 products (AVX512-BF16). A CPU
  // without them computes each bf16 product as the fp32 product rounded
  // once to bf16 (cpu_kernels.h): the same value up to the order of the
  // fp32 sums, which now and then tips a bf16 rounding the other way, and
  // through the encoder's layers that moves a score by up to ~1e-3
  // (1.0e-3 measured on an AVX2-only AMD EPYC, 2026-12-07). A wrong or
  // misread adapter moves scores by far more.
  const double kScoreTolerance = CurrentFastBf16Feature().empty() ? 3e-3 : 1e-6;
  EXPECT_EQ(Difference(CtlJsonOut({"predict", "--task", "sentiment", "--all-scores", "great and fast, I love it",
                                   "broken, rude and slow"}),
                       ReadJson(expected / "predict.json"), kScoreTolerance),
            "");
  // Every task listed then is listed the same now (the resumed and queued
  // jobs add tasks of their own).
  const nlohmann::json tasks_now = CtlJsonOut({"tasks", "list"});
  const nlohmann::json tasks_then = ReadJson(expected / "tasks.json");
  for (const nlohmann::json& task : tasks_then["tasks"]) {
    bool found = false;
    for (const nlohmann::json& now : tasks_now["tasks"]) {
      if (now["task_id"] == task["task_id"]) {
        found = true;
        EXPECT_EQ(Difference(now, task), "");
      }
    }
    EXPECT_TRUE(found) << task["task_id"];
  }

  // The job killed while RUNNING resumes from its checkpoint and succeeds;
  // the QUEUED one runs after it.
  for (const char* name : {"RUNNING", "QUEUED"}) {
    CommandResult watch = Ctl({"jobs", "watch", jobs[name]}, "", 600);
    EXPECT_EQ(watch.exit_code, 0) << name << ": " << watch.err << watch.out;
  }
  const nlohmann::json resumed = CtlJsonOut({"jobs", "watch", jobs["RUNNING"]});
  EXPECT_EQ(resumed["job"]["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(resumed["job"]["attempts"], 2);
  int64_t resumed_at = -1;
  for (const nlohmann::json& event : resumed["events"]) {
    if (!event.contains("warning") || event["warning"]["kind"] != "resumed") continue;
    const std::string message = event["warning"]["message"];
    std::vector<std::string> words = absl::StrSplit(message, ' ');
    ASSERT_GE(words.size(), 7u) << message;
    ASSERT_TRUE(absl::SimpleAtoi(words[6], &resumed_at)) << message;  // "resumed from the checkpoint at step N ..."
  }
  EXPECT_GE(resumed_at, 16) << "the job did not resume from its stored checkpoint";
  EXPECT_EQ(CtlJsonOut({"jobs", "get", jobs["QUEUED"]})["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(Ctl({"predict", "--task", "resumed", "great and fast"}).exit_code, 0);
  EXPECT_EQ(StopServer(), 0);
}

INSTANTIATE_TEST_SUITE_P(WrittenBy, StoredDataCompatTest, ::testing::ValuesIn(FixtureNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return "commit_" + info.param; });

}  // namespace
}  // namespace adapterd::e2e
