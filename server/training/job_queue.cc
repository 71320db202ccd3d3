#include "server/training/job_queue.h"

#include <algorithm>

namespace adapterd::training {

void JobQueue::Push(const std::string& tenant, const std::string& job_id) {
  std::deque<std::string>& q = pending_[tenant];
  if (q.empty()) rotation_.push_back(tenant);
  q.push_back(job_id);
  ++size_;
}

void JobQueue::PushFront(const std::string& tenant, const std::string& job_id) {
  std::deque<std::string>& q = pending_[tenant];
  if (q.empty()) {
    rotation_.push_front(tenant);
  } else {
    // The tenant is still in the rotation: move it to the front.
    rotation_.erase(std::find(rotation_.begin(), rotation_.end(), tenant));
    rotation_.push_front(tenant);
  }
  q.push_front(job_id);
  ++size_;
}

std::optional<JobQueue::Entry> JobQueue::Pop() {
  if (rotation_.empty()) return std::nullopt;
  std::string tenant = std::move(rotation_.front());
  rotation_.pop_front();
  std::deque<std::string>& q = pending_[tenant];
  Entry e{tenant, std::move(q.front())};
  q.pop_front();
  --size_;
  if (q.empty()) {
    pending_.erase(tenant);
  } else {
    rotation_.push_back(std::move(tenant));
  }
  return e;
}

bool JobQueue::Remove(const std::string& tenant, const std::string& job_id) {
  auto it = pending_.find(tenant);
  if (it == pending_.end()) return false;
  auto pos = std::find(it->second.begin(), it->second.end(), job_id);
  if (pos == it->second.end()) return false;
  it->second.erase(pos);
  --size_;
  if (it->second.empty()) {
    pending_.erase(it);
    rotation_.erase(std::find(rotation_.begin(), rotation_.end(), tenant));
  }
  return true;
}

size_t JobQueue::size(const std::string& tenant) const {
  auto it = pending_.find(tenant);
  return it == pending_.end() ? 0 : it->second.size();
}

}  // namespace adapterd::training
