// The worker's routing over replica chains: failover to the next member, a member
// restarted empty left out of a key until a partner copied it, and the error that
// names every gone member.
#include "services/worker/kv/replica_routing.h"

#include <string>

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

// 3 servers, replication 2: slice i's home is server i, chains [0,1] [1,2] [2,0].
ReplicaRouting ThreeServers() { return ReplicaRouting({0, 1, 2}, 2, 3); }

TEST(ReplicaRoutingTest, TheHomeGivesTheWeightsAndADeathMovesItToTheNext) {
  ReplicaRouting r = ThreeServers();
  EXPECT_EQ(r.Head(0), 0);
  EXPECT_EQ(r.Head(2), 2);
  EXPECT_TRUE(r.MarkDead(0, "stream broke"));
  EXPECT_FALSE(r.MarkDead(0, "again"));  // once
  EXPECT_EQ(r.Head(0), 1);
  EXPECT_EQ(r.Head(2), 2);
  EXPECT_FALSE(r.InChain(2, 0));
  EXPECT_EQ(r.live_servers(), 2);
}

TEST(ReplicaRoutingTest, ARestartedMemberComesBackKeyByKey) {
  ReplicaRouting r = ThreeServers();
  r.MarkDead(0, "stream broke");
  // A partner copied slice 0's key to the restarted server 0: it is the head again
  // (the fixed chain order), but slice 2's key was not copied yet.
  EXPECT_TRUE(r.Join(0, 0));
  EXPECT_FALSE(r.Join(0, 0));  // already in
  EXPECT_TRUE(r.Alive(0));
  EXPECT_EQ(r.Head(0), 0);
  EXPECT_FALSE(r.InChain(2, 0));
  EXPECT_EQ(r.Head(2), 2);
  EXPECT_FALSE(r.Join(1, 0));  // not a member of slice 1's chain
  EXPECT_TRUE(r.Join(2, 0));
  EXPECT_TRUE(r.InChain(2, 0));
}

TEST(ReplicaRoutingTest, NoReplicaLeftNamesEveryMember) {
  ReplicaRouting r = ThreeServers();
  r.MarkDead(1, "PushPull stream ended");
  r.LeaveChain(0, 0);  // restarted empty
  EXPECT_EQ(r.Head(0), -1);
  const absl::Status s = r.NoReplicaLeft(0, 7);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "key 7: every replica is gone: server 0 (restarted, key not copied yet), server 1 (PushPull stream "
            "ended) (--replication 2)");
}

TEST(ReplicaRoutingTest, WithoutReplicationTheHomeIsAll) {
  ReplicaRouting r({1, 0}, 1, 2);
  EXPECT_EQ(r.chain(0), std::vector<int>{1});
  EXPECT_EQ(r.Head(0), 1);
  r.MarkDead(1, "gone");
  EXPECT_EQ(r.Head(0), -1);
  EXPECT_EQ(r.Head(1), 0);
}

}  // namespace
}  // namespace dtrain::worker
