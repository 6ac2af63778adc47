// Test helper: a strict reader of the Prometheus text exposition format (version
// 0.0.4), so tests check what a Prometheus server would accept, not just substrings.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::testing {

struct Sample {
  std::string name;  // with any _bucket/_sum/_count suffix
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram, summary, untyped
  std::vector<Sample> samples;

  // Samples named `name` whose labels include every pair of `labels`.
  std::vector<Sample> Find(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  // The family a sample belongs to: its name less a histogram/summary suffix when the
  // family has that type.
  std::string FamilyOf(const std::string& sample_name) const;
  std::set<std::string> Names() const;
};

// INVALID_ARGUMENT naming the line on the first malformed one: a bad metric or label
// name, a bad escape, an unparsable value, a TYPE after the family's samples, a
// sample of a family whose TYPE says otherwise.
absl::StatusOr<Exposition> ParseExposition(const std::string& text);

}  // namespace dtrain::testing
