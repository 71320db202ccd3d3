#include "server/training/job_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace adapterd::training {
namespace {

std::vector<std::string> Drain(JobQueue& s) {
  std::vector<std::string> out;
  while (auto e = s.Pop()) out.push_back(e->job_id);
  return out;
}

TEST(JobQueue, ScriptedArrivalsAreServedRoundRobinFifoWithinTenant) {
  JobQueue s;
  for (const char* j : {"a1", "a2", "a3"}) s.Push("A", j);
  s.Push("B", "b1");
  s.Push("C", "c1");
  s.Push("A", "a4");
  s.Push("B", "b2");
  EXPECT_EQ(s.size(), 7u);
  EXPECT_EQ(s.size("A"), 4u);
  EXPECT_EQ(Drain(s), (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"}));
  EXPECT_TRUE(s.empty());
}

TEST(JobQueue, AHeavyTenantCannotStarveASingleJob) {
  JobQueue s;
  for (int i = 0; i < 100; ++i) s.Push("big", "big" + std::to_string(i));
  s.Pop();  // big0 starts
  s.Push("small", "only");
  EXPECT_EQ(s.Pop()->job_id, "big1");
  EXPECT_EQ(s.Pop()->job_id, "only");  // served within one turn of arriving
}

TEST(JobQueue, ArrivalsDuringServiceJoinAtTheBack) {
  JobQueue s;
  s.Push("A", "a1");
  s.Push("A", "a2");
  s.Push("B", "b1");
  EXPECT_EQ(s.Pop()->job_id, "a1");  // rotation now B, A
  s.Push("C", "c1");                 // B, A, C
  s.Push("B", "b2");
  EXPECT_EQ(Drain(s), (std::vector<std::string>{"b1", "a2", "c1", "b2"}));
}

TEST(JobQueue, RemoveDropsAQueuedJobAndEmptyTenantsLeaveTheRotation) {
  JobQueue s;
  s.Push("A", "a1");
  s.Push("B", "b1");
  s.Push("B", "b2");
  EXPECT_TRUE(s.Remove("A", "a1"));
  EXPECT_FALSE(s.Remove("A", "a1"));
  EXPECT_FALSE(s.Remove("Z", "z"));
  EXPECT_TRUE(s.Remove("B", "b1"));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(Drain(s), (std::vector<std::string>{"b2"}));
  EXPECT_FALSE(s.Pop().has_value());
}

// A job popped but not started (storage full) goes back where it was: the
// order of everything after it is as if it had never been popped.
TEST(JobQueue, PushFrontUndoesAPop) {
  for (const bool tenant_has_more : {false, true}) {
    JobQueue s;
    s.Push("A", "a1");
    if (tenant_has_more) s.Push("A", "a2");
    s.Push("B", "b1");
    std::optional<JobQueue::Entry> e = s.Pop();
    ASSERT_TRUE(e.has_value());
    s.PushFront(e->tenant, e->job_id);
    EXPECT_EQ(s.size(), tenant_has_more ? 3u : 2u);
    EXPECT_EQ(Drain(s),
              tenant_has_more ? (std::vector<std::string>{"a1", "b1", "a2"}) : (std::vector<std::string>{"a1", "b1"}));
  }
}

}  // namespace
}  // namespace adapterd::training
