#include "common/testing/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace adapterd::testing {
namespace {

// curl_global_init once per process: it is not thread-safe before libcurl
// 7.84, and requests may start on several threads at once. Never cleaned up
// (the process's end does that).
CURLcode GlobalInit() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  return code;
}

struct EasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// The status of a failed transfer, in the contract's terms.
absl::Status TransferError(CURLcode code, const char* detail, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", curl_easy_strerror(code), *detail ? ": " : "", detail);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      return absl::UnavailableError(message);
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(message);
    case CURLE_GOT_NOTHING:           // closed without a response
    case CURLE_WEIRD_SERVER_REPLY:    // no HTTP status line
    case CURLE_PARTIAL_FILE:          // a body shorter than its Content-Length
    case CURLE_BAD_CONTENT_ENCODING:  // broken chunked encoding
    case CURLE_UNSUPPORTED_PROTOCOL:  // e.g. an HTTP/0.9 reply, which curl refuses
      return absl::DataLossError(message);
    case CURLE_URL_MALFORMAT:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  return HttpRequest(port, "GET", path, "", {}, timeout);
}

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method, const std::string& path,
                                         const std::string& body, const HttpHeaders& headers, absl::Duration timeout) {
  const std::string what = absl::StrCat(method, " 127.0.0.1:", port, path);
  if (port < 1 || port > 65535) return absl::InvalidArgumentError(absl::StrCat(what, ": port out of range"));
  if (path.empty() || path[0] != '/') return absl::InvalidArgumentError(absl::StrCat(what, ": path must start with /"));
  if (method.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no method"));
  if (const CURLcode init = GlobalInit(); init != CURLE_OK) {
    return absl::InternalError(absl::StrCat("curl_global_init: ", curl_easy_strerror(init)));
  }
  const std::unique_ptr<CURL, EasyDeleter> curl(curl_easy_init());
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  CURL* const c = curl.get();

  // Request headers: the caller's, and curl's own defaults removed (an empty
  // "Name:" drops a header; "Name;" sends one with an empty value).
  struct HeaderList {
    curl_slist* head = nullptr;
    ~HeaderList() { curl_slist_free_all(head); }
  } list;
  const auto add_header = [&list](const std::string& line) {
    curl_slist* const head = curl_slist_append(list.head, line.c_str());
    if (head == nullptr) return false;  // the list so far is intact
    list.head = head;
    return true;
  };
  bool has_content_type = false;
  bool has_accept = false;
  for (const auto& [name, value] : headers) {
    has_content_type = has_content_type || absl::EqualsIgnoreCase(name, "content-type");
    has_accept = has_accept || absl::EqualsIgnoreCase(name, "accept");
    if (!add_header(value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value))) {
      return absl::InternalError("curl_slist_append failed");
    }
  }
  if ((!has_content_type && !add_header("Content-Type:")) || (!has_accept && !add_header("Accept:")) ||
      !add_header("Expect:")) {
    return absl::InternalError("curl_slist_append failed");
  }

  std::string response_body;
  char detail[CURL_ERROR_SIZE] = "";
  const std::string url = absl::StrCat("http://127.0.0.1:", port, path);
  // At least a millisecond: 0 means no timeout to libcurl.
  const long timeout_ms = static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  CURLcode set = CURLE_OK;
  const auto opt = [&set](CURLcode code) {
    if (set == CURLE_OK) set = code;
  };
  opt(curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail));
  opt(curl_easy_setopt(c, CURLOPT_URL, url.c_str()));
  opt(curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L));
  // Loopback only, whatever http_proxy, HTTP_PROXY or no_proxy say.
  opt(curl_easy_setopt(c, CURLOPT_PROXY, ""));
  opt(curl_easy_setopt(c, CURLOPT_NOPROXY, "*"));
  opt(curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_0)));
  opt(curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L));
  opt(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L));
  // No signals (SIGALRM for DNS timeouts): several threads may be in here.
  opt(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  opt(curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms));
  opt(curl_easy_setopt(c, CURLOPT_HTTPHEADER, list.head));
  opt(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody));
  opt(curl_easy_setopt(c, CURLOPT_WRITEDATA, &response_body));
  if (method == "HEAD") {
    opt(curl_easy_setopt(c, CURLOPT_NOBODY, 1L));
  } else if (method == "GET" && body.empty()) {
    opt(curl_easy_setopt(c, CURLOPT_HTTPGET, 1L));
  } else {
    // A body, with its Content-Length (0 too), under the caller's method.
    opt(curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data()));
    opt(curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size())));
    opt(curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str()));
  }
  if (set != CURLE_OK) return TransferError(set, detail, what);

  if (const CURLcode code = curl_easy_perform(c); code != CURLE_OK) return TransferError(code, detail, what);

  HttpResponse response;
  long status = 0;
  if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status < 100 || status > 999) {
    return absl::DataLossError(absl::StrCat(what, ": malformed status line"));
  }
  response.status = static_cast<int>(status);
  const char* content_type = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &content_type) == CURLE_OK && content_type != nullptr) {
    response.content_type = std::string(absl::StripAsciiWhitespace(content_type));
  }
  response.body = std::move(response_body);
  return response;
}

std::optional<double> SampleValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double v = 0;
    // A sample may carry a timestamp after its value.
    if (absl::SimpleAtod(line.substr(0, line.find(' ')), &v)) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace adapterd::testing
