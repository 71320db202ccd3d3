// The process's log: glog (the library LibTorch already logs through), so
// adapterd's lines and LibTorch's share one stream, with a severity and a
// timestamp on each. Code logs with glog's macros:
//
//   #include "common/logging.h"
//   LOG(INFO) << "SERVING on port " << port;
//   LOG(WARNING) << ...;  LOG(ERROR) << ...;
//
// InitLogging, once in main, sends everything to stderr in one of two
// formats (--log_format):
//   text  glog's own: "I20261127 06:14:11.123456 4242 server.cc:189] SERVING on port 50051"
//   json  one JSON object per line, for log collectors (Kubernetes, Fluent Bit, Loki):
//         {"ts":"2026-11-27T06:14:11.123456Z","level":"INFO","thread":4242,
//          "source":"server.cc:189","msg":"SERVING on port 50051"}
//         Invalid UTF-8 in a message is replaced (U+FFFD), so every line parses.
// Nothing goes to log files. Without InitLogging (tests, tools) glog's
// defaults apply: text on stderr.
//
// What adapterd logs: ids, sizes, counts, codes, durations, paths it was
// given. Never API keys, texts, text pairs, labels or dataset contents
// (tests/e2e/logging_e2e_test.cc checks the real binary's output).
//
// Thread safety: LOG is thread-safe; InitLogging is not (call it first).
#ifndef ADAPTERD_COMMON_LOGGING_H_
#define ADAPTERD_COMMON_LOGGING_H_

#include <glog/logging.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace adapterd {

enum class LogFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// Routes glog to stderr in `format` (see above). `program` names the process
// (argv[0]).
void InitLogging(const char* program, LogFormat format);

// One log line of the json format (what InitLogging's sink writes, without
// the newline). Exposed for tests.
std::string JsonLogLine(google::LogSeverity severity, long long unix_seconds, int micros, long long thread,
                        std::string_view file, int line, std::string_view message);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_LOGGING_H_
