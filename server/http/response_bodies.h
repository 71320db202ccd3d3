// The bodies of the REST gateway's two streamed responses, as libmicrohttpd
// content readers (MHD_create_response_from_callback: Read produces the
// next bytes, Free is called once when the response ends or the client goes
// away):
//
// - EventStream: GET /v1/trainingJobs/{job_id}:watch, Server-Sent Events
//   (docs/API.md, "Watching"). A thread reads the WatchTrainingJob gRPC
//   stream into a queue of at most kMaxQueuedEventBytes; past it the reader
//   stops reading, so a client that stops reading holds back the gRPC stream
//   (its flow control) instead of growing the server's memory. Read drains
//   the queue, sending `: keepalive` comments while it is empty, and ends the
//   stream with `event: end` and the watch's status, or UNAVAILABLE as soon
//   as the gateway is stopping. Free cancels the call and joins the reader.
// - Download: GET /v1/tasks/{task_id}:export, the ExportAdapter stream's
//   chunks as one body; a stream that fails midway ends the body with an
//   error (the client sees a short download, never a wrong one).
//
// Thread safety: each is driven by one libmicrohttpd connection thread (Read,
// Free); EventStream's reader thread shares only its queue, under a lock.
#ifndef ADAPTERD_SERVER_HTTP_RESPONSE_BODIES_H_
#define ADAPTERD_SERVER_HTTP_RESPONSE_BODIES_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/sync_stream.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd::http {

class EventStream {
 public:
  // Bytes of events queued for a client that reads slowly.
  static constexpr size_t kMaxQueuedEventBytes = 1 << 20;

  // What the stream shares with its gateway, which outlives it.
  struct Gateway {
    std::atomic<int>* open_streams;     // counted from construction to Free
    const std::atomic<bool>* stopping;  // true: end with UNAVAILABLE
    absl::Duration keepalive;           // a comment after this long idle
  };

  // `first`: the stream's first response, already read (it is sent first).
  EventStream(Gateway gateway, std::unique_ptr<grpc::ClientContext> ctx,
              std::unique_ptr<grpc::ClientReader<v1::WatchTrainingJobResponse>> reader,
              const v1::WatchTrainingJobResponse& first);
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // libmicrohttpd's content reader and its free callback.
  static ssize_t Read(void* cls, uint64_t pos, char* buf, size_t max);
  static void Free(void* cls);

 private:
  void Produce();
  ssize_t ReadSome(char* buf, size_t max);
  // Fills out_ with the next event, the end, or a keep-alive.
  void NextChunk();

  const Gateway gateway_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<v1::WatchTrainingJobResponse>> reader_;
  std::thread producer_;
  absl::Mutex mu_;  // protects queue_, queued_bytes_, cancelled_, done_, final_
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  // The connection thread's own: the chunk being sent.
  std::string out_;
  size_t pos_ = 0;
  bool ended_ = false;
};

class Download {
 public:
  // `first_chunk`: the bytes of the stream's first response, already read.
  Download(std::unique_ptr<grpc::ClientContext> ctx,
           std::unique_ptr<grpc::ClientReader<v1::ExportAdapterResponse>> reader, std::string first_chunk);
  ~Download();
  Download(const Download&) = delete;
  Download& operator=(const Download&) = delete;

  // libmicrohttpd's content reader and its free callback.
  static ssize_t Read(void* cls, uint64_t pos, char* buf, size_t max);
  static void Free(void* cls);

 private:
  ssize_t ReadSome(char* buf, size_t max);

  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<v1::ExportAdapterResponse>> reader_;
  std::string chunk_;
  size_t pos_ = 0;
  bool finished_ = false;
};

}  // namespace adapterd::http

#endif  // ADAPTERD_SERVER_HTTP_RESPONSE_BODIES_H_
