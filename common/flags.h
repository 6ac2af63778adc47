// Command-line flags in MXNet's spelling (`--num-epochs 3`, `--kv-store=dist_sync`),
// with environment fallbacks (DTRAIN_*, and ps-lite's DMLC_* names).
//
// abseil's flags cannot spell names with '-', and LibTorch drags gflags into the
// worker; this small parser keeps one flag library per binary and reports every bad
// flag as an absl::Status instead of exiting.
//
// Precedence: default < environment (first listed name that is set) < command line.
// '-' and '_' are interchangeable in names on the command line.
//
// Every FlagSet knows `--help` and `--version`: either sets help_requested(), and
// Usage() is then the text to print (the version line after `--version`), so each
// program's "print Usage() and exit 0" path serves both.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain {

class FlagSet {
 public:
  // Reads the environment; tests inject their own.
  using EnvLookup = std::function<const char*(const char*)>;

  FlagSet(std::string program, std::string summary);

  // `env` lists environment variable names consulted in order.
  void AddString(const std::string& name, std::string* value, const std::string& help,
                 std::vector<std::string> env = {});
  void AddInt(const std::string& name, int64_t* value, const std::string& help, std::vector<std::string> env = {});
  void AddDouble(const std::string& name, double* value, const std::string& help, std::vector<std::string> env = {});
  // `--name`, `--name=true|false|1|0`, `--no-name`.
  void AddBool(const std::string& name, bool* value, const std::string& help, std::vector<std::string> env = {});
  // A value that is parsed into its own type (an enum): `parse` stores the value the
  // text names, or says why the text names none (reported as "ORIGIN: --NAME: WHY").
  // `default_text` is what Usage() shows as the default.
  using Parser = std::function<absl::Status(const std::string& text)>;
  void AddParsed(const std::string& name, Parser parse, const std::string& default_text, const std::string& help,
                 std::vector<std::string> env = {});

  // Parses argv[1..]. Arguments after a bare `--` and arguments not starting with
  // `--` are returned in `positional` (an error when `positional` is null).
  // Unknown flags and malformed values are INVALID_ARGUMENT naming the flag.
  absl::Status Parse(int argc, const char* const* argv, std::vector<std::string>* positional = nullptr);
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional = nullptr);

  void set_env_lookup(EnvLookup lookup) { env_ = std::move(lookup); }
  // `--help`, `-h` or `--version` was given: print Usage() to stdout and exit 0.
  bool help_requested() const { return help_ || version_; }
  bool version_requested() const { return version_; }
  // Whether `name` was given on the command line or via the environment.
  bool WasSet(const std::string& name) const;
  // The flags and their defaults; after `--version`, the version line instead
  // ("dtrain-server 0.1.0 (git abc1234)").
  std::string Usage() const;

 private:
  enum class Type { kString, kInt, kDouble, kBool, kParsed };
  struct Flag {
    std::string name;  // canonical, with '-'
    Type type;
    void* value;
    std::string help;
    std::vector<std::string> env;
    std::string default_text;
    bool set = false;
    Parser parse;  // kParsed only
  };
  void Add(const std::string& name, Type type, void* value, const std::string& help, std::vector<std::string> env);
  Flag* Find(const std::string& name);
  absl::Status Assign(Flag& flag, const std::string& text, const std::string& origin);

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
  EnvLookup env_;
  bool help_ = false;
  bool version_ = false;
};

// FlagSet::AddParsed for a `parse` that returns absl::StatusOr<T>: the value lands in
// *value; `default_text` names *value's default as the flag would spell it.
template <typename T, typename ParseFn>
void AddParsedValue(FlagSet& flags, const std::string& name, T* value, ParseFn parse, const std::string& default_text,
                    const std::string& help, std::vector<std::string> env = {}) {
  flags.AddParsed(
      name,
      [value, parse](const std::string& text) -> absl::Status {
        auto parsed = parse(text);
        if (!parsed.ok()) return parsed.status();
        *value = *std::move(parsed);
        return absl::OkStatus();
      },
      default_text, help, std::move(env));
}

// "10,20" -> {10, 20}; empty -> {}.
absl::Status ParseIntList(const std::string& text, std::vector<int64_t>* out);

}  // namespace dtrain
