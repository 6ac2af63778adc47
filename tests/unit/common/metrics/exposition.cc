#include "tests/unit/common/metrics/exposition.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dtrain::testing {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || absl::ascii_isdigit(c); }

bool ValidName(const std::string& s, bool label) {
  if (s.empty() || !IsNameStart(s[0]) || (label && s[0] == ':')) return false;
  for (char c : s) {
    if (!IsNameChar(c) || (label && c == ':')) return false;
  }
  return true;
}

// Go's strconv.ParseFloat, which Prometheus uses, takes NaN and Inf in any case.
bool ParseValue(const std::string& s, double* out) {
  const std::string lower = absl::AsciiStrToLower(s);
  if (lower == "nan") {
    *out = std::nan("");
    return true;
  }
  if (lower == "+inf" || lower == "inf") {
    *out = HUGE_VAL;
    return true;
  }
  if (lower == "-inf") {
    *out = -HUGE_VAL;
    return true;
  }
  return absl::SimpleAtod(s, out);
}

const char* const kSuffixes[] = {"_bucket", "_sum", "_count"};

}  // namespace

std::vector<Sample> Exposition::Find(const std::string& name, const std::map<std::string, std::string>& labels) const {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) out.push_back(s);
  }
  return out;
}

std::string Exposition::FamilyOf(const std::string& name) const {
  for (const char* suffix : kSuffixes) {
    if (!absl::EndsWith(name, suffix)) continue;
    const std::string base = name.substr(0, name.size() - std::string(suffix).size());
    auto it = types.find(base);
    if (it != types.end() && (it->second == "histogram" || it->second == "summary")) return base;
  }
  return name;
}

std::set<std::string> Exposition::Names() const {
  std::set<std::string> names;
  for (const Sample& s : samples) names.insert(s.name);
  return names;
}

absl::StatusOr<Exposition> ParseExposition(const std::string& text) {
  Exposition out;
  std::set<std::string> seen_samples;  // families with samples already
  int number = 0;
  for (absl::string_view view : absl::StrSplit(text, '\n')) {
    ++number;
    const std::string line(view);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, " \"", line, "\": ", why));
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      const std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (f.size() >= 3 && f[1] == "TYPE") {
        if (f.size() != 4) return bad("TYPE needs a name and a type");
        if (!ValidName(f[2], false)) return bad("bad metric name");
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
        if (kTypes.count(f[3]) == 0) return bad("unknown type");
        if (out.types.count(f[2]) > 0) return bad("second TYPE for the family");
        if (seen_samples.count(f[2]) > 0) return bad("TYPE after the family's samples");
        out.types[f[2]] = f[3];
      } else if (f.size() >= 3 && f[1] == "HELP") {
        if (!ValidName(f[2], false)) return bad("bad metric name");
      }
      continue;  // other comments are allowed
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    s.name = line.substr(0, i);
    if (!ValidName(s.name, false)) return bad("bad metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && line[i] == ' ') ++i;
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t start = i;
        while (i < line.size() && IsNameChar(line[i])) ++i;
        const std::string label = line.substr(start, i - start);
        if (!ValidName(label, true)) return bad("bad label name");
        if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return bad("expected =\" after a label");
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) return bad("dangling escape");
            const char e = line[i + 1];
            if (e == 'n') {
              value += '\n';
            } else if (e == '\\' || e == '"') {
              value += e;
            } else {
              return bad("bad escape in a label value");
            }
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (i >= line.size()) return bad("unterminated label value");
        ++i;  // closing quote
        if (s.labels.count(label) > 0) return bad("label given twice");
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
    }
    if (i >= line.size() || line[i] != ' ') return bad("expected a space before the value");
    const std::vector<std::string> rest = absl::StrSplit(line.substr(i + 1), ' ', absl::SkipEmpty());
    if (rest.empty() || rest.size() > 2) return bad("expected a value and an optional timestamp");
    if (!ParseValue(rest[0], &s.value)) return bad("unparsable value");
    int64_t timestamp = 0;
    if (rest.size() == 2 && !absl::SimpleAtoi(rest[1], &timestamp)) return bad("unparsable timestamp");
    const std::string family = out.FamilyOf(s.name);
    auto type = out.types.find(family);
    if (type != out.types.end()) {
      const bool suffixed = family != s.name;
      if ((type->second == "counter" || type->second == "gauge") && suffixed) return bad("suffix on a plain family");
      if (type->second == "histogram" && !suffixed) return bad("a histogram sample needs _bucket, _sum or _count");
      if (absl::EndsWith(s.name, "_bucket") && s.labels.count("le") == 0) return bad("a bucket without le");
    }
    seen_samples.insert(family);
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace dtrain::testing
