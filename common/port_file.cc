#include "common/port_file.h"

#include "absl/strings/str_cat.h"
#include "common/file_io.h"

namespace dtrain {

absl::Status WritePortFile(const std::string& path, int port) {
  return WriteFileAtomically(path, absl::StrCat(port, "\n"));
}

}  // namespace dtrain
