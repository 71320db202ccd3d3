// adapterd-soak: a long mixed load against a running adapterd, watching the
// server process for leaks and drift (bench/soak.sh starts the server).
//
//   - Predict: --concurrency closed-loop clients, each request 4 texts for a
//     task picked by a Zipf law over --tasks tasks (imported copies of one
//     trained adapter, "soak-<i>");
//   - training: --jobs jobs, one after another, spread over the run;
//   - every --op_every_s seconds one of: an upload, an export, an import
//     followed later by its delete (never a task Predict uses).
//
// Every --window_s seconds it prints one line: requests, unexpected errors,
// p50/p99 latency, and the server's RSS, open file descriptors and threads
// (/proc/<pid>). A window's RSS is the median of the readings taken every
// --rss_every_s in its last --rss_span_s: the server gives freed heap back
// every 30 s, so a single reading lands anywhere on that saw-tooth. With
// --metrics_port, a second line says where the memory is (the server's
// /metrics: glibc's heap in use and free, what the heap release gave back so
// far, RocksDB's memtables, table readers and block caches, the adapter
// cache's host tier; anonymous and file-backed RSS from /proc).
//
// At the end: RSS growth from the first window (the warm-up) to the last,
// and each owner's change, FD and thread growth, p99 per window, and whether
// the targets held (0 unexpected errors, RSS growth < 5%, no growth of
// threads or of descriptors other than RocksDB's table and blob files,
// which follow the database's size). Exit status 0 when they did, 1 when
// not.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/adapterd_client.h"
#include "common/testing/http_client.h"

namespace adapterd::bench {
namespace {

using client::AdapterdClient;
using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

struct Flags {
  std::string server = "127.0.0.1:8500";
  int pid = 0;
  double minutes = 30;
  double window_s = 300;
  int tasks = 100;
  int concurrency = 8;
  int jobs = 10;
  double op_every_s = 20;
  int train_examples = 400;
  int epochs = 2;
  int metrics_port = 0;    // the server's /metrics on 127.0.0.1; 0 = no memory breakdown
  double rss_every_s = 5;  // between RSS readings
  double rss_span_s = 60;  // a window's RSS: the median of its readings in this last span
};

// Server process readings from /proc.
struct ProcSample {
  int64_t rss_kib = 0;
  int64_t rss_anon_kib = 0;  // of rss: anonymous (heap, stacks, anonymous maps)
  int64_t rss_file_kib = 0;  // of rss: file-backed (the mapped model, libraries)
  int64_t threads = 0;
  int64_t fds = 0;
  int64_t db_fds = 0;  // of fds: RocksDB's files (one per table/blob file it keeps open)
};

ProcSample ReadProc(int pid) {
  ProcSample s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") status >> s.rss_kib;
    if (key == "RssAnon:") status >> s.rss_anon_kib;
    if (key == "RssFile:") status >> s.rss_file_kib;
    if (key == "Threads:") status >> s.threads;
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++s.fds;
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(it->path(), link_ec).string();
    if (!link_ec && target.find("/db/") != std::string::npos) ++s.db_fds;
  }
  return s;
}

double MiB(int64_t kib) { return static_cast<double>(kib) / 1024; }

// The owners of the server's memory that its /metrics reports: a name for
// the output and the series.
struct MemOwner {
  const char* name;
  const char* series;
};
constexpr std::array<MemOwner, 7> kMemOwners = {{
    {"heap in use", "adapterd_process_heap_bytes{state=\"in_use\"}"},
    {"heap free", "adapterd_process_heap_bytes{state=\"free\"}"},
    {"heap released", "adapterd_process_heap_released_bytes_total"},
    {"memtables", "adapterd_storage_memory_bytes{kind=\"memtables\"}"},
    {"table readers", "adapterd_storage_memory_bytes{kind=\"table_readers\"}"},
    {"block cache", "adapterd_storage_memory_bytes{kind=\"block_cache\"}"},
    {"adapter host tier", "adapterd_adapter_cache_bytes{tier=\"host\"}"},
}};

// Where the server's memory is, by kMemOwners (MiB; -1 = unknown).
struct MemSample {
  std::array<double, kMemOwners.size()> mib;
  MemSample() { mib.fill(-1); }
};

MemSample ReadMetrics(int port) {
  MemSample m;
  if (port == 0) return m;
  absl::StatusOr<::adapterd::testing::HttpResponse> r =
      ::adapterd::testing::HttpGet(port, "/metrics", absl::Seconds(10));
  if (!r.ok() || r->status != 200) return m;
  for (size_t i = 0; i < kMemOwners.size(); ++i) {
    if (std::optional<double> v = ::adapterd::testing::SampleValue(r->body, kMemOwners[i].series))
      m.mib[i] = *v / (1 << 20);
  }
  return m;
}

std::string Words(std::mt19937_64& rng, int n) {
  static const char* const kWords[] = {"good", "bad",    "great", "awful", "movie", "plot",  "actor",  "slow",
                                       "fast", "boring", "fun",   "the",   "a",     "and",   "was",    "very",
                                       "not",  "really", "loved", "hated", "story", "music", "ending", "long"};
  std::string out;
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, i > 0 ? " " : "", kWords[rng() % std::size(kWords)]);
  return out;
}

std::vector<v1::Example> Dataset(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<v1::Example> out;
  for (int i = 0; i < n; ++i) {
    v1::Example e;
    e.set_text(Words(rng, 12));
    const bool pos = e.text().find("good") != std::string::npos || e.text().find("loved") != std::string::npos;
    e.set_label(pos ? "pos" : "neg");
    out.push_back(std::move(e));
  }
  return out;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1)];
}

class Soak {
 public:
  Soak(Flags f, std::unique_ptr<AdapterdClient> client) : f_(std::move(f)), client_(std::move(client)) {}

  // One trained task, exported and imported as soak-0..soak-(tasks-1).
  bool Setup() {
    v1::UploadDatasetRequest::Metadata meta;
    meta.set_dataset_id("soak-train");
    if (!Check(client_->UploadDataset(meta, Dataset(f_.train_examples, 1)).status(), "upload")) return false;
    auto job = client_->CreateTrainingJob(TrainRequest("soak-seed"));
    if (!Check(job.status(), "train")) return false;
    if (!AwaitJob(job->job_id())) return false;
    auto file = client_->ExportAdapter("soak-seed");
    if (!Check(file.status(), "export")) return false;
    adapter_ = file->bytes;
    for (int i = 0; i < f_.tasks; ++i) {
      if (!Check(client_->ImportAdapter(absl::StrCat("soak-", i), adapter_).status(), "import")) return false;
    }
    return true;
  }

  int Run() {
    std::vector<double> cdf;
    double total = 0;
    for (int i = 0; i < f_.tasks; ++i) cdf.push_back(total += 1.0 / (i + 1));
    for (double& c : cdf) c /= total;
    const auto start = Clock::now();
    const Clock::time_point end = start + Seconds(f_.minutes * 60);
    std::vector<std::thread> threads;
    for (int t = 0; t < f_.concurrency; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        while (Clock::now() < end) {
          v1::PredictRequest req;
          const double u = std::uniform_real_distribution<double>(0, 1)(rng);
          req.set_task_id(absl::StrCat("soak-", std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()));
          for (int i = 0; i < 4; ++i) req.add_texts(Words(rng, 16));
          const auto a = Clock::now();
          absl::Status s = client_->Predict(req).status();
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
          absl::MutexLock l(&mu_);
          if (s.ok()) {
            latencies_.push_back(ms);
          } else {
            Unexpected(s, "predict");
          }
        }
      });
    }
    threads.emplace_back([&] { Operations(start, end); });

    std::vector<ProcSample> at_window_end;
    std::vector<MemSample> mem_at_window_end;
    std::vector<double> rss_medians_mib;  // per window, of its last rss_span_s
    std::vector<double> p99s;
    for (int w = 1; Clock::now() < end; ++w) {
      // RSS readings through the window: the server returns freed heap to
      // the kernel every 30 s (--heap_release_interval_seconds), so one
      // reading lands anywhere on that saw-tooth; the median of the last
      // minute's readings does not depend on where.
      const Clock::time_point window_end = std::min(end, start + Seconds(w * f_.window_s));
      std::vector<double> span_mib;
      while (Clock::now() < window_end) {
        std::this_thread::sleep_until(std::min(window_end, Clock::now() + Seconds(f_.rss_every_s)));
        if (window_end - Clock::now() <= Seconds(f_.rss_span_s)) {
          span_mib.push_back(MiB(ReadProc(f_.pid).rss_kib));
        }
      }
      if (span_mib.empty()) span_mib.push_back(MiB(ReadProc(f_.pid).rss_kib));
      rss_medians_mib.push_back(Percentile(span_mib, 0.5));
      std::vector<double> lat;
      int64_t errors = 0;
      {
        absl::MutexLock l(&mu_);
        lat.swap(latencies_);
        errors = errors_;
      }
      const ProcSample p = ReadProc(f_.pid);
      at_window_end.push_back(p);
      mem_at_window_end.push_back(ReadMetrics(f_.metrics_port));
      p99s.push_back(Percentile(lat, 0.99));
      std::printf(
          "window %2d  %7zu req  p50 %7.1f ms  p99 %7.1f ms  errors %lld  rss %7.1f MiB (median of %zu"
          " in its last %.0f s; %.1f at its end)  fds %lld (db %lld)  threads %lld  jobs done %d\n",
          w, lat.size(), Percentile(lat, 0.5), p99s.back(), static_cast<long long>(errors), rss_medians_mib.back(),
          span_mib.size(), f_.rss_span_s, MiB(p.rss_kib), static_cast<long long>(p.fds),
          static_cast<long long>(p.db_fds), static_cast<long long>(p.threads), jobs_done_.load());
      if (f_.metrics_port != 0) {
        std::string owners;
        for (size_t i = 0; i < kMemOwners.size(); ++i) {
          absl::StrAppendFormat(&owners, "  %s %.1f", kMemOwners[i].name, mem_at_window_end.back().mib[i]);
        }
        std::printf("          memory MiB: rss anon %.1f  rss file %.1f %s\n", MiB(p.rss_anon_kib), MiB(p.rss_file_kib),
                    owners.c_str());
      }
      std::fflush(stdout);
    }
    for (auto& t : threads) t.join();
    const ProcSample last = ReadProc(f_.pid);
    const ProcSample warm = at_window_end.front();
    // The target is on the windows' medians; the single readings at the
    // first window's end and after the run are printed beside them.
    const double rss_growth = 100.0 * (rss_medians_mib.back() - rss_medians_mib.front()) / rss_medians_mib.front();
    const double rss_growth_single =
        100.0 * static_cast<double>(last.rss_kib - warm.rss_kib) / static_cast<double>(warm.rss_kib);
    std::string p99_list;
    for (double p : p99s) absl::StrAppend(&p99_list, p99_list.empty() ? "" : ", ", absl::StrFormat("%.0f", p));
    // RocksDB keeps its table and blob files open (bounded by the server's
    // max_open_files): more files as the database grows is not a leak; any
    // other descriptor (sockets, pipes, files) that accumulates would be.
    const int64_t warm_other = warm.fds - warm.db_fds;
    const int64_t last_other = last.fds - last.db_fds;
    int64_t errors = 0;
    {
      absl::MutexLock l(&mu_);
      errors = errors_;
    }
    const bool ok = errors == 0 && rss_growth < 5 && last_other <= warm_other && last.threads <= warm.threads;
    std::string rss_list;
    for (double m : rss_medians_mib)
      absl::StrAppend(&rss_list, rss_list.empty() ? "" : ", ", absl::StrFormat("%.1f", m));
    std::printf(
        "soak: %.0f min, %d tasks, %d jobs done, %d ops; unexpected errors %lld; RSS per window (MiB, "
        "medians): %s: %+.1f%% after warm-up (single readings %.1f -> %.1f: %+.1f%%); fds other than "
        "RocksDB's %lld -> %lld, RocksDB's %lld -> %lld; threads %lld -> %lld; p99 per window (ms): %s; %s\n",
        f_.minutes, f_.tasks, jobs_done_.load(), ops_done_.load(), static_cast<long long>(errors), rss_list.c_str(),
        rss_growth, MiB(warm.rss_kib), MiB(last.rss_kib), rss_growth_single, static_cast<long long>(warm_other),
        static_cast<long long>(last_other), static_cast<long long>(warm.db_fds), static_cast<long long>(last.db_fds),
        static_cast<long long>(warm.threads), static_cast<long long>(last.threads), p99_list.c_str(),
        ok ? "targets held" : "TARGETS MISSED");
    if (f_.metrics_port != 0) {
      // Each owner's change over the same span as the RSS growth.
      const MemSample mem_last = ReadMetrics(f_.metrics_port);
      std::string owners;
      for (size_t i = 0; i < kMemOwners.size(); ++i) {
        absl::StrAppendFormat(&owners, "%s%s %+.1f", i > 0 ? ", " : "", kMemOwners[i].name,
                              mem_last.mib[i] - mem_at_window_end.front().mib[i]);
      }
      std::printf("soak: after warm-up (single readings), MiB: rss %+.1f (anon %+.1f, file %+.1f); %s\n",
                  MiB(last.rss_kib - warm.rss_kib), MiB(last.rss_anon_kib - warm.rss_anon_kib),
                  MiB(last.rss_file_kib - warm.rss_file_kib), owners.c_str());
    }
    return ok ? 0 : 1;
  }

 private:
  v1::CreateTrainingJobRequest TrainRequest(const std::string& task) const {
    v1::CreateTrainingJobRequest req;
    req.set_task_id(task);
    req.add_dataset_ids("soak-train");
    req.mutable_hyperparameters()->set_epochs(f_.epochs);
    return req;
  }

  bool AwaitJob(const std::string& job_id) {
    while (true) {
      auto j = client_->GetTrainingJob(job_id);
      if (!Check(j.status(), "get job")) return false;
      if (j->state() == v1::JOB_STATE_SUCCEEDED) return true;
      if (j->state() == v1::JOB_STATE_FAILED || j->state() == v1::JOB_STATE_CANCELLED) {
        absl::MutexLock l(&mu_);
        Unexpected(absl::InternalError(j->error_message()), "job");
        return false;
      }
      absl::SleepFor(absl::Milliseconds(500));
    }
  }

  // Training jobs one after another (each starts no earlier than its share
  // of the run), and a mixed operation every op_every_s.
  void Operations(Clock::time_point start, Clock::time_point end) {
    std::mt19937_64 rng(7);
    std::string running_job;
    int next_job = 0;
    std::vector<std::string> imported;
    auto next_op = start;
    for (int op = 0; Clock::now() < end; ++op) {
      if (!running_job.empty()) {
        auto j = client_->GetTrainingJob(running_job);
        if (j.ok() && j->state() == v1::JOB_STATE_SUCCEEDED) {
          ++jobs_done_;
          running_job.clear();
        } else if (!j.ok() || j->state() == v1::JOB_STATE_FAILED || j->state() == v1::JOB_STATE_CANCELLED) {
          absl::MutexLock l(&mu_);
          Unexpected(j.ok() ? absl::InternalError(j->error_message()) : j.status(), "job");
          running_job.clear();
        }
      }
      const Clock::time_point due = start + Seconds(f_.minutes * 60 * next_job / f_.jobs);
      if (running_job.empty() && next_job < f_.jobs && Clock::now() >= due) {
        auto job = client_->CreateTrainingJob(TrainRequest(absl::StrCat("soak-train-", next_job)));
        if (Check(job.status(), "create job")) running_job = job->job_id();
        ++next_job;
      }
      if (Clock::now() >= next_op) {
        next_op += Seconds(f_.op_every_s);
        switch (ops_done_.load() % 3) {
          case 0: {
            v1::UploadDatasetRequest::Metadata meta;
            meta.set_dataset_id(absl::StrCat("soak-up-", ops_done_.load()));
            Check(client_->UploadDataset(meta, Dataset(200, rng())).status(), "upload");
            break;
          }
          case 1:
            Check(client_->ExportAdapter(absl::StrCat("soak-", rng() % f_.tasks)).status(), "export");
            break;
          case 2: {
            // An import; the one before it is deleted.
            const std::string id = absl::StrCat("soak-extra-", ops_done_.load());
            if (Check(client_->ImportAdapter(id, adapter_).status(), "import")) imported.push_back(id);
            if (imported.size() > 1) {
              Check(client_->DeleteTask(imported.front()), "delete");
              imported.erase(imported.begin());
            }
            break;
          }
        }
        ++ops_done_;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }

  bool Check(const absl::Status& s, const char* what) {
    if (s.ok()) return true;
    absl::MutexLock l(&mu_);
    Unexpected(s, what);
    return false;
  }

  void Unexpected(const absl::Status& s, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (++errors_ <= 20) std::fprintf(stderr, "soak: unexpected %s error: %s\n", what, s.ToString().c_str());
  }

  const Flags f_;
  const std::unique_ptr<AdapterdClient> client_;
  std::string adapter_;
  absl::Mutex mu_;
  std::vector<double> latencies_ ABSL_GUARDED_BY(mu_);
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> jobs_done_{0};
  std::atomic<int> ops_done_{0};
};

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"adapterd-soak: long mixed load against a running adapterd, watching its RSS, FDs and threads"};
  app.add_option("--server", f.server, "adapterd address");
  app.add_option("--pid", f.pid, "the server's process id (/proc readings)")->required();
  app.add_option("--minutes", f.minutes, "length of the run");
  app.add_option("--window_s", f.window_s, "seconds per report window (the first is the warm-up)");
  app.add_option("--tasks", f.tasks, "tasks Predict spreads over (Zipf)");
  app.add_option("--concurrency", f.concurrency, "closed-loop Predict clients");
  app.add_option("--jobs", f.jobs, "training jobs, one after another");
  app.add_option("--op_every_s", f.op_every_s, "seconds between mixed operations");
  app.add_option("--train_examples", f.train_examples, "examples in the training dataset");
  app.add_option("--epochs", f.epochs, "epochs per training job");
  app.add_option("--rss_every_s", f.rss_every_s, "seconds between RSS readings");
  app.add_option("--rss_span_s", f.rss_span_s, "a window's RSS is the median of its readings in this last span");
  app.add_option("--metrics_port", f.metrics_port,
                 "the server's /metrics port on 127.0.0.1, for where its memory is (0 = not read)");
  CLI11_PARSE(app, argc, argv);
  AdapterdClient::Options o;
  o.server = f.server;
  o.default_deadline = absl::Seconds(120);
  auto client = AdapterdClient::Create(o);
  if (!client.ok()) {
    std::fprintf(stderr, "soak: %s\n", client.status().ToString().c_str());
    return 2;
  }
  Soak soak(f, *std::move(client));
  if (!soak.Setup()) return 2;
  std::printf("soak: set up %d tasks; running %.0f min\n", f.tasks, f.minutes);
  std::fflush(stdout);
  return soak.Run();
}

}  // namespace
}  // namespace adapterd::bench

int main(int argc, char** argv) { return adapterd::bench::Main(argc, argv); }
