// Every task kind end to end through the real `adapterd` and `adapterctl`
// with the walkthrough datasets of examples/kinds/ (README, "Every kind of
// task"): upload and train with --kind, watch with the kind's metric,
// predict (each kind's fields in --json), export, import under a new id
// (identical results), a graceful restart (identical results, bit for bit:
// the JSON carries every float at round-trip precision), delete. Then the
// Predict refusals of the wrong shape for a kind, and training a QA task
// leaves a classification task's stored bytes and scores untouched. Last,
// AdapterHub adapter directories import through adapterctl and REST and
// predict what an independent PyTorch reference computed for them; a task
// exports as an AdapterHub directory the reference loads, and one whose
// LayerNorms were trained is refused unless their loss is accepted.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "common/file_util.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"
#include "common/testing/subprocess.h"
#include "common/zip_archive.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

using ::testing::HasSubstr;

class TaskKindsE2eTest : public ServerProcessTest {};

struct Kind {
  std::string task;  // the task's id
  std::string flag;  // adapterctl train --kind
  std::string data, validation;
  std::string metric;                // how adapterctl names the kind's metric
  std::vector<std::string> predict;  // predict's arguments after --task
  std::string field;                 // the Prediction field the kind fills
};

std::vector<Kind> Kinds() {
  return {
      {"aspects",
       "multi-label",
       "kinds/aspects_train.jsonl",
       "kinds/aspects_validation.jsonl",
       "val micro-F1",
       {"--all-scores", "--threshold", "0.4", "it arrived the next day, the price was fair", "the staff were rude"},
       "labels"},
      {"ratings",
       "regression",
       "kinds/ratings_train.csv",
       "kinds/ratings_validation.csv",
       "val Spearman",
       {"works perfectly, it is blue", "complete waste of money"},
       "value"},
      {"people",
       "ner",
       "kinds/people_train.jsonl",
       "kinds/people_validation.jsonl",
       "val entity F1",
       {"Grace Hopper moved to Zürich in the spring .", "In Tokyo , Alan Turing joined NASA ."},
       "entities"},
      {"biographies",
       "qa",
       "kinds/biographies_train.json",
       "kinds/biographies_validation.json",
       "val SQuAD F1",
       {"--top-k", "2", "Where was Ada Lovelace born?", "--context",
        "Ada Lovelace was born in London in 1815. Ada became a mathematician.", "Who did Alan Turing work for?",
        "--context", "Alan Turing was born in Paris in 1912. Later Turing worked for IBM."},
       "answers"},
  };
}

TEST_F(TaskKindsE2eTest, EveryKindTrainsServesMovesSurvivesARestartAndIsDeleted) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  std::map<std::string, nlohmann::json> before;
  for (const Kind& k : Kinds()) {
    SCOPED_TRACE(k.task);
    CommandResult train = Ctl({"train", "--task", k.task, "--kind", k.flag, "--data", Example(k.data), "--validation",
                               Example(k.validation), "--epochs", "1", "--seed", "7"},
                              "", 600);
    ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
    EXPECT_THAT(train.out + train.err, HasSubstr("SUCCEEDED"));
    EXPECT_THAT(train.out + train.err, HasSubstr(k.metric));

    std::vector<std::string> predict = {"predict", "--task", k.task};
    predict.insert(predict.end(), k.predict.begin(), k.predict.end());
    before[k.task] = CtlJson(predict);
    const nlohmann::json& p = before[k.task];
    ASSERT_EQ(p["predictions"].size(), 2u) << p.dump();
    for (const auto& row : p["predictions"]) {
      EXPECT_TRUE(row.contains(k.field)) << row.dump();
      EXPECT_FALSE(row.contains("label")) << row.dump();
    }
    const nlohmann::json task = CtlJson({"tasks", "get", k.task});
    EXPECT_NE(task.dump().find("TASK_KIND_"), std::string::npos) << task.dump();

    const std::string exported = dir_.Sub(k.task + ".safetensors");
    ASSERT_EQ(Ctl({"tasks", "export", k.task, "--out", exported}).exit_code, 0);
    ASSERT_EQ(Ctl({"tasks", "import", k.task + "-copy", exported}).exit_code, 0);
    std::vector<std::string> copy = predict;
    copy[2] = k.task + "-copy";
    EXPECT_EQ(CtlJson(copy)["predictions"], p["predictions"]);
  }
  // QA's answers are spans of the contexts, at their offsets.
  for (const auto& row : before["biographies"]["predictions"]) {
    ASSERT_EQ(row["answers"].size(), 2u) << row.dump();
    const std::string context = row["context"];
    for (const auto& a : row["answers"]) {
      const std::string text = a["text"];
      if (text.empty()) continue;  // "no answer"
      EXPECT_NE(context.find(text), std::string::npos) << a.dump();
    }
  }

  EXPECT_EQ(StopServer(), 0) << server_->Log();
  ASSERT_NO_FATAL_FAILURE(StartServer());
  for (const Kind& k : Kinds()) {
    SCOPED_TRACE(k.task);
    std::vector<std::string> predict = {"predict", "--task", k.task};
    predict.insert(predict.end(), k.predict.begin(), k.predict.end());
    EXPECT_EQ(CtlJson(predict)["predictions"], before[k.task]["predictions"]);
    ASSERT_EQ(Ctl({"tasks", "delete", k.task}).exit_code, 0);
    CommandResult gone = Ctl(predict);
    EXPECT_NE(gone.exit_code, 0);
    EXPECT_THAT(gone.err, HasSubstr(absl::StrCat("not found: task 'default/", k.task, "' not found")));
  }
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(TaskKindsE2eTest, BadDatasetsAndWrongShapedPredictsAreInvalidArgumentAndQaLeavesOtherTasksAlone) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  // A classification task first; its stored bytes and scores are checked
  // after a QA task trains.
  ASSERT_EQ(Ctl({"train", "--task", "sentiment", "--data", Example("sentiment_train.csv"), "--epochs", "1"}, "", 600)
                .exit_code,
            0);
  const std::vector<std::string> sentiment = PredictArgs("sentiment");
  const nlohmann::json scores = CtlJson(sentiment);
  const std::string before_file = dir_.Sub("before.safetensors");
  ASSERT_EQ(Ctl({"tasks", "export", "sentiment", "--out", before_file}).exit_code, 0);

  // Classification examples are no QA dataset; an answer not at its offset,
  // tags that are not BIO: each refused naming the example and the rule.
  CommandResult wrong =
      Ctl({"train", "--task", "qa-of-reviews", "--kind", "qa", "--data", Example("sentiment_train.csv")});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.err, HasSubstr("train example 0: an extractive QA example has a question"));
  const std::string moved = dir_.Sub("moved.jsonl");
  ASSERT_OK(WriteFileAtomically(
      moved, R"({"question": "Who?", "context": "Ada met Alan.", "answers": [{"text": "Alan", "answer_start": 3}]})"
             "\n"));
  CommandResult offset = Ctl({"train", "--task", "qa-moved", "--kind", "qa", "--data", moved});
  EXPECT_THAT(offset.err, HasSubstr("answers[0] 'Alan' is not at answer_start 3 of the context (found ' met')"));
  const std::string iob = dir_.Sub("iob.jsonl");
  ASSERT_OK(WriteFileAtomically(iob, R"({"tokens": ["Ada", "Lovelace"], "tags": ["I-PER", "I-PER"]})"
                                     "\n"));
  CommandResult tags = Ctl({"train", "--task", "ner-bad", "--kind", "ner", "--data", iob});
  EXPECT_THAT(tags.err, HasSubstr("tags[0] 'I-PER' does not continue an entity of type PER"));

  // A QA task trains beside it ...
  ASSERT_EQ(Ctl({"train", "--task", "bios", "--kind", "qa", "--data", Example("kinds/biographies_train.json"),
                 "--epochs", "1"},
                "", 600)
                .exit_code,
            0);
  // ... and a question without a context is refused.
  CommandResult no_context = Ctl({"predict", "--task", "bios", "Where was Ada born?"});
  EXPECT_NE(no_context.exit_code, 0);
  EXPECT_THAT(no_context.err, HasSubstr("give each question (texts) its context (text_pairs)"));

  // The classification task is untouched: the same bytes, the same scores.
  const std::string after_file = dir_.Sub("after.safetensors");
  ASSERT_EQ(Ctl({"tasks", "export", "sentiment", "--out", after_file}).exit_code, 0);
  ASSERT_OK_AND_ASSIGN(std::string before_bytes, ReadFileToString(before_file));
  ASSERT_OK_AND_ASSIGN(std::string after_bytes, ReadFileToString(after_file));
  EXPECT_TRUE(before_bytes == after_bytes);
  EXPECT_EQ(CtlJson(sentiment)["predictions"], scores["predictions"]);
  EXPECT_EQ(StopServer(), 0);
}

// tests/model/testdata/adapterhub/reference: AdapterHub directories for the
// golden tiny BERT and the logits a plain-PyTorch reference computed for
// golden/inputs.json, whose row 1 is "[CLS] tok8 tok24 [SEP]".
std::string HubReference(const std::string& c) {
  return kSourceDir + "/tests/model/testdata/adapterhub/reference/" + c;
}
std::vector<double> ReferenceRow1(const std::string& c) {
  absl::StatusOr<std::string> text = ReadFileToString(HubReference(c) + "/expected.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text)["logits"][1].get<std::vector<double>>() : std::vector<double>{};
}

TEST_F(TaskKindsE2eTest, AdapterHubDirectoriesImportAndPredictWhatTheReferenceComputed) {
  extra_args_ = {"--max_seq_len", "24", "--http_listen", "127.0.0.1:0"};
  ASSERT_NO_FATAL_FAILURE(StartServer(kSourceDir + "/tests/model/testdata/golden/model"));
  const int http_port = PortFromLog(server_->Log(), "HTTP");
  ASSERT_GT(http_port, 0);

  // adapterctl zips the directory; the server says what it could not check.
  const CommandResult imported = Ctl({"--json", "tasks", "import", "--format", "adapterhub", "hub-sentiment",
                                      HubReference("swish_classification") + "/adapter"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_THAT(imported.err, HasSubstr("warning: an AdapterHub directory carries no fingerprint"));
  const nlohmann::json task = nlohmann::json::parse(imported.out);
  EXPECT_EQ(task["task_kind"], "TASK_KIND_SEQUENCE_CLASSIFICATION");
  EXPECT_EQ(task["labels"], nlohmann::json({"neg", "neu", "pos"}));
  const nlohmann::json predicted =
      CtlJson({"predict", "--task", "hub-sentiment", "--all-scores", "tok8 tok24"})["predictions"][0]["all_scores"];
  const std::vector<double> logits = ReferenceRow1("swish_classification");
  ASSERT_EQ(predicted.size(), logits.size());
  double sum = 0;
  for (double l : logits) sum += std::exp(l);
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_NEAR(predicted[i]["score"].get<double>(), std::exp(logits[i]) / sum, 1e-5) << predicted.dump();
  }

  // REST: a zip of the directory (its directory part ignored), regression.
  ZipFiles files;
  for (const auto& entry : std::filesystem::directory_iterator(HubReference("relu_regression") + "/adapter")) {
    ASSERT_OK_AND_ASSIGN(files["adapter/" + entry.path().filename().string()], ReadFileToString(entry.path().string()));
  }
  ASSERT_OK_AND_ASSIGN(const std::string zip, WriteZipFiles(files));
  const HttpHeaders octets = {{"Content-Type", "application/octet-stream"}};
  absl::StatusOr<HttpResponse> r =
      HttpRequest(http_port, "POST", "/v1/tasks/hub-ratings:import?format=ADAPTER_FORMAT_ADAPTERHUB", zip, octets,
                  absl::Minutes(1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(nlohmann::json::parse(r->body)["importWarning"].get<std::string>(), HasSubstr("no fingerprint"));
  r = HttpRequest(http_port, "POST", "/v1/tasks/hub-ratings:predict", R"({"texts": ["tok8 tok24"]})",
                  {{"Content-Type", "application/json"}}, absl::Minutes(1));
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  EXPECT_NEAR(nlohmann::json::parse(r->body)["predictions"][0]["value"].get<double>(),
              ReferenceRow1("relu_regression")[0], 1e-5);

  // Stored as an adapterd file: exported and imported again, it predicts
  // the same, bit for bit.
  const std::string file = dir_.Sub("hub-sentiment.safetensors");
  ASSERT_EQ(Ctl({"tasks", "export", "hub-sentiment", "--out", file}).exit_code, 0);
  ASSERT_EQ(Ctl({"tasks", "import", "hub-sentiment-copy", file}).exit_code, 0);
  EXPECT_EQ(CtlJson({"predict", "--task", "hub-sentiment-copy", "--all-scores",
                     "tok8 tok24"})["predictions"][0]["all_scores"],
            predicted);

  // What adapterd does not compute yet, and a damaged zip, store nothing
  // and leave the server serving.
  const CommandResult pfeiffer = Ctl({"tasks", "import", "--format", "adapterhub", "hub-pfeiffer",
                                      kSourceDir + "/tests/model/testdata/adapterhub/pfeiffer"});
  EXPECT_EQ(pfeiffer.exit_code, client::kExitError);
  EXPECT_THAT(pfeiffer.err, HasSubstr("not supported: adapter_config.json: the pfeiffer placement"));
  r = HttpRequest(http_port, "POST", "/v1/tasks/hub-broken:import?format=ADAPTER_FORMAT_ADAPTERHUB",
                  zip.substr(0, zip.size() / 2), octets, absl::Minutes(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("the AdapterHub zip"));
  const CommandResult directory_without_format =
      Ctl({"tasks", "import", "hub-x", HubReference("relu_regression") + "/adapter"});
  EXPECT_EQ(directory_without_format.exit_code, client::kExitInvalidArgument);
  EXPECT_THAT(directory_without_format.err, HasSubstr("--format adapterhub"));
  EXPECT_EQ(CtlJson({"tasks", "list"})["tasks"].size(), 3u);
}

TEST_F(TaskKindsE2eTest, TasksExportAsAdapterHubDirectoriesTheReferenceLoads) {
  extra_args_ = {"--max_seq_len", "24", "--http_listen", "127.0.0.1:0"};
  ASSERT_NO_FATAL_FAILURE(StartServer(kSourceDir + "/tests/model/testdata/golden/model"));
  const int http_port = PortFromLog(server_->Log(), "HTTP");
  ASSERT_GT(http_port, 0);
  ASSERT_EQ(Ctl({"tasks", "import", "--format", "adapterhub", "hub-sentiment",
                 HubReference("swish_classification") + "/adapter"})
                .exit_code,
            0);

  // Exported as a directory, with exactly the library's four files ...
  const std::string out = dir_.Sub("exported");
  const CommandResult exported = Ctl({"tasks", "export", "--format", "adapterhub", "hub-sentiment", "--out", out});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(out)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"adapter_config.json", "head_config.json", "pytorch_adapter.bin",
                                             "pytorch_model_head.bin"}));
  // ... which the independent reference loads as load_adapter would and
  // runs to the logits it computed for the original directory ...
  const std::vector<std::string> reference = {
      "/usr/bin/python3", kSourceDir + "/tests/model/testdata/adapterhub/make_reference.py", "--read", out};
  absl::StatusOr<adapterd::testing::RunResult> ran = adapterd::testing::RunProgram(reference);
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_EQ(ran->exit_code, 0) << ran->err;
  const std::vector<double> row1 = nlohmann::json::parse(ran->out)["logits"][1].get<std::vector<double>>();
  const std::vector<double> expected = ReferenceRow1("swish_classification");
  ASSERT_EQ(row1.size(), expected.size());
  for (size_t i = 0; i < row1.size(); ++i) EXPECT_NEAR(row1[i], expected[i], 1e-5);
  // ... and that imports back as a task predicting the same, bit for bit.
  ASSERT_EQ(Ctl({"tasks", "import", "--format", "adapterhub", "hub-back", out}).exit_code, 0);
  EXPECT_EQ(CtlJson({"predict", "--task", "hub-back", "--all-scores", "tok8 tok24"})["predictions"],
            CtlJson({"predict", "--task", "hub-sentiment", "--all-scores", "tok8 tok24"})["predictions"]);
  // A directory that is not empty is not written into.
  const CommandResult again = Ctl({"tasks", "export", "--format", "adapterhub", "hub-sentiment", "--out", out});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("not empty"));

  // REST: the zip of the directory.
  absl::StatusOr<HttpResponse> r = HttpRequest(
      http_port, "GET", "/v1/tasks/hub-sentiment:export?format=ADAPTER_FORMAT_ADAPTERHUB", "", {}, absl::Minutes(1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->content_type, "application/zip");
  ASSERT_OK_AND_ASSIGN(const ZipFiles zipped, ReadZipFiles(r->body, {}));
  ASSERT_OK_AND_ASSIGN(const std::string on_disk, ReadFileToString(out + "/pytorch_adapter.bin"));
  ASSERT_EQ(zipped.size(), 4u);
  EXPECT_TRUE(zipped.at("pytorch_adapter.bin") == on_disk);

  // A task trained here trains its LayerNorms (the paper's regime): the
  // format cannot hold them, so the export is refused, naming the way out,
  // unless the loss is accepted.
  const std::string data = dir_.Sub("tok.csv");
  std::string csv = "text,label\n";
  for (int i = 0; i < 16; ++i) csv += absl::StrCat("tok", 8 + i % 4, " tok", 20 + i % 3, ",", i % 2 ? "a" : "b", "\n");
  ASSERT_OK(WriteFileAtomically(data, csv));
  ASSERT_EQ(Ctl({"train", "--task", "trained", "--data", data, "--epochs", "1"}, "", 300).exit_code, 0);
  const CommandResult refused =
      Ctl({"tasks", "export", "--format", "adapterhub", "trained", "--out", dir_.Sub("trained")});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("LayerNorms were trained"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("trained")));
  r = HttpRequest(http_port, "GET", "/v1/tasks/trained:export?format=ADAPTER_FORMAT_ADAPTERHUB", "", {},
                  absl::Minutes(1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 400) << r->body;
  const nlohmann::json error = nlohmann::json::parse(r->body);
  EXPECT_EQ(error["code"], 9) << r->body;  // FAILED_PRECONDITION
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("LayerNorms were trained"));
  const CommandResult accepted = Ctl({"tasks", "export", "--format", "adapterhub", "--accept-layer-norm-loss",
                                      "trained", "--out", dir_.Sub("trained.zip")});
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
  ASSERT_OK_AND_ASSIGN(const std::string trained_zip, ReadFileToString(dir_.Sub("trained.zip")));
  ASSERT_OK_AND_ASSIGN(const ZipFiles trained_files, ReadZipFiles(trained_zip, {}));
  EXPECT_EQ(trained_files.size(), 4u);
  // Trained in AdapterHub's regime, the LayerNorms stay the encoder's: the
  // export needs nothing accepted, and imports back predicting the same.
  ASSERT_EQ(
      Ctl({"train", "--task", "frozen", "--data", data, "--epochs", "1", "--freeze-layer-norms"}, "", 300).exit_code,
      0);
  const nlohmann::json frozen_job = CtlJson({"jobs", "list", "--task", "frozen"})["jobs"][0];
  EXPECT_EQ(frozen_job["hyperparameters"]["freeze_layer_norms"], true) << frozen_job.dump();
  const CommandResult frozen_export =
      Ctl({"tasks", "export", "--format", "adapterhub", "frozen", "--out", dir_.Sub("frozen")});
  ASSERT_EQ(frozen_export.exit_code, 0) << frozen_export.err;
  ASSERT_EQ(Ctl({"tasks", "import", "--format", "adapterhub", "frozen-back", dir_.Sub("frozen")}).exit_code, 0);
  EXPECT_EQ(CtlJson({"predict", "--task", "frozen-back", "--all-scores", "tok9 tok21"})["predictions"],
            CtlJson({"predict", "--task", "frozen", "--all-scores", "tok9 tok21"})["predictions"]);
  // The flag belongs to the AdapterHub format only.
  const CommandResult flag_alone =
      Ctl({"tasks", "export", "--accept-layer-norm-loss", "trained", "--out", dir_.Sub("x.adapter")});
  EXPECT_EQ(flag_alone.exit_code, client::kExitInvalidArgument);
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace adapterd::e2e
