#include "common/logging.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/utf8.h"

namespace adapterd {
namespace {

// JSON string escaping of valid UTF-8 (RFC 8259: quote, backslash and the
// control characters).
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Writes each message as one JSON line on stderr.
class JsonSink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char*, const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message, size_t message_len) override {
    std::string out = JsonLogLine(severity, time.timestamp(), time.usec(), static_cast<long long>(::gettid()),
                                  base_filename, line, std::string_view(message, message_len));
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
};

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format must be text or json, not '", std::string(name), "'"));
}

std::string JsonLogLine(google::LogSeverity severity, long long unix_seconds, int micros, long long thread,
                        std::string_view file, int line, std::string_view message) {
  const absl::Time t = absl::FromUnixSeconds(unix_seconds) + absl::Microseconds(micros);
  std::string out = "{\"ts\":";
  AppendJsonString(&out, absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()));
  absl::StrAppend(&out, ",\"level\":\"", google::GetLogSeverityName(severity), "\",\"thread\":", thread,
                  ",\"source\":");
  AppendJsonString(&out, absl::StrCat(ToValidUtf8(file), ":", line));
  out.append(",\"msg\":");
  AppendJsonString(&out, ToValidUtf8(message));
  out.push_back('}');
  return out;
}

void InitLogging(const char* program, LogFormat format) {
  if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging(program);
  // No log files, whatever the format.
  for (google::LogSeverity s = google::GLOG_INFO; s < google::NUM_SEVERITIES; ++s) {
    google::SetLogDestination(s, "");
  }
  FLAGS_minloglevel = google::GLOG_INFO;
  if (format == LogFormat::kText) {
    FLAGS_logtostderr = true;
    return;
  }
  // Only the sink writes: glog's own stderr copy is off (no severity reaches
  // the threshold) and so are its files.
  FLAGS_logtostderr = false;
  FLAGS_alsologtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;
  // Registered once, however often InitLogging runs; never destroyed (glog
  // may log until the process ends).
  static JsonSink* const sink = [] {
    auto* s = new JsonSink();
    google::AddLogSink(s);
    return s;
  }();
  (void)sink;
}

}  // namespace adapterd
