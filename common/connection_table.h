// ConnectionTable: the open connections of an HTTP server, for evicting the
// one idle longest when a new one arrives at the limit (slow-loris defence).
//
// libmicrohttpd refuses connections past its own limit, so a client that
// opens that many and sends nothing (or a byte now and then) locks every
// other client out. Both of adapterd's HTTP servers (/metrics and the REST
// gateway) keep this table from libmicrohttpd's connection notifications and
// call Admit() from its accept policy callback: at the limit, the idle
// connection with the oldest activity has its socket shut down (its thread
// or poll loop then sees the end of input and closes it), and the new one is
// accepted. A connection marked `answering` (its request is complete and
// being answered: a call running, an event stream or download being sent)
// is never evicted; when every connection is answering, Admit() refuses.
//
// Keys are the server's connection handles (MHD_Connection*), opaque here.
//
// Thread safety: thread-safe.
#ifndef ADAPTERD_COMMON_CONNECTION_TABLE_H_
#define ADAPTERD_COMMON_CONNECTION_TABLE_H_

#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace adapterd {

class ConnectionTable {
 public:
  explicit ConnectionTable(size_t max_connections) : max_connections_(max_connections) {}

  // A connection opened (`fd` its socket, -1 when unknown: never evicted).
  void Opened(const void* key, int fd);
  void Closed(const void* key);
  // Activity on a connection; `answering` as the request now stands.
  void Touch(const void* key, bool answering);
  // A new connection arrives: true to accept it, after evicting the idle
  // connection with the oldest activity if max_connections are open; false
  // when they are and none can be evicted.
  bool Admit();

 private:
  struct Connection {
    int fd = -1;
    absl::Time last_active;
    bool answering = false;
    bool evicted = false;
  };
  const size_t max_connections_;
  absl::Mutex mu_;
  std::map<const void*, Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_CONNECTION_TABLE_H_
