#include "common/flags.h"

#include <map>

#include "gtest/gtest.h"

namespace dtrain {
namespace {

struct Fixture {
  std::string network = "mlp";
  int64_t epochs = 20;
  double lr = 0.05;
  bool verbose = false;
  std::map<std::string, std::string> env;
  FlagSet flags{"prog", "test"};
  Fixture() {
    flags.AddString("network", &network, "net");
    flags.AddInt("num-epochs", &epochs, "epochs", {"DTRAIN_EPOCHS", "DMLC_EPOCHS"});
    flags.AddDouble("lr", &lr, "lr");
    flags.AddBool("verbose", &verbose, "v");
    flags.set_env_lookup([this](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  }
};

TEST(FlagsTest, MxnetSpellingsAndForms) {
  Fixture f;
  std::vector<std::string> rest;
  ASSERT_TRUE(f.flags.Parse({"--network", "lenet", "--num_epochs=3", "--lr", "0.1", "--verbose", "pos"}, &rest).ok());
  EXPECT_EQ(f.network, "lenet");
  EXPECT_EQ(f.epochs, 3);
  EXPECT_DOUBLE_EQ(f.lr, 0.1);
  EXPECT_TRUE(f.verbose);
  EXPECT_EQ(rest, std::vector<std::string>{"pos"});
  EXPECT_TRUE(f.flags.WasSet("num_epochs"));
}

TEST(FlagsTest, EnvironmentFallbackInOrderAndCommandLineWins) {
  Fixture f;
  f.env = {{"DMLC_EPOCHS", "7"}};
  ASSERT_TRUE(f.flags.Parse(std::vector<std::string>{}).ok());
  EXPECT_EQ(f.epochs, 7);
  Fixture g;
  g.env = {{"DTRAIN_EPOCHS", "5"}, {"DMLC_EPOCHS", "7"}};
  ASSERT_TRUE(g.flags.Parse({"--num-epochs", "9"}).ok());
  EXPECT_EQ(g.epochs, 9);
}

TEST(FlagsTest, ErrorsNameTheFlag) {
  Fixture f;
  auto s = f.flags.Parse({"--num-epochs", "three"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--num-epochs"), absl::string_view::npos) << s.message();
  EXPECT_NE(s.message().find("three"), absl::string_view::npos);
  Fixture g;
  s = g.flags.Parse({"--bogus=1"});
  EXPECT_NE(s.message().find("unknown flag --bogus"), absl::string_view::npos) << s.message();
  Fixture h;
  s = h.flags.Parse({"--lr"});
  EXPECT_NE(s.message().find("needs a value"), absl::string_view::npos) << s.message();
  Fixture i;
  i.env = {{"DTRAIN_EPOCHS", "x"}};
  s = i.flags.Parse(std::vector<std::string>{});
  EXPECT_NE(s.message().find("DTRAIN_EPOCHS"), absl::string_view::npos) << s.message();
  Fixture j;
  s = j.flags.Parse({"stray"});
  EXPECT_FALSE(s.ok());
}

TEST(FlagsTest, DoubleDashEndsFlags) {
  Fixture f;
  std::vector<std::string> rest;
  ASSERT_TRUE(f.flags.Parse({"--lr", "1", "--", "--network", "x"}, &rest).ok());
  EXPECT_EQ(f.network, "mlp");
  EXPECT_EQ(rest, (std::vector<std::string>{"--network", "x"}));
  EXPECT_NE(f.flags.Usage().find("--num-epochs"), std::string::npos);
  EXPECT_NE(f.flags.Usage().find("DMLC_EPOCHS"), std::string::npos);
}

TEST(FlagsTest, IntList) {
  std::vector<int64_t> v;
  ASSERT_TRUE(ParseIntList("10, 20,30", &v).ok());
  EXPECT_EQ(v, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_FALSE(ParseIntList("10,x", &v).ok());
  ASSERT_TRUE(ParseIntList("", &v).ok());
  EXPECT_TRUE(v.empty());
}

// Every program gets --version through its FlagSet; it asks for the help path
// (print Usage(), exit 0) and Usage() is then the version line.
TEST(FlagsTest, VersionIsAnsweredByEveryFlagSet) {
  Fixture f;
  ASSERT_TRUE(f.flags.Parse({"--version"}).ok());
  EXPECT_TRUE(f.flags.help_requested());
  EXPECT_TRUE(f.flags.version_requested());
  const std::string text = f.flags.Usage();
  EXPECT_EQ(text.rfind("prog 0.", 0), 0u) << text;
  EXPECT_NE(text.find(" (git "), std::string::npos) << text;
  EXPECT_EQ(text.find("--num-epochs"), std::string::npos) << text;

  Fixture g;
  ASSERT_TRUE(g.flags.Parse({"--help"}).ok());
  EXPECT_FALSE(g.flags.version_requested());
  EXPECT_NE(g.flags.Usage().find("--version"), std::string::npos);
}

// A parsed flag: the parser stores the value; its refusal names the origin and the flag.
TEST(FlagsTest, ParsedFlagsStoreTheirValueOrSayWhyNot) {
  enum class Color { kRed, kBlue };
  Color color = Color::kRed;
  const char* env_value = nullptr;
  FlagSet flags("prog", "test");
  flags.AddParsed("color",
                  [&color](const std::string& text) {
                    if (text == "red")
                      color = Color::kRed;
                    else if (text == "blue")
                      color = Color::kBlue;
                    else
                      return absl::InvalidArgumentError("not red or blue");
                    return absl::OkStatus();
                  },
                  "red", "a color", {"PROG_COLOR"});
  flags.set_env_lookup([&env_value](const char*) { return env_value; });
  EXPECT_NE(flags.Usage().find("--color (default: 'red') [env: PROG_COLOR]"), std::string::npos) << flags.Usage();
  ASSERT_TRUE(flags.Parse({"--color=blue"}).ok());
  EXPECT_EQ(color, Color::kBlue);
  EXPECT_TRUE(flags.WasSet("color"));
  EXPECT_EQ(flags.Parse({"--color", "green"}).message(), "command line: --color: not red or blue");
  env_value = "pink";
  EXPECT_EQ(flags.Parse({}).message(), "environment PROG_COLOR: --color: not red or blue");
}

}  // namespace
}  // namespace dtrain
