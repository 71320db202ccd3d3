// ConnectionTable: eviction of the idle connection at the limit
// (common/connection_table.h), on real sockets: an evicted one sees the end
// of its input.
#include "common/connection_table.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace adapterd {
namespace {

// A connected socket pair: [0] the server's end, [1] the client's.
struct Pair {
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0); }
  ~Pair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Whether the client's end reads the end of input (without blocking).
  bool ClientSeesEnd() const {
    char c;
    return ::recv(fds[1], &c, 1, MSG_DONTWAIT) == 0;
  }
  std::array<int, 2> fds{};
};

TEST(ConnectionTable, AtTheLimitTheConnectionIdleLongestIsEvictedAndAnsweringOnesNever) {
  ConnectionTable table(3);
  Pair a, b, c;
  table.Opened(&a, a.fds[0]);
  absl::SleepFor(absl::Milliseconds(2));
  table.Opened(&b, b.fds[0]);
  absl::SleepFor(absl::Milliseconds(2));
  table.Opened(&c, c.fds[0]);
  // Below the limit (N - 1 = 2 open): nothing evicted.
  table.Closed(&c);
  EXPECT_TRUE(table.Admit());
  EXPECT_FALSE(a.ClientSeesEnd());
  table.Opened(&c, c.fds[0]);
  // At the limit, `a` is being answered: `b`, the idle one with the oldest
  // activity, goes.
  table.Touch(&a, /*answering=*/true);
  EXPECT_TRUE(table.Admit());
  EXPECT_FALSE(a.ClientSeesEnd());
  EXPECT_TRUE(b.ClientSeesEnd());
  EXPECT_FALSE(c.ClientSeesEnd());
  // An evicted connection no longer counts (2 live): the next is accepted
  // without evicting another.
  EXPECT_TRUE(table.Admit());
  EXPECT_FALSE(c.ClientSeesEnd());
  // Every live connection answering: refused.
  table.Closed(&b);
  table.Closed(&c);
  Pair d, e;
  table.Opened(&d, d.fds[0]);
  table.Opened(&e, e.fds[0]);
  table.Touch(&d, true);
  table.Touch(&e, true);
  EXPECT_FALSE(table.Admit());
  EXPECT_FALSE(d.ClientSeesEnd());
}

}  // namespace
}  // namespace adapterd
