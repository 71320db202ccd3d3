// The web console's files (server/http/console/), embedded in the binary at
// build time (cmake/embed_files.cmake), so that the gateway serves the
// console with no files beside the binary.
//
// Thread safety: immutable data.
#ifndef ADAPTERD_SERVER_HTTP_CONSOLE_ASSETS_H_
#define ADAPTERD_SERVER_HTTP_CONSOLE_ASSETS_H_

#include <span>
#include <string_view>

namespace adapterd::http {

struct ConsoleAsset {
  std::string_view name;  // the file's name, e.g. "index.html"
  std::string_view content;
};

// Every file of server/http/console/ but its package.json, by name.
std::span<const ConsoleAsset> ConsoleAssets();

}  // namespace adapterd::http

#endif  // ADAPTERD_SERVER_HTTP_CONSOLE_ASSETS_H_
