// Helpers shared by the libFuzzer harnesses in tests/fuzz.
//
// FUZZ_CHECK(cond) << "context";  aborts (a crash libFuzzer records, with the
// input) when an invariant of a successful parse does not hold. The streamed
// context is evaluated only on failure.
#ifndef ADAPTERD_TESTS_FUZZ_FUZZ_CHECK_H_
#define ADAPTERD_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

namespace adapterd::fuzz {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    out_ << file << ":" << line << ": FUZZ_CHECK failed: " << condition << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    const std::string message = out_.str();
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
  }
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    out_ << value;
    return *this;
  }

 private:
  std::ostringstream out_;
};

// The input as a string_view.
inline std::string_view AsStringView(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace adapterd::fuzz

// `switch` keeps the macro a single statement that an `else` cannot bind to.
#define FUZZ_CHECK(cond) \
  switch (0)             \
  case 0:                \
  default:               \
    if (cond) {          \
    } else               \
      ::adapterd::fuzz::CheckFailure(__FILE__, __LINE__, #cond)

#endif  // ADAPTERD_TESTS_FUZZ_FUZZ_CHECK_H_
