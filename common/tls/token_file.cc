#include "common/tls/token_file.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"

namespace dtrain {

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> text = ReadFileLimited(path, 1 << 20);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    if (line.size() < kMinTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": a token of ", line.size(),
                                                     " characters; want at least ", kMinTokenBytes,
                                                     " (e.g. openssl rand -hex 32)"));
    }
    tokens.emplace_back(line);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": no token in it"));
  return tokens;
}

}  // namespace dtrain
