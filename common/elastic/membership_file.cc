#include "common/elastic/membership_file.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace dtrain::elastic {
namespace {

using Json = nlohmann::json;

// Ranks and bounds past this are nonsense, refused before they reach an int.
constexpr int64_t kMaxNumber = int64_t{1} << 30;

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// "line 3, column 14" of byte offset `byte` (1-based, as nlohmann counts) in `text`.
std::string Position(absl::string_view text, size_t byte) {
  const size_t end = std::min(text.size(), byte > 0 ? byte - 1 : 0);
  const absl::string_view before = text.substr(0, end);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t last_newline = before.rfind('\n');
  const size_t column = last_newline == absl::string_view::npos ? end + 1 : end - last_newline;
  return absl::StrCat("line ", line, ", column ", column);
}

absl::StatusOr<int64_t> Integer(const Json& v, const std::string& field) {
  if (!v.is_number_integer()) return Bad(field, absl::StrCat("expected an integer, got ", v.dump()));
  // Above int64's range nlohmann keeps an unsigned value, which must not wrap.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Bad(field, absl::StrCat(v.dump(), " is out of range"));
  }
  return v.get<int64_t>();
}

// Refuses fields outside `known`.
absl::Status OnlyFields(const Json& object, const std::vector<std::string>& known, const std::string& where) {
  for (const auto& item : object.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      return Bad(absl::StrCat(where, item.key()),
                 absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Json*> Field(const Json& object, const std::string& name, const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) return Bad(absl::StrCat(where, name), "missing");
  return &*it;
}

absl::StatusOr<Generation> ParseGeneration(const Json& v, const std::string& where) {
  if (!v.is_object()) return Bad(where, absl::StrCat("expected an object, got ", v.dump()));
  const std::string prefix = where + ".";
  DTRAIN_RETURN_IF_ERROR(OnlyFields(v, {"from_step", "workers"}, prefix));
  Generation g;
  DTRAIN_ASSIGN_OR_RETURN(const Json* step, Field(v, "from_step", prefix));
  DTRAIN_ASSIGN_OR_RETURN(g.from_step, Integer(*step, prefix + "from_step"));
  DTRAIN_ASSIGN_OR_RETURN(const Json* workers, Field(v, "workers", prefix));
  if (!workers->is_array()) {
    return Bad(prefix + "workers", absl::StrCat("expected a list of ranks, got ", workers->dump()));
  }
  for (size_t i = 0; i < workers->size(); ++i) {
    const std::string field = absl::StrCat(prefix, "workers[", i, "]");
    DTRAIN_ASSIGN_OR_RETURN(const int64_t r, Integer((*workers)[i], field));
    if (r < 0 || r > kMaxNumber) return Bad(field, absl::StrCat("rank ", r, " out of range"));
    g.ranks.push_back(static_cast<int>(r));
  }
  return g;
}

absl::StatusOr<int> Bound(const Json& root, const std::string& name) {
  DTRAIN_ASSIGN_OR_RETURN(const Json* v, Field(root, name, ""));
  DTRAIN_ASSIGN_OR_RETURN(const int64_t n, Integer(*v, name));
  if (n < 1 || n > kMaxNumber) return Bad(name, absl::StrCat(n, " out of range"));
  return static_cast<int>(n);
}

absl::StatusOr<MembershipSchedule> FromJson(const Json& root) {
  if (!root.is_object()) return Bad("the file", absl::StrCat("expected a JSON object, got ", root.dump()));
  DTRAIN_RETURN_IF_ERROR(OnlyFields(root, {"format", "min_workers", "max_workers", "generations"}, ""));
  DTRAIN_ASSIGN_OR_RETURN(const Json* format, Field(root, "format", ""));
  if (!format->is_string() || format->get<std::string>() != kMembershipFormat) {
    return Bad("format", absl::StrCat("expected \"", kMembershipFormat, "\", got ", format->dump()));
  }
  DTRAIN_ASSIGN_OR_RETURN(const int min_workers, Bound(root, "min_workers"));
  DTRAIN_ASSIGN_OR_RETURN(const int max_workers, Bound(root, "max_workers"));
  DTRAIN_ASSIGN_OR_RETURN(const Json* list, Field(root, "generations", ""));
  if (!list->is_array()) return Bad("generations", absl::StrCat("expected a list, got ", list->dump()));
  std::vector<Generation> generations;
  for (size_t i = 0; i < list->size(); ++i) {
    DTRAIN_ASSIGN_OR_RETURN(Generation g, ParseGeneration((*list)[i], absl::StrCat("generations[", i, "]")));
    generations.push_back(std::move(g));
  }
  return MembershipSchedule::Create(min_workers, max_workers, std::move(generations));
}

}  // namespace

std::string MembershipToJson(const MembershipSchedule& schedule) {
  std::string out = absl::StrCat("{\"format\": \"", kMembershipFormat, "\", \"min_workers\": ", schedule.min_workers(),
                                 ", \"max_workers\": ", schedule.max_workers(), ",\n \"generations\": [\n");
  const std::vector<Generation>& gens = schedule.generations();
  for (size_t i = 0; i < gens.size(); ++i) {
    absl::StrAppend(&out, "  {\"from_step\": ", gens[i].from_step, ", \"workers\": [",
                    absl::StrJoin(gens[i].ranks, ","), "]}", i + 1 < gens.size() ? "," : "", "\n");
  }
  out += " ]}\n";
  return out;
}

absl::StatusOr<MembershipSchedule> ParseMembershipJson(absl::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(Position(text, e.byte), ": not JSON (", e.what(), ")"));
  }
  return FromJson(root);
}

absl::Status WriteMembershipFile(const std::string& path, const MembershipSchedule& schedule) {
  return WriteFileAtomically(path, MembershipToJson(schedule));
}

std::string CheckpointMembershipPath(const std::string& prefix, int epoch) {
  return absl::StrCat(prefix, "-", absl::Dec(epoch, absl::kZeroPad4), ".membership.json");
}

absl::StatusOr<MembershipSchedule> ReadMembershipFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileLimited(path, kMaxMembershipFileBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<MembershipSchedule> schedule = ParseMembershipJson(*text);
  if (!schedule.ok()) {
    return absl::Status(schedule.status().code(), absl::StrCat(path, ": ", schedule.status().message()));
  }
  return schedule;
}

}  // namespace dtrain::elastic
