#include "server/http/response_bodies.h"

#include <microhttpd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_util.h"
#include "common/logging.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/http/transcoding.h"

namespace adapterd::http {
namespace {

std::string FormatEvent(const v1::WatchTrainingJobResponse& m) {
  std::string out = "event: update\n";
  if (m.events_size() > 0) absl::StrAppend(&out, "id: ", m.events(m.events_size() - 1).seq(), "\n");
  absl::StrAppend(&out, "data: ", ToJson(m), "\n\n");
  return out;
}

std::string FormatEnd(const absl::Status& status) {
  return absl::StrCat("event: end\ndata: ", StatusJson(status), "\n\n");
}

}  // namespace

// --- EventStream ------------------------------------------------------------

EventStream::EventStream(Gateway gateway, std::unique_ptr<grpc::ClientContext> ctx,
                         std::unique_ptr<grpc::ClientReader<v1::WatchTrainingJobResponse>> reader,
                         const v1::WatchTrainingJobResponse& first)
    : gateway_(gateway), ctx_(std::move(ctx)), reader_(std::move(reader)) {
  gateway_.open_streams->fetch_add(1);
  {
    absl::MutexLock l(&mu_);
    queue_.push_back(FormatEvent(first));
    queued_bytes_ = queue_.back().size();
  }
  producer_ = std::thread([this] { Produce(); });
}

EventStream::~EventStream() {
  {
    absl::MutexLock l(&mu_);
    cancelled_ = true;  // frees a producer waiting for room
  }
  ctx_->TryCancel();
  producer_.join();
  gateway_.open_streams->fetch_sub(1);
}

ssize_t EventStream::Read(void* cls, uint64_t, char* buf, size_t max) {
  return static_cast<EventStream*>(cls)->ReadSome(buf, max);
}

void EventStream::Free(void* cls) { delete static_cast<EventStream*>(cls); }

void EventStream::Produce() {
  v1::WatchTrainingJobResponse m;
  while (reader_->Read(&m)) {
    std::string event = FormatEvent(m);
    absl::MutexLock l(&mu_);
    auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queued_bytes_ < kMaxQueuedEventBytes || cancelled_; };
    mu_.Await(absl::Condition(&room));
    if (cancelled_) break;
    queued_bytes_ += event.size();
    queue_.push_back(std::move(event));
  }
  const absl::Status status = FromGrpcStatus(reader_->Finish());
  absl::MutexLock l(&mu_);
  final_ = status;
  done_ = true;
}

ssize_t EventStream::ReadSome(char* buf, size_t max) {
  if (pos_ == out_.size()) {
    if (ended_) return MHD_CONTENT_READER_END_OF_STREAM;
    out_.clear();
    pos_ = 0;
    NextChunk();
  }
  const size_t n = std::min(max, out_.size() - pos_);
  std::memcpy(buf, out_.data() + pos_, n);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

void EventStream::NextChunk() {
  const absl::Time keepalive_at = absl::Now() + gateway_.keepalive;
  absl::MutexLock l(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || done_; };
  while (true) {
    // Stopping ends the stream even while events keep coming: the client
    // resumes after the last id it received.
    if (gateway_.stopping->load()) {
      out_ = FormatEnd(absl::UnavailableError("adapterd is shutting down; watch again with after_seq"));
      ended_ = true;
      return;
    }
    // Short waits, so that the gateway's Stop() ends the stream promptly.
    mu_.AwaitWithDeadline(absl::Condition(&ready), std::min(keepalive_at, absl::Now() + absl::Milliseconds(200)));
    if (!queue_.empty()) {
      out_ = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= out_.size();
      return;
    }
    if (done_) {
      out_ = FormatEnd(final_);
      ended_ = true;
      return;
    }
    if (absl::Now() >= keepalive_at) {
      out_ = ": keepalive\n\n";
      return;
    }
  }
}

// --- Download ---------------------------------------------------------------

Download::Download(std::unique_ptr<grpc::ClientContext> ctx,
                   std::unique_ptr<grpc::ClientReader<v1::ExportAdapterResponse>> reader, std::string first_chunk)
    : ctx_(std::move(ctx)), reader_(std::move(reader)), chunk_(std::move(first_chunk)) {}

Download::~Download() {
  if (!finished_) {
    ctx_->TryCancel();
    v1::ExportAdapterResponse m;
    while (reader_->Read(&m)) {
    }
    (void)reader_->Finish();
  }
}

ssize_t Download::Read(void* cls, uint64_t, char* buf, size_t max) {
  return static_cast<Download*>(cls)->ReadSome(buf, max);
}

void Download::Free(void* cls) { delete static_cast<Download*>(cls); }

ssize_t Download::ReadSome(char* buf, size_t max) {
  while (pos_ == chunk_.size()) {
    if (finished_) return MHD_CONTENT_READER_END_OF_STREAM;
    v1::ExportAdapterResponse m;
    if (!reader_->Read(&m)) {
      finished_ = true;
      const grpc::Status status = reader_->Finish();
      if (!status.ok()) {
        LOG(WARNING) << "HTTP export ended early: " << status.error_message();
        return MHD_CONTENT_READER_END_WITH_ERROR;
      }
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    chunk_ = std::move(*m.mutable_chunk());
    pos_ = 0;
  }
  const size_t n = std::min(max, chunk_.size() - pos_);
  std::memcpy(buf, chunk_.data() + pos_, n);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

}  // namespace adapterd::http
