// Shared fixtures of the API tests: a generated tiny HF model directory (the
// training fixture's encoder and word vocabulary), a real adapterd Server on
// 127.0.0.1 port 0 over a temp data dir, and raw gRPC stubs.
#ifndef ADAPTERD_TESTS_API_API_TEST_UTIL_H_
#define ADAPTERD_TESTS_API_API_TEST_UTIL_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/server.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::testing {

// Writes the training fixture's encoder (hidden 64, 2 layers, words w0..w59)
// as a HuggingFace directory.
absl::Status WriteFixtureModel(const std::string& dir);

// Options for a test server: port 0 for gRPC and metrics, fast batching,
// small training defaults.
ServerOptions TestServerOptions(const std::string& data_dir, const std::string& model_dir);

// A presence dataset as upload messages: metadata first, then `chunks` chunks.
std::vector<v1::UploadDatasetRequest> PresenceUpload(const std::string& dataset_id, int n, int key, uint64_t seed,
                                                     int chunks);

class ClientContext;

// Raw stub helpers.
std::unique_ptr<v1::Adapterd::Stub> NewStub(int port, int64_t max_message_bytes = 64 << 20);
std::shared_ptr<grpc::Channel> NewChannel(int port, int64_t max_message_bytes = 64 << 20);
// A context with a 60 s deadline and, if non-empty, `authorization: Bearer key`.
std::unique_ptr<grpc::ClientContext> Ctx(const std::string& api_key = "");

grpc::Status Upload(v1::Adapterd::Stub& stub, const std::vector<v1::UploadDatasetRequest>& msgs, v1::Dataset* out,
                    const std::string& api_key = "");
// A job training `task_id` on `dataset_id` with the tests' small
// hyperparameters: 3 epochs, batch 16, lr 3e-3, 32 tokens, m = 16.
v1::CreateTrainingJobRequest SmallJob(const std::string& request_id, const std::string& task_id,
                                      const std::string& dataset_id);
// Creates a job and watches it to its end; returns the final job.
absl::StatusOr<v1::TrainingJob> TrainToEnd(v1::Adapterd::Stub& stub, const v1::CreateTrainingJobRequest& req,
                                           const std::string& api_key = "");
// "grpc.health.v1.Health/Check" for service "": true when SERVING.
absl::StatusOr<bool> HealthServing(int port);

}  // namespace adapterd::testing

#endif  // ADAPTERD_TESTS_API_API_TEST_UTIL_H_
