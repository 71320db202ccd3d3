// The ThreadSanitizer run's own check (built only with
// -DADAPTERD_SANITIZE=thread): with the instrumented abseil and the
// suppressions of tests/sanitizers/tsan.supp, TSan stays quiet about a
// counter guarded by an absl::Mutex and still reports an unguarded one, both
// incremented by two concurrent calls of a real gRPC sync handler
// (tests/sanitizers/tsan_canary.cc). Without this, a suppression too broad
// or an uninstrumented abseil would make the TSan stage pass vacuously.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "tests/e2e/e2e_util.h"

namespace adapterd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(TsanCanary, SeesTheRaceInAHandlerAndNotTheGuardedCounter) {
  // The options scripts/sanitize.sh exports (suppressions included), and a
  // report ends the process (halt_on_error) with TSan's exit code 66.
  const char* inherited = std::getenv("TSAN_OPTIONS");
  ASSERT_NE(inherited, nullptr) << "run through scripts/sanitize.sh thread";
  ASSERT_THAT(std::string(inherited), HasSubstr("tsan.supp"));
  ASSERT_OK_AND_ASSIGN(e2e::CommandResult r, e2e::RunCommand({ADAPTERD_TSAN_CANARY}, absl::Minutes(5)));
  const std::string all = r.out + r.err;
  EXPECT_EQ(r.exit_code, 66) << all;
  EXPECT_THAT(r.out, HasSubstr("guarded phase done")) << all;
  EXPECT_THAT(r.err, HasSubstr("WARNING: ThreadSanitizer: data race")) << all;
  EXPECT_THAT(r.err, HasSubstr("RacyIncrement")) << all;
  EXPECT_THAT(r.err, Not(HasSubstr("GuardedIncrement"))) << all;
}

}  // namespace
}  // namespace adapterd
