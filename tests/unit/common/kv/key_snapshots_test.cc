// SnapshotHook: which versions of a key are copied to the snapshot writer; and the
// checks that keep a rollback all or nothing, with the texts they give.
#include "common/kv/key_snapshots.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;

TEST(SnapshotHookTest, CopiesEveryNthVersionOnly) {
  std::vector<int64_t> copied;
  int built = 0;
  const SnapshotHook hook(3, [&copied](KeyState s) { copied.push_back(s.version); });
  for (int64_t v = 1; v <= 9; ++v) {
    hook.AtVersion(v, [&built, v] {
      ++built;  // the copy is made only when it goes out
      KeyState s;
      s.version = v;
      return s;
    });
  }
  EXPECT_THAT(copied, ElementsAre(3, 6, 9));
  EXPECT_EQ(built, 3);
}

TEST(SnapshotHookTest, NoneIsNeverDue) {
  EXPECT_FALSE(SnapshotHook().Due(0));
  EXPECT_FALSE(SnapshotHook().Due(4));
  EXPECT_FALSE(SnapshotHook(0, [](KeyState) {}).Due(4));
  EXPECT_FALSE(SnapshotHook(2, nullptr).Due(4));
  EXPECT_TRUE(SnapshotHook(2, [](KeyState) {}).Due(4));
}

TEST(RestoreCheckTest, TheSnapshotMustNameAsManyKeysAsAreHeld) {
  EXPECT_TRUE(CheckRestoreCount(40, 4, 4).ok());
  EXPECT_EQ(CheckRestoreCount(40, 3, 4),
            absl::InvalidArgumentError("restoring step 40: the snapshot has 3 keys, this server holds 4"));
}

TEST(RestoreCheckTest, EachKeyMustBeAtTheStepWithTheKeysSizes) {
  KeyState ks;
  ks.key = 5;
  ks.version = 40;
  ks.values.assign(3, 1.0f);
  ks.optimizer_state.assign(6, 0.0f);
  EXPECT_TRUE(CheckRestoredKey(ks, 40, 3, 2).ok());
  EXPECT_EQ(CheckRestoredKey(ks, 40, 3, 1),
            absl::InvalidArgumentError("restoring step 40: key 5 is at version 40 with 3 values and 6 state floats; "
                                       "the key has 3 elements and 3 state floats"));
  EXPECT_EQ(CheckRestoredKey(ks, 40, 4, 2).code(), absl::StatusCode::kInvalidArgument);
  ks.version = 39;
  EXPECT_EQ(CheckRestoredKey(ks, 40, 3, 2).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dtrain::kv
