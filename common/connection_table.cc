#include "common/connection_table.h"

#include <sys/socket.h>

#include "absl/time/clock.h"

namespace adapterd {

void ConnectionTable::Opened(const void* key, int fd) {
  absl::MutexLock l(&mu_);
  connections_[key] = {fd, absl::Now(), false, false};
}

void ConnectionTable::Closed(const void* key) {
  absl::MutexLock l(&mu_);
  connections_.erase(key);
}

void ConnectionTable::Touch(const void* key, bool answering) {
  absl::MutexLock l(&mu_);
  auto it = connections_.find(key);
  if (it == connections_.end()) return;
  it->second.last_active = absl::Now();
  it->second.answering = answering;
}

bool ConnectionTable::Admit() {
  absl::MutexLock l(&mu_);
  size_t live = 0;
  Connection* oldest = nullptr;
  for (auto& [key, c] : connections_) {
    if (c.evicted) continue;
    ++live;
    if (c.answering || c.fd < 0) continue;
    if (oldest == nullptr || c.last_active < oldest->last_active) oldest = &c;
  }
  if (live < max_connections_) return true;
  if (oldest == nullptr) return false;
  ::shutdown(oldest->fd, SHUT_RDWR);
  oldest->evicted = true;
  return true;
}

}  // namespace adapterd
