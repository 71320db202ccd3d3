// JobQueue: the order queued training jobs run in. Round-robin between
// tenants with pending jobs, FIFO within a tenant, so a tenant with 100
// queued jobs cannot starve one with a single job. JobManager (which owns
// the jobs' states) keeps one in memory, rebuilt from storage at start-up.
//
// Rotation: tenants take turns in the order they (re)joined; Pop() serves the
// tenant at the front, which moves to the back if it still has jobs. A tenant
// with no pending jobs leaves the rotation and rejoins at the back.
//
// Thread safety: not thread-safe; JobManager guards it with its mutex.
#ifndef ADAPTERD_SERVER_TRAINING_JOB_QUEUE_H_
#define ADAPTERD_SERVER_TRAINING_JOB_QUEUE_H_

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace adapterd::training {

class JobQueue {
 public:
  struct Entry {
    std::string tenant;
    std::string job_id;
  };

  // Appends `job_id` to `tenant`'s FIFO.
  void Push(const std::string& tenant, const std::string& job_id);
  // Puts `job_id` back at the head of `tenant`'s FIFO and `tenant` at the
  // front of the rotation: undoes the Pop() that returned it (a job that
  // could not be started yet).
  void PushFront(const std::string& tenant, const std::string& job_id);
  // The next job in round-robin order, or nullopt when empty.
  std::optional<Entry> Pop();
  // Removes a pending job (e.g. cancelled while queued). False if absent.
  bool Remove(const std::string& tenant, const std::string& job_id);

  size_t size() const { return size_; }
  size_t size(const std::string& tenant) const;
  bool empty() const { return size_ == 0; }

 private:
  std::map<std::string, std::deque<std::string>> pending_;
  std::deque<std::string> rotation_;  // tenants with pending jobs, next first
  size_t size_ = 0;
};

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_JOB_QUEUE_H_
