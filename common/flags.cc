#include "common/flags.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/version.h"

namespace dtrain {
namespace {

std::string Canonical(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::string ValueText(int type, const void* value) {
  switch (type) {
    case 0: return *static_cast<const std::string*>(value);
    case 1: return std::to_string(*static_cast<const int64_t*>(value));
    case 2: {
      std::ostringstream os;
      os << *static_cast<const double*>(value);
      return os.str();
    }
    default: return *static_cast<const bool*>(value) ? "true" : "false";
  }
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)),
      summary_(std::move(summary)),
      env_([](const char* n) { return static_cast<const char*>(std::getenv(n)); }) {}

void FlagSet::Add(const std::string& name, Type type, void* value, const std::string& help,
                  std::vector<std::string> env) {
  Flag f{Canonical(name), type, value, help, std::move(env), "", false, nullptr};
  if (type != Type::kParsed) f.default_text = ValueText(static_cast<int>(type), value);
  flags_.push_back(std::move(f));
}

void FlagSet::AddString(const std::string& n, std::string* v, const std::string& h, std::vector<std::string> e) {
  Add(n, Type::kString, v, h, std::move(e));
}
void FlagSet::AddInt(const std::string& n, int64_t* v, const std::string& h, std::vector<std::string> e) {
  Add(n, Type::kInt, v, h, std::move(e));
}
void FlagSet::AddDouble(const std::string& n, double* v, const std::string& h, std::vector<std::string> e) {
  Add(n, Type::kDouble, v, h, std::move(e));
}
void FlagSet::AddBool(const std::string& n, bool* v, const std::string& h, std::vector<std::string> e) {
  Add(n, Type::kBool, v, h, std::move(e));
}

void FlagSet::AddParsed(const std::string& n, Parser parse, const std::string& default_text, const std::string& h,
                        std::vector<std::string> e) {
  Add(n, Type::kParsed, nullptr, h, std::move(e));
  flags_.back().parse = std::move(parse);
  flags_.back().default_text = default_text;
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  const std::string c = Canonical(name);
  for (auto& f : flags_) {
    if (f.name == c) return &f;
  }
  return nullptr;
}

bool FlagSet::WasSet(const std::string& name) const {
  const std::string c = Canonical(name);
  for (const auto& f : flags_) {
    if (f.name == c) return f.set;
  }
  return false;
}

absl::Status FlagSet::Assign(Flag& f, const std::string& text, const std::string& origin) {
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": expected ", what, " for --", f.name, ", got '", text, "'"));
  };
  switch (f.type) {
    case Type::kString: *static_cast<std::string*>(f.value) = text; break;
    case Type::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      *static_cast<int64_t*>(f.value) = v;
      break;
    }
    case Type::kDouble: {
      double v;
      if (!absl::SimpleAtod(text, &v)) return bad("a number");
      *static_cast<double*>(f.value) = v;
      break;
    }
    case Type::kBool: {
      bool v;
      if (!absl::SimpleAtob(text, &v)) return bad("true or false");
      *static_cast<bool*>(f.value) = v;
      break;
    }
    case Type::kParsed: {
      if (absl::Status s = f.parse(text); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": --", f.name, ": ", s.message()));
      }
      break;
    }
  }
  f.set = true;
  return absl::OkStatus();
}

absl::Status FlagSet::Parse(int argc, const char* const* argv, std::vector<std::string>* positional) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return Parse(args, positional);
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional) {
  // Environment first, so the command line wins.
  for (auto& f : flags_) {
    for (const auto& name : f.env) {
      const char* v = env_(name.c_str());
      if (v == nullptr || *v == '\0') continue;
      auto s = Assign(f, v, absl::StrCat("environment ", name));
      if (!s.ok()) return s;
      break;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (positional == nullptr && i + 1 < args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i + 1], "'"));
      }
      for (size_t j = i + 1; j < args.size(); ++j) positional->push_back(args[j]);
      break;
    }
    if (a == "-h" || a == "--help" || a == "-help") {
      help_ = true;
      continue;
    }
    if (a == "--version") {
      version_ = true;
      continue;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (positional == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
      }
      positional->push_back(a);
      continue;
    }
    std::string body = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
      has_value = true;
    }
    Flag* f = Find(body);
    if (f == nullptr && !has_value && absl::StartsWith(Canonical(body), "no-")) {
      Flag* neg = Find(body.substr(3));
      if (neg != nullptr && neg->type == Type::kBool) {
        *static_cast<bool*>(neg->value) = false;
        neg->set = true;
        continue;
      }
    }
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", body, " (see ", program_, " --help)"));
    }
    if (!has_value) {
      if (f->type == Type::kBool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", f->name, " needs a value"));
      }
    }
    auto s = Assign(*f, value, "command line");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  if (version_) return VersionText(program_) + "\n";
  std::ostringstream os;
  os << "usage: " << program_ << " [flags]\n" << summary_ << "\n\nflags:\n";
  os << "  --help, --version\n      print this text, or the version and git commit, and exit 0\n";
  for (const auto& f : flags_) {
    os << "  --" << f.name << " (default: '" << f.default_text << "')";
    if (!f.env.empty()) {
      os << " [env:";
      for (const auto& e : f.env) os << ' ' << e;
      os << ']';
    }
    os << "\n      " << f.help << '\n';
  }
  return os.str();
}

absl::Status ParseIntList(const std::string& text, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("expected a comma-separated list of integers, got '", text, "'"));
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

}  // namespace dtrain
