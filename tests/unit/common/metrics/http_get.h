// Test helper: HTTP/1.0 GET against a loopback server, with a deadline: enough for a
// /metrics page and Prometheus' HTTP API, without a client library.
#pragma once

#include "tests/integration/common/free_port.h"  // FreePort, for the tests that use both

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dtrain::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// `path` starts with '/'. UNAVAILABLE when nothing listens, DEADLINE_EXCEEDED when the
// answer is not complete within `timeout`.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout = absl::Seconds(5));

// Percent-encodes a query parameter's value.
std::string UrlEncode(const std::string& text);

}  // namespace dtrain::testing
