// rpc_probe: a gRPC client the end-to-end tests drive as a separate process,
// for what adapterctl never does on purpose: hold a client stream open
// without closing it, or call in a loop while the server shuts down.
//
//   rpc_probe PORT upload DATASET_ID CHUNKS [hold]
//       Streams the metadata and CHUNKS chunks of 50 examples each, printing
//       "sent N" after each chunk. Then, with `hold`, prints "holding" and
//       waits for the server to end the call without ever half-closing;
//       otherwise half-closes. Prints "status CODE" at the end.
//   rpc_probe PORT import TASK_ID FILE [hold]
//       The same for ImportAdapter: every chunk of FILE, then hold or close.
//   rpc_probe PORT watch JOB_ID
//       Watches a job, printing "event" per message and "status CODE".
//   rpc_probe PORT predict_loop TASK_ID SECONDS
//       Calls Predict back to back for up to SECONDS (each call with a 5 s
//       deadline), printing "first ok" after the first success, "status
//       CODE" for every call that is not OK, and "ok N" at the end.
//
// CODE is the gRPC status code's number. Exit code 0 unless the arguments are
// wrong (2). Every wait is bounded: the process gives up after 10 minutes.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace {

using adapterd::v1::Adapterd;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void SayStatus(const grpc::Status& s) {
  Say(absl::StrCat("status ", static_cast<int>(s.error_code()), " ", s.error_message()));
}

// Ends a client stream: half-closes it, or with `hold` leaves it open until
// the server ends the call. Prints the call's status.
template <typename Writer>
int EndStream(Writer& writer, bool hold) {
  if (hold) {
    Say("holding");
  } else {
    writer.WritesDone();
  }
  SayStatus(writer.Finish());
  return 0;
}

int Upload(Adapterd::Stub& stub, const std::string& id, int chunks, bool hold) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(600));
  adapterd::v1::Dataset out;
  auto writer = stub.UploadDataset(&ctx, &out);
  adapterd::v1::UploadDatasetRequest meta;
  meta.mutable_metadata()->set_dataset_id(id);
  if (!writer->Write(meta)) Say("write failed");
  for (int c = 0; c < chunks; ++c) {
    adapterd::v1::UploadDatasetRequest msg;
    for (int i = 0; i < 50; ++i) {
      adapterd::v1::Example* e = msg.mutable_chunk()->add_examples();
      e->set_text(absl::StrCat("probe text ", c, " ", i));
      e->set_label(i % 2 == 0 ? "even" : "odd");
    }
    if (!writer->Write(msg)) {
      Say("write failed");
      break;
    }
    Say(absl::StrCat("sent ", c + 1));
  }
  return EndStream(*writer, hold);
}

int Import(Adapterd::Stub& stub, const std::string& task_id, const std::string& file, bool hold) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  grpc::ClientContext ctx;
  ctx.set_deadline(In(600));
  adapterd::v1::Task out;
  auto writer = stub.ImportAdapter(&ctx, &out);
  adapterd::v1::ImportAdapterRequest meta;
  meta.mutable_metadata()->set_task_id(task_id);
  writer->Write(meta);
  constexpr size_t kChunk = 64 << 10;
  int sent = 0;
  for (size_t off = 0; off < bytes.size(); off += kChunk) {
    adapterd::v1::ImportAdapterRequest msg;
    msg.set_chunk(bytes.substr(off, kChunk));
    if (!writer->Write(msg)) break;
    Say(absl::StrCat("sent ", ++sent));
  }
  return EndStream(*writer, hold);
}

int Watch(Adapterd::Stub& stub, const std::string& job_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(600));
  adapterd::v1::WatchTrainingJobRequest req;
  req.set_job_id(job_id);
  auto reader = stub.WatchTrainingJob(&ctx, req);
  adapterd::v1::WatchTrainingJobResponse msg;
  while (reader->Read(&msg)) Say("event");
  SayStatus(reader->Finish());
  return 0;
}

int PredictLoop(Adapterd::Stub& stub, const std::string& task_id, int seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int ok = 0;
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(5));
    adapterd::v1::PredictRequest req;
    req.set_task_id(task_id);
    req.add_texts("probe text");
    adapterd::v1::PredictResponse resp;
    const grpc::Status s = stub.Predict(&ctx, req, &resp);
    if (s.ok()) {
      if (++ok == 1) Say("first ok");
      continue;
    }
    SayStatus(s);
    // Back off as the server asks ("retry the call") and as a real client
    // does. (Back-to-back calls through a shutdown are the in-process
    // contract test's: tests/api/contracts_test.cc, ShutdownContractTest.)
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Say(absl::StrCat("ok ", ok));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  if (argc < 4 || !absl::SimpleAtoi(argv[1], &port)) {
    std::fprintf(stderr, "usage: rpc_probe PORT upload|import|watch|predict_loop ARGS...\n");
    return 2;
  }
  const std::string method = argv[2];
  auto stub =
      Adapterd::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  const bool hold = std::string(argv[argc - 1]) == "hold";
  int n = 0;
  if (method == "upload" && argc >= 5 && absl::SimpleAtoi(argv[4], &n)) return Upload(*stub, argv[3], n, hold);
  if (method == "import" && argc >= 5) return Import(*stub, argv[3], argv[4], hold);
  if (method == "watch") return Watch(*stub, argv[3]);
  if (method == "predict_loop" && argc >= 5 && absl::SimpleAtoi(argv[4], &n)) return PredictLoop(*stub, argv[3], n);
  std::fprintf(stderr, "rpc_probe: bad arguments\n");
  return 2;
}
