#include "tests/api/api_test_util.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>

#include "absl/synchronization/notification.h"
#include "common/api_util.h"
#include "common/status_macros.h"
#include "server/api/grpc_status.h"
#include "server/model/checkpoint_writer.h"
#include "tests/training/training_fixture.h"

namespace adapterd::testing {

absl::Status WriteFixtureModel(const std::string& dir) {
  model::BertConfig config = training::testing::FixtureConfig();
  ASSIGN_OR_RETURN(model::EncoderWeights w,
                   model::RandomEncoderWeights(config, 3, training::testing::kFixtureInitRange));
  return model::WriteHfCheckpoint(dir, config, w, model::testing::WordVocab(training::testing::kWords));
}

ServerOptions TestServerOptions(const std::string& data_dir, const std::string& model_dir) {
  ServerOptions o;
  o.grpc.listen_address = "127.0.0.1:0";
  o.process.metrics_address = "127.0.0.1:0";
  o.storage.data_dir = data_dir;
  o.model.model_dir = model_dir;
  o.model.max_seq_len = 32;
  // --dtype auto without its timing-based choice, which could differ between
  // two starts of one test (as ADAPTERD_DTYPE_CALIBRATION=false does for the
  // tests' processes, cmake/AdapterdHelpers.cmake); dtype_test.cc turns it on.
  o.model.dtype_calibration = false;
  o.serving.max_batch_size = 16;
  o.serving.max_queue_delay_us = 500;
  o.training.micro_batch = 8;
  o.serving.device_cache_bytes = 64 << 20;
  o.serving.host_cache_bytes = 64 << 20;
  o.process.drain_seconds = 5;
  return o;
}

std::vector<v1::UploadDatasetRequest> PresenceUpload(const std::string& dataset_id, int n, int key, uint64_t seed,
                                                     int chunks) {
  std::vector<v1::UploadDatasetRequest> msgs(1);
  msgs[0].mutable_metadata()->set_dataset_id(dataset_id);
  v1::DatasetChunk all = training::testing::PresenceChunk<v1::DatasetChunk>(n, key, 0.05, seed);
  const int per = (n + chunks - 1) / chunks;
  for (int c = 0; c < chunks; ++c) {
    v1::UploadDatasetRequest m;
    for (int i = c * per; i < std::min(n, (c + 1) * per); ++i) *m.mutable_chunk()->add_examples() = all.examples(i);
    msgs.push_back(std::move(m));
  }
  return msgs;
}

std::shared_ptr<grpc::Channel> NewChannel(int port, int64_t max_message_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<v1::Adapterd::Stub> NewStub(int port, int64_t max_message_bytes) {
  return v1::Adapterd::NewStub(NewChannel(port, max_message_bytes));
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& api_key) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!api_key.empty()) ctx->AddMetadata("authorization", "Bearer " + api_key);
  return ctx;
}

grpc::Status Upload(v1::Adapterd::Stub& stub, const std::vector<v1::UploadDatasetRequest>& msgs, v1::Dataset* out,
                    const std::string& api_key) {
  auto ctx = Ctx(api_key);
  auto writer = stub.UploadDataset(ctx.get(), out);
  for (const auto& m : msgs) {
    if (!writer->Write(m)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

v1::CreateTrainingJobRequest SmallJob(const std::string& request_id, const std::string& task_id,
                                      const std::string& dataset_id) {
  v1::CreateTrainingJobRequest req;
  req.set_request_id(request_id);
  req.set_task_id(task_id);
  req.add_dataset_ids(dataset_id);
  v1::Hyperparameters& hp = *req.mutable_hyperparameters();
  hp.set_epochs(3);
  hp.set_batch_size(16);
  hp.set_learning_rate(3e-3);
  hp.set_max_seq_len(32);
  hp.set_bottleneck_size(16);
  return req;
}

absl::StatusOr<v1::TrainingJob> TrainToEnd(v1::Adapterd::Stub& stub, const v1::CreateTrainingJobRequest& req,
                                           const std::string& api_key) {
  v1::TrainingJob job;
  {
    auto ctx = Ctx(api_key);
    RETURN_IF_ERROR(FromGrpcStatus(stub.CreateTrainingJob(ctx.get(), req, &job)));
  }
  auto ctx = Ctx(api_key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  v1::WatchTrainingJobRequest w;
  w.set_job_id(job.job_id());
  auto reader = stub.WatchTrainingJob(ctx.get(), w);
  v1::WatchTrainingJobResponse msg;
  while (reader->Read(&msg)) job = msg.job();
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  return job;
}

absl::StatusOr<bool> HealthServing(int port) {
  grpc::GenericStub stub(NewChannel(port));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""}: zero bytes
  {
    grpc::Slice empty;
    request = grpc::ByteBuffer(&empty, 1);
  }
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  grpc::StubOptions options;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", options, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  RETURN_IF_ERROR(FromGrpcStatus(status));
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("cannot read the health response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{status = 1 (SERVING)} is the two bytes 08 01.
  return bytes == std::string("\x08\x01", 2);
}

}  // namespace adapterd::testing
