// API contracts about what gets stored, through a real in-process server
// (RocksDB in a temp dir, the tiny fixture encoder) on 127.0.0.1 port 0:
//
//   - a client stream commits only on a clean half-close: a cancelled or
//     timed-out UploadDataset, and an ImportAdapter cancelled after its last
//     chunk, store nothing, and a retry under the same id succeeds;
//   - a CreateTrainingJob that fails validation stores no job and leaves its
//     request_id free;
//   - adapter files with NaN or Inf weights are refused, naming the tensor;
//   - the model fingerprint covers the vocabulary and lower-casing: an
//     adapter does not import onto a server whose vocab.txt or
//     do_lower_case differs, while a format-1 file (weights fingerprint)
//     still imports onto the same encoder;
//   - a job reports the hyperparameters it trains with (every field) and
//     its attempts;
//   - every number a request carries, at the ends of its type's range, is
//     refused with a caller's code or served, never overflowed.
// The e2e suite (tests/e2e/lifecycle_e2e_test.cc) covers the ways a stream
// ends that need real processes: a killed client and a server shutdown.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_status.h"
#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "tests/api/api_test_util.h"

namespace adapterd::testing {
namespace {

using ::adapterd::storage::testing::TempDir;
using ::testing::HasSubstr;

class ContractsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(WriteFixtureModel(dir_->Sub("model")));
    ASSERT_OK_AND_ASSIGN(auto server, Server::Start(TestServerOptions(dir_->Sub("data"), dir_->Sub("model"))));
    server_ = server.release();
    stub_ = NewStub(server_->grpc_port()).release();
    v1::Dataset ds;
    ASSERT_TRUE(Upload(*stub_, PresenceUpload("presence", 120, 7, 11, 4), &ds).ok());
    v1::CreateTrainingJobRequest req = TrainRequest("task-a", "presence");
    req.set_request_id("train-a");
    ASSERT_OK_AND_ASSIGN(v1::TrainingJob job, TrainToEnd(*stub_, req));
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
    job_a_ = new v1::TrainingJob(job);
    adapter_a_ = new std::string(Export("task-a"));
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete server_;
    delete job_a_;
    delete adapter_a_;
    delete dir_;
  }

  static v1::CreateTrainingJobRequest TrainRequest(const std::string& task, const std::string& dataset) {
    v1::CreateTrainingJobRequest req;
    req.set_task_id(task);
    req.add_dataset_ids(dataset);
    req.mutable_hyperparameters()->set_epochs(2);
    req.mutable_hyperparameters()->set_batch_size(16);
    req.mutable_hyperparameters()->set_learning_rate(3e-3);
    req.mutable_hyperparameters()->set_bottleneck_size(8);
    return req;
  }

  static std::string Export(const std::string& task) {
    v1::ExportAdapterRequest ex;
    ex.set_task_id(task);
    auto ctx = Ctx();
    auto reader = stub_->ExportAdapter(ctx.get(), ex);
    v1::ExportAdapterResponse msg;
    std::string bytes;
    while (reader->Read(&msg)) bytes += msg.chunk();
    EXPECT_TRUE(reader->Finish().ok());
    return bytes;
  }

  // Imports `bytes` as `task` on `stub`, half-closing cleanly.
  static grpc::Status Import(v1::Adapterd::Stub& stub, const std::string& task, const std::string& bytes,
                             v1::Task* out = nullptr) {
    v1::Task task_out;
    auto ctx = Ctx();
    auto writer = stub.ImportAdapter(ctx.get(), out ? out : &task_out);
    v1::ImportAdapterRequest m;
    m.mutable_metadata()->set_task_id(task);
    writer->Write(m);
    m.set_chunk(bytes);
    writer->Write(m);
    writer->WritesDone();
    return writer->Finish();
  }

  static grpc::StatusCode GetDatasetCode(const std::string& id) {
    v1::GetDatasetRequest req;
    req.set_dataset_id(id);
    v1::Dataset out;
    auto ctx = Ctx();
    return stub_->GetDataset(ctx.get(), req, &out).error_code();
  }

  static grpc::StatusCode GetTaskCode(const std::string& id) {
    v1::GetTaskRequest req;
    req.set_task_id(id);
    v1::Task out;
    auto ctx = Ctx();
    return stub_->GetTask(ctx.get(), req, &out).error_code();
  }

  static int CountJobs() {
    int n = 0;
    v1::ListTrainingJobsRequest req;
    req.set_page_size(1000);
    do {
      v1::ListTrainingJobsResponse resp;
      auto ctx = Ctx();
      EXPECT_TRUE(stub_->ListTrainingJobs(ctx.get(), req, &resp).ok());
      n += resp.jobs_size();
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return n;
  }

  static grpc::Status Create(const v1::CreateTrainingJobRequest& req, v1::TrainingJob* out) {
    auto ctx = Ctx();
    return stub_->CreateTrainingJob(ctx.get(), req, out);
  }

  // A copy of adapter file `bytes` with metadata `overrides` applied and,
  // if `poison` names a tensor, its first element set to `value`.
  static std::string Rewrite(const std::string& bytes, const std::map<std::string, std::string>& overrides,
                             const std::string& poison = "", float value = 0) {
    auto file = model::SafetensorsFile::FromString(bytes);
    EXPECT_TRUE(file.ok()) << file.status();
    model::SafetensorsWriter writer;
    for (const auto& [k, v] : file->metadata()) writer.SetMetadata(k, v);
    for (const auto& [k, v] : overrides) writer.SetMetadata(k, v);
    for (const auto& [name, view] : file->tensors()) {
      std::string data(reinterpret_cast<const char*>(view.data.data()), view.data.size());
      if (name == poison) {
        EXPECT_EQ(view.dtype, model::DType::kF32);
        std::memcpy(data.data(), &value, sizeof(value));
      }
      EXPECT_OK(
          writer.Add(name, view.dtype, view.shape, {reinterpret_cast<const std::byte*>(data.data()), data.size()}));
    }
    return writer.Serialize();
  }

  // Uploads `msgs` completely. The server may still be ending an earlier
  // stream under the same id (it notices a cancel asynchronously), which is
  // ALREADY_EXISTS "being uploaded"; retry that, a bounded number of times.
  static grpc::Status UploadWhenFree(const std::vector<v1::UploadDatasetRequest>& msgs, v1::Dataset* out) {
    grpc::Status s;
    for (int attempt = 0; attempt < 100; ++attempt) {
      s = Upload(*stub_, msgs, out);
      if (s.error_code() != grpc::StatusCode::ALREADY_EXISTS ||
          s.error_message().find("being uploaded") == std::string::npos) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return s;
  }

  static TempDir* dir_;
  static Server* server_;
  static v1::Adapterd::Stub* stub_;
  static v1::TrainingJob* job_a_;
  static std::string* adapter_a_;
};

TempDir* ContractsTest::dir_ = nullptr;
Server* ContractsTest::server_ = nullptr;
v1::Adapterd::Stub* ContractsTest::stub_ = nullptr;
v1::TrainingJob* ContractsTest::job_a_ = nullptr;
std::string* ContractsTest::adapter_a_ = nullptr;

// --- client streams -----------------------------------------------------------

TEST_F(ContractsTest, UploadCancelledMidStreamStoresNothing) {
  const std::vector<v1::UploadDatasetRequest> msgs = PresenceUpload("ds-cancel", 400, 3, 5, 8);
  {
    auto ctx = Ctx();
    v1::Dataset out;
    auto writer = stub_->UploadDataset(ctx.get(), &out);
    for (size_t i = 0; i < msgs.size() / 2; ++i) ASSERT_TRUE(writer->Write(msgs[i]));
    // Give the server time to store the chunks it got (the case that used
    // to commit them); the check below does not depend on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ctx->TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(GetDatasetCode("ds-cancel"), grpc::StatusCode::NOT_FOUND);
  // The id is free again: a complete upload stores every example.
  v1::Dataset full;
  grpc::Status s = UploadWhenFree(msgs, &full);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(full.num_examples(), 400);
}

// Inputs past their size limits (docs/API.md, "Limits") are INVALID_ARGUMENT
// naming the field; nothing is stored and the server keeps serving.
TEST_F(ContractsTest, InputsPastTheirSizeLimitsAreRefusedAndStoreNothing) {
  v1::PredictRequest predict;
  predict.set_task_id("task-a");
  predict.add_texts("fine");
  predict.add_texts(std::string(64 * 1024 + 1, 'a'));
  v1::PredictResponse response;
  grpc::Status s = stub_->Predict(Ctx().get(), predict, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("texts[1]"));

  std::vector<v1::UploadDatasetRequest> msgs = PresenceUpload("ds-oversize-label", 40, 3, 5, 2);
  msgs.back().mutable_chunk()->mutable_examples(0)->set_label(std::string(129, 'l'));
  v1::Dataset out;
  s = UploadWhenFree(msgs, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("label has 129 bytes"));
  EXPECT_EQ(GetDatasetCode("ds-oversize-label"), grpc::StatusCode::NOT_FOUND);

  predict.mutable_texts()->RemoveLast();
  s = stub_->Predict(Ctx().get(), predict, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.predictions_size(), 1);
}

TEST_F(ContractsTest, UploadPastItsDeadlineStoresNothing) {
  const std::vector<v1::UploadDatasetRequest> msgs = PresenceUpload("ds-deadline", 200, 3, 6, 4);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::Dataset out;
    auto writer = stub_->UploadDataset(&ctx, &out);
    // On a loaded machine a write may already meet the deadline; what
    // matters is how the call ends.
    for (size_t i = 0; i + 1 < msgs.size(); ++i) (void)writer->Write(msgs[i]);
    // Never half-closed: the deadline ends the call.
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // The server ends its side when it sees the deadline; give it a while,
  // then the dataset must still be absent.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(GetDatasetCode("ds-deadline"), grpc::StatusCode::NOT_FOUND);
  v1::Dataset full;
  grpc::Status s = UploadWhenFree(msgs, &full);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(full.num_examples(), 200);
}

TEST_F(ContractsTest, ImportCancelledAfterTheLastChunkCreatesNoTask) {
  {
    auto ctx = Ctx();
    v1::Task out;
    auto writer = stub_->ImportAdapter(ctx.get(), &out);
    v1::ImportAdapterRequest m;
    m.mutable_metadata()->set_task_id("import-cancel");
    ASSERT_TRUE(writer->Write(m));
    m.set_chunk(*adapter_a_);
    ASSERT_TRUE(writer->Write(m));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ctx->TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(GetTaskCode("import-cancel"), grpc::StatusCode::NOT_FOUND);
  grpc::Status s = Import(*stub_, "import-cancel", *adapter_a_);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// --- training jobs --------------------------------------------------------------

TEST_F(ContractsTest, RejectedCreateStoresNoJobAndLeavesTheRequestIdFree) {
  const int before = CountJobs();
  v1::TrainingJob job;
  // A dataset that does not exist yet.
  v1::CreateTrainingJobRequest missing = TrainRequest("task-late", "ds-late");
  missing.set_request_id("req-late");
  EXPECT_EQ(Create(missing, &job).error_code(), grpc::StatusCode::NOT_FOUND);

  // Data that fail validation: one label only. (A label over 128 bytes is
  // refused at upload: InputsPastTheirSizeLimitsAreRefusedAndStoreNothing.)
  auto upload_labels = [](const std::string& id, const std::vector<std::string>& labels) {
    std::vector<v1::UploadDatasetRequest> msgs(2);
    msgs[0].mutable_metadata()->set_dataset_id(id);
    for (int i = 0; i < 40; ++i) {
      v1::Example* e = msgs[1].mutable_chunk()->add_examples();
      e->set_text(absl::StrCat("w", i % 50, " w", (i * 7) % 50));
      e->set_label(labels[static_cast<size_t>(i) % labels.size()]);
    }
    v1::Dataset out;
    return Upload(*stub_, msgs, &out);
  };
  ASSERT_TRUE(upload_labels("ds-one-label", {"only"}).ok());
  // And labels that conflict with an existing task's (task-a: yes/no).
  ASSERT_TRUE(upload_labels("ds-other-labels", {"red", "blue"}).ok());
  for (const auto& [task, dataset] :
       std::vector<std::pair<std::string, std::string>>{{"task-one", "ds-one-label"}, {"task-a", "ds-other-labels"}}) {
    v1::CreateTrainingJobRequest bad = TrainRequest(task, dataset);
    bad.set_request_id("req-" + dataset);
    for (int attempt = 0; attempt < 3; ++attempt) {
      grpc::Status s = Create(bad, &job);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << dataset << ": " << s.error_message();
    }
  }
  EXPECT_EQ(CountJobs(), before) << "a rejected CreateTrainingJob stored a job";

  // Once the dataset exists, the very same request (same request_id) is
  // accepted as a new job.
  v1::Dataset late;
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("ds-late", 80, 7, 9, 2), &late).ok());
  grpc::Status s = Create(missing, &job);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.request_id(), "req-late");
  EXPECT_EQ(CountJobs(), before + 1);
  v1::CancelTrainingJobRequest cancel;
  cancel.set_job_id(job.job_id());
  auto ctx = Ctx();
  v1::TrainingJob cancelled;
  (void)stub_->CancelTrainingJob(ctx.get(), cancel, &cancelled);
}

TEST_F(ContractsTest, JobsReportTheirResolvedHyperparametersAndAttempts) {
  const v1::Hyperparameters& hp = job_a_->hyperparameters();
  // Set by the request.
  EXPECT_EQ(hp.epochs(), 2);
  EXPECT_EQ(hp.batch_size(), 16);
  EXPECT_DOUBLE_EQ(hp.learning_rate(), 3e-3);
  EXPECT_EQ(hp.bottleneck_size(), 8);
  // Resolved from the server's defaults (TestServerOptions: max_seq_len 32).
  EXPECT_TRUE(hp.has_activation() && hp.has_seed() && hp.has_validation_fraction() && hp.has_warmup_fraction() &&
              hp.has_weight_decay() && hp.has_max_grad_norm() && hp.has_checkpoint_every_steps());
  EXPECT_EQ(hp.activation(), "gelu");
  EXPECT_EQ(hp.max_seq_len(), 32);
  EXPECT_DOUBLE_EQ(hp.weight_decay(), 0.01);
  // One run, no restart.
  EXPECT_EQ(job_a_->attempts(), 1);
  // The idempotent retry still matches, on the request as sent.
  v1::CreateTrainingJobRequest again = TrainRequest("task-a", "presence");
  again.set_request_id("train-a");
  v1::TrainingJob same;
  ASSERT_TRUE(Create(again, &same).ok());
  EXPECT_EQ(same.job_id(), job_a_->job_id());
}

// --- adapter files -----------------------------------------------------------------

TEST_F(ContractsTest, NonFiniteAdapterWeightsAreRefusedNamingTheTensor) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::string poisoned = Rewrite(*adapter_a_, {}, "layers.1.ffn_adapter.up.weight", bad);
    grpc::Status s = Import(*stub_, "poisoned", poisoned);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("layers.1.ffn_adapter.up.weight"));
    EXPECT_THAT(s.error_message(), HasSubstr("NaN or infinite"));
    EXPECT_EQ(GetTaskCode("poisoned"), grpc::StatusCode::NOT_FOUND);
  }
}

// A header whose JSON holds bytes that are not UTF-8: the parse error quotes
// them, and the caller still gets a valid UTF-8 message.
TEST_F(ContractsTest, AMalformedHeaderErrorIsValidUtf8) {
  const std::string header = "{\"layers.0\xff\xfe\": 1}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, sizeof(n));  // little-endian on every platform adapterd builds for
  file += header;
  grpc::Status s = Import(*stub_, "bad-bytes", file);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("not valid JSON"));
  EXPECT_TRUE(IsValidUtf8(s.error_message())) << s.error_message();
  EXPECT_EQ(GetTaskCode("bad-bytes"), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ContractsTest, TheFingerprintCoversTheVocabularyAndLowerCasing) {
  ASSERT_OK_AND_ASSIGN(model::LoadedModel a, model::LoadBertModel(dir_->Sub("model"), {}));
  v1::GetTaskRequest get;
  get.set_task_id("task-a");
  v1::Task task_a;
  {
    auto ctx = Ctx();
    ASSERT_TRUE(stub_->GetTask(ctx.get(), get, &task_a).ok());
  }
  EXPECT_EQ(task_a.encoder_fingerprint(), a.fingerprint);
  EXPECT_NE(a.fingerprint, a.weights_fingerprint);

  // Same weights and config; one vocabulary entry renamed, or lower-casing
  // off. Each server must refuse task-a's adapter.
  auto variant = [&](const std::string& name, const std::function<void(const std::string&)>& change) {
    const std::string model = dir_->Sub(name);
    std::filesystem::copy(dir_->Sub("model"), model);
    change(model);
    return model;
  };
  const std::string renamed = variant("model-vocab", [](const std::string& dir) {
    std::ifstream in(dir + "/vocab.txt");
    std::string vocab((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = vocab.find("\nw59\n");
    ASSERT_NE(at, std::string::npos);
    vocab.replace(at, 5, "\nzz59\n");
    std::ofstream(dir + "/vocab.txt", std::ios::trunc) << vocab;
  });
  const std::string cased = variant("model-cased", [](const std::string& dir) {
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << "{\"do_lower_case\": false}";
  });
  for (const std::string& model : {renamed, cased}) {
    ASSERT_OK_AND_ASSIGN(model::LoadedModel m, model::LoadBertModel(model, {}));
    EXPECT_EQ(m.weights_fingerprint, a.weights_fingerprint) << model;
    EXPECT_NE(m.fingerprint, a.fingerprint) << model;
    TempDir data;
    ASSERT_OK_AND_ASSIGN(auto other, Server::Start(TestServerOptions(data.Sub("data"), model)));
    auto stub = NewStub(other->grpc_port());
    grpc::Status s = Import(*stub, "copy", *adapter_a_);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << model << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("vocabulary"));
    other->Shutdown();
  }
}

TEST_F(ContractsTest, AFormatOneFileStillImportsOntoItsEncoder) {
  ASSERT_OK_AND_ASSIGN(model::LoadedModel a, model::LoadBertModel(dir_->Sub("model"), {}));
  const std::string v1 =
      Rewrite(*adapter_a_, {{"format_version", "1"}, {"encoder_fingerprint", a.weights_fingerprint}});
  v1::Task task;
  grpc::Status s = Import(*stub_, "from-v1", v1, &task);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(task.encoder_fingerprint(), a.weights_fingerprint);
  // A format-1 file that names the model fingerprint (or anything else) is
  // for another encoder.
  const std::string wrong = Rewrite(*adapter_a_, {{"format_version", "1"}});
  EXPECT_EQ(Import(*stub_, "from-v1-wrong", wrong).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // The same head read as another kind's: a multi-label task of the two
  // labels.
  const std::string multi_label = Rewrite(*adapter_a_, {{"task_kind", "multi_label_classification"}});
  grpc::Status imported = Import(*stub_, "multi-label", multi_label, &task);
  ASSERT_TRUE(imported.ok()) << imported.error_message();
  EXPECT_EQ(task.task_kind(), v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION);

  // It serves exactly as the task it came from.
  auto predict = [&](const std::string& task_id) {
    v1::PredictRequest req;
    req.set_task_id(task_id);
    req.add_texts("w7 w1 w2");
    req.add_texts("w3 w4");
    req.set_return_all_scores(true);
    v1::PredictResponse resp;
    auto ctx = Ctx();
    EXPECT_TRUE(stub_->Predict(ctx.get(), req, &resp).ok());
    return resp;
  };
  const v1::PredictResponse original = predict("task-a");
  const v1::PredictResponse copy = predict("from-v1");
  ASSERT_EQ(original.predictions_size(), copy.predictions_size());
  for (int i = 0; i < original.predictions_size(); ++i) {
    EXPECT_EQ(original.predictions(i).label(), copy.predictions(i).label());
    EXPECT_EQ(original.predictions(i).score(), copy.predictions(i).score());
  }
  // Multi-label answers each label's sigmoid, and the labels at 0.5 or over,
  // highest first; no single label.
  const v1::PredictResponse multi = predict("multi-label");
  ASSERT_EQ(multi.predictions_size(), 2);
  for (const v1::Prediction& p : multi.predictions()) {
    EXPECT_EQ(p.label(), "");
    ASSERT_EQ(p.all_scores_size(), 2);
    int over = 0;
    for (const v1::LabelScore& s : p.all_scores()) over += s.score() >= 0.5f;
    EXPECT_EQ(p.labels_size(), over);
    for (int l = 1; l < p.labels_size(); ++l) EXPECT_GE(p.labels(l - 1).score(), p.labels(l).score());
    for (const v1::LabelScore& l : p.labels()) EXPECT_GE(l.score(), 0.5f);
  }
}

// --- numbers at the ends of their range ----------------------------------------

// Every integer and floating-point field of a request, at the ends of its
// type's range: each is refused with a caller's code (INVALID_ARGUMENT,
// NOT_FOUND, RESOURCE_EXHAUSTED, ...) or served, never INTERNAL, UNKNOWN or
// DATA_LOSS; nothing overflows on the way (the ASan+UBSan run aborts on
// signed overflow); and afterwards the server answers as before. The
// request-level bounds are docs/API.md's limits table.
TEST_F(ContractsTest, RequestNumbersAtTheEndsOfTheirRangeAreRefusedOrServedNeverOverflowed) {
  const auto callers = [](const grpc::Status& s) {
    return s.error_code() != grpc::StatusCode::INTERNAL && s.error_code() != grpc::StatusCode::UNKNOWN &&
           s.error_code() != grpc::StatusCode::DATA_LOSS;
  };
  constexpr int32_t kI32[] = {std::numeric_limits<int32_t>::min(), -1, std::numeric_limits<int32_t>::max()};
  constexpr int64_t kI64[] = {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max()};
  const double kReal[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::lowest()};
  const auto predict = [&](const std::function<void(v1::PredictRequest&)>& edit, v1::PredictResponse* out) {
    v1::PredictRequest req;
    req.set_task_id("task-a");
    req.add_texts("w1 w2 w3");
    edit(req);
    auto ctx = Ctx();
    return stub_->Predict(ctx.get(), req, out);
  };
  v1::PredictResponse before;
  ASSERT_TRUE(predict([](v1::PredictRequest&) {}, &before).ok());

  for (int64_t v : kI64) {
    v1::PredictResponse out;
    const grpc::Status s = predict([&](v1::PredictRequest& r) { r.set_version(v); }, &out);
    EXPECT_EQ(s.error_code(), v < 0 ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::NOT_FOUND)
        << "version " << v << ": " << s.error_message();
  }
  for (int32_t v : kI32) {
    v1::PredictResponse out;
    const grpc::Status s = predict([&](v1::PredictRequest& r) { r.set_top_k_answers(v); }, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "top_k_answers " << v;
  }
  for (double v : kReal) {
    v1::PredictResponse out;
    const grpc::Status s = predict([&](v1::PredictRequest& r) { r.set_threshold(static_cast<float>(v)); }, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "threshold " << v;
  }
  // Page sizes: negative is refused, the largest is clamped.
  for (int32_t v : kI32) {
    const grpc::StatusCode want = v < 0 ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::OK;
    v1::ListTasksRequest tasks;
    tasks.set_page_size(v);
    v1::ListTasksResponse tasks_out;
    v1::ListDatasetsRequest datasets;
    datasets.set_page_size(v);
    v1::ListDatasetsResponse datasets_out;
    v1::ListTrainingJobsRequest jobs;
    jobs.set_page_size(v);
    v1::ListTrainingJobsResponse jobs_out;
    auto c1 = Ctx(), c2 = Ctx(), c3 = Ctx();
    EXPECT_EQ(stub_->ListTasks(c1.get(), tasks, &tasks_out).error_code(), want) << "page_size " << v;
    EXPECT_EQ(stub_->ListDatasets(c2.get(), datasets, &datasets_out).error_code(), want) << "page_size " << v;
    EXPECT_EQ(stub_->ListTrainingJobs(c3.get(), jobs, &jobs_out).error_code(), want) << "page_size " << v;
  }
  // A finished job's events after each extreme: a caller's code, and past
  // the last event, none.
  for (int64_t v : kI64) {
    v1::WatchTrainingJobRequest w;
    w.set_job_id(job_a_->job_id());
    w.set_after_seq(v);
    auto ctx = Ctx();
    auto reader = stub_->WatchTrainingJob(ctx.get(), w);
    v1::WatchTrainingJobResponse msg;
    int events = 0;
    while (reader->Read(&msg)) events += msg.events_size();
    const grpc::Status s = reader->Finish();
    EXPECT_TRUE(callers(s)) << "after_seq " << v << ": " << s.error_message();
    if (v == std::numeric_limits<int64_t>::max()) {
      EXPECT_EQ(events, 0);
    }
  }
  for (int64_t v : kI64) {
    v1::ExportAdapterRequest ex;
    ex.set_task_id("task-a");
    ex.set_version(v);
    auto ctx = Ctx();
    auto reader = stub_->ExportAdapter(ctx.get(), ex);
    v1::ExportAdapterResponse msg;
    while (reader->Read(&msg)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), v < 0 ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::NOT_FOUND)
        << "export version " << v;
  }
  for (int64_t v : kI64) {
    v1::Task out;
    auto ctx = Ctx();
    auto writer = stub_->ImportAdapter(ctx.get(), &out);
    v1::ImportAdapterRequest m;
    m.mutable_metadata()->set_task_id("extreme-import");
    m.mutable_metadata()->set_total_bytes(v);
    writer->Write(m);
    m.set_chunk(*adapter_a_);
    writer->Write(m);
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    EXPECT_FALSE(s.ok()) << "total_bytes " << v;  // never the file's size
    EXPECT_TRUE(callers(s)) << "total_bytes " << v << ": " << s.error_message();
  }
  EXPECT_EQ(GetTaskCode("extreme-import"), grpc::StatusCode::NOT_FOUND);

  // Every numeric hyperparameter. One the server accepts starts a job, which
  // is cancelled at once.
  int created = 0;
  const auto train = [&](const std::string& field, const std::function<void(v1::Hyperparameters&)>& edit) {
    v1::CreateTrainingJobRequest req = TrainRequest(absl::StrCat("extreme-", created), "presence");
    edit(*req.mutable_hyperparameters());
    v1::TrainingJob job;
    const grpc::Status s = Create(req, &job);
    EXPECT_TRUE(callers(s)) << field << ": " << s.error_message();
    if (!s.ok()) return;
    ++created;
    v1::CancelTrainingJobRequest cancel;
    cancel.set_job_id(job.job_id());
    v1::TrainingJob cancelled;
    auto ctx = Ctx();
    EXPECT_TRUE(stub_->CancelTrainingJob(ctx.get(), cancel, &cancelled).ok()) << field;
  };
  using Hp = v1::Hyperparameters;
  const std::vector<std::pair<std::string, void (Hp::*)(int32_t)>> ints = {
      {"epochs", &Hp::set_epochs},
      {"batch_size", &Hp::set_batch_size},
      {"bottleneck_size", &Hp::set_bottleneck_size},
      {"max_seq_len", &Hp::set_max_seq_len},
      {"checkpoint_every_steps", &Hp::set_checkpoint_every_steps},
      {"doc_stride", &Hp::set_doc_stride},
      {"max_question_len", &Hp::set_max_question_len},
      {"max_answer_len", &Hp::set_max_answer_len}};
  for (const auto& [name, set] : ints) {
    for (int32_t v : kI32) train(absl::StrCat(name, " ", v), [&](Hp& hp) { (hp.*set)(v); });
  }
  const std::vector<std::pair<std::string, void (Hp::*)(double)>> reals = {
      {"learning_rate", &Hp::set_learning_rate},
      {"validation_fraction", &Hp::set_validation_fraction},
      {"warmup_fraction", &Hp::set_warmup_fraction},
      {"weight_decay", &Hp::set_weight_decay},
      {"max_grad_norm", &Hp::set_max_grad_norm}};
  for (const auto& [name, set] : reals) {
    for (double v : kReal) train(absl::StrCat(name, " ", v), [&](Hp& hp) { (hp.*set)(v); });
  }
  train("seed max", [](Hp& hp) { hp.set_seed(std::numeric_limits<uint64_t>::max()); });
  // Only the values inside their documented ranges were accepted: the
  // largest checkpoint interval, seed and (finite) gradient clip.
  EXPECT_EQ(created, 3);

  v1::PredictResponse after;
  ASSERT_TRUE(predict([](v1::PredictRequest&) {}, &after).ok());
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
}

// A shutdown answers every call UNAVAILABLE (the code clients retry on),
// never CANCELLED: gRPC 1.51 cancels a call that reaches it while it stops
// (grpc/grpc issue 41785), so the server holds its refusals back while gRPC
// stops and clients that wait for their answers are not calling then
// (ShutdownPlan::hold). Eight clients call back to back through the whole
// shutdown, two on each of four methods.
TEST(ShutdownContractTest, CallsDuringAShutdownGetUnavailableNeverCancelled) {
  TempDir dir;
  ASSERT_OK(WriteFixtureModel(dir.Sub("model")));
  ServerOptions options = TestServerOptions(dir.Sub("data"), dir.Sub("model"));
  options.process.drain_seconds = 3;
  ASSERT_OK_AND_ASSIGN(auto server, Server::Start(options));
  const int port = server->grpc_port();
  struct Caller {
    grpc::StatusCode before;  // what the call gets while the server serves
    std::function<grpc::Status(v1::Adapterd::Stub&, grpc::ClientContext*)> call;
  };
  const std::vector<Caller> callers = {
      {grpc::StatusCode::OK,
       [](v1::Adapterd::Stub& s, grpc::ClientContext* c) {
         v1::ListTasksResponse r;
         return s.ListTasks(c, v1::ListTasksRequest(), &r);
       }},
      {grpc::StatusCode::OK,
       [](v1::Adapterd::Stub& s, grpc::ClientContext* c) {
         v1::ListDatasetsResponse r;
         return s.ListDatasets(c, v1::ListDatasetsRequest(), &r);
       }},
      {grpc::StatusCode::OK,
       [](v1::Adapterd::Stub& s, grpc::ClientContext* c) {
         v1::ListTrainingJobsResponse r;
         return s.ListTrainingJobs(c, v1::ListTrainingJobsRequest(), &r);
       }},
      {grpc::StatusCode::NOT_FOUND,
       [](v1::Adapterd::Stub& s, grpc::ClientContext* c) {
         v1::GetTaskRequest q;
         q.set_task_id("no-such-task");
         v1::Task r;
         return s.GetTask(c, q, &r);
       }},
  };
  const int n = 2 * static_cast<int>(callers.size());
  std::atomic<bool> stopped{false};
  std::atomic<int> warmed_up{0};
  std::vector<std::map<int, int>> codes(n);  // per client: code -> calls
  std::vector<std::thread> clients;
  for (int c = 0; c < n; ++c) {
    clients.emplace_back([&, c] {
      auto stub = NewStub(port);
      // Bounded: ends with the first call after the server has stopped, or
      // after 200k calls.
      for (int i = 0; i < 200000; ++i) {
        const bool last = stopped.load();
        auto ctx = Ctx();
        ++codes[c][callers[c % callers.size()].call(*stub, ctx.get()).error_code()];
        if (i == 10) ++warmed_up;
        if (last) break;
      }
    });
  }
  for (int i = 0; i < 3000 && warmed_up.load() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(warmed_up.load(), n);
  server->Shutdown();
  stopped = true;
  for (auto& t : clients) t.join();
  for (int c = 0; c < n; ++c) {
    const grpc::StatusCode before = callers[c % callers.size()].before;
    EXPECT_GT(codes[c][before], 10) << "client " << c;
    // The first call after the stop cannot connect: UNAVAILABLE too.
    EXPECT_GE(codes[c][grpc::StatusCode::UNAVAILABLE], 1) << "client " << c;
    for (const auto& [code, calls] : codes[c]) {
      EXPECT_TRUE(code == before || code == grpc::StatusCode::UNAVAILABLE)
          << "client " << c << ": " << calls << " calls got code " << code;
    }
  }
}

}  // namespace
}  // namespace adapterd::testing
