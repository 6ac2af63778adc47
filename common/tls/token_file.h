// Bearer-token files for the inference service: the server's list of accepted tokens
// (dtrain-infer --auth-token-file) and the client's own (dtrain predict --auth-token-file,
// which sends the first).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain {

// One token a line; blank lines and '#' comments skipped. INVALID_ARGUMENT naming
// `flag` and the file: unreadable, no token, a token under kMinTokenBytes.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path, const std::string& flag);

// Shorter strings are guessable passwords, not tokens (`openssl rand -hex 32` gives 64).
inline constexpr size_t kMinTokenBytes = 16;

}  // namespace dtrain
