#include "services/scheduler/membership_proto.h"

#include <gtest/gtest.h>

namespace dtrain::scheduler {
namespace {

TEST(MembershipProtoTest, ARegistrationKeepsEveryField) {
  v1::RegisterRequest req;
  req.set_role(v1::ROLE_SERVER);
  req.set_address("10.0.0.2:9000");
  req.set_requested_rank(1);
  req.set_hostname("host-b");
  req.set_pid(77);
  req.set_num_workers(3);
  req.set_num_servers(2);
  req.set_job_id("job-a");
  req.set_incarnation(4);
  req.set_replication(2);
  req.add_worker_incarnations(3);
  req.add_worker_incarnations(1);
  const absl::StatusOr<Registration> parsed = RegistrationFromProto(req);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Registration& r = *parsed;
  EXPECT_EQ(r.role, Role::kServer);
  EXPECT_EQ(r.address, "10.0.0.2:9000");
  EXPECT_EQ(r.requested_rank, 1);
  EXPECT_EQ(r.hostname, "host-b");
  EXPECT_EQ(r.pid, 77);
  EXPECT_EQ(r.num_workers, 3);
  EXPECT_EQ(r.num_servers, 2);
  EXPECT_EQ(r.job_id, "job-a");
  EXPECT_EQ(r.incarnation, 4u);
  EXPECT_EQ(r.replication, 2);
  EXPECT_EQ(r.worker_incarnations, (std::vector<uint64_t>{3, 1}));
}

TEST(MembershipProtoTest, ARequestWithoutAKnownRoleIsRefusedNamingTheRequestAndTheValue) {
  v1::RegisterRequest req;
  req.set_requested_rank(1);
  const absl::StatusOr<Registration> none = RegistrationFromProto(req);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "RegisterRequest: no role: ROLE_UNSPECIFIED");
  req.set_role(static_cast<v1::Role>(42));
  EXPECT_EQ(RegistrationFromProto(req).status().message(), "RegisterRequest: no role: value 42");

  const absl::StatusOr<NodeKey> key = KeyOf(v1::ROLE_UNSPECIFIED, 0, "HeartbeatRequest");
  EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(key.status().message(), "HeartbeatRequest: no role: ROLE_UNSPECIFIED");
  EXPECT_EQ(KeyOf(v1::ROLE_WORKER, 3, "LeaveRequest").value(), (NodeKey{Role::kWorker, 3}));
}

TEST(MembershipProtoTest, ANodeGoesOutWithEveryField) {
  NodeRecord n;
  n.role = Role::kWorker;
  n.rank = 1;
  n.address = "10.0.0.1:9001";
  n.state = NodeState::kDead;
  n.last_step = 120;
  n.last_heard_unix_ms = 1000;
  n.hostname = "host-a";
  n.pid = 4242;
  n.samples_per_sec = 812.5;
  n.incarnation = 2;
  n.restarts = 1;
  n.dead_since_unix_ms = 2000;
  n.death_reason = "heartbeat stream broke";
  n.recent_epochs.push_back({0, 2944, 3.5, 700, 1000, 812.25});
  const v1::NodeInfo info = NodeToProto(n);
  EXPECT_EQ(info.role(), v1::ROLE_WORKER);
  EXPECT_EQ(info.rank(), 1);
  EXPECT_EQ(info.address(), "10.0.0.1:9001");
  EXPECT_EQ(info.state(), v1::NODE_STATE_DEAD);
  EXPECT_EQ(info.last_step(), 120);
  EXPECT_EQ(info.last_heard_unix_ms(), 1000);
  EXPECT_EQ(info.hostname(), "host-a");
  EXPECT_EQ(info.pid(), 4242);
  EXPECT_EQ(info.samples_per_sec(), 812.5);
  EXPECT_EQ(info.incarnation(), 2u);
  EXPECT_EQ(info.restarts(), 1);
  EXPECT_EQ(info.dead_since_unix_ms(), 2000);
  EXPECT_EQ(info.death_reason(), "heartbeat stream broke");
  ASSERT_EQ(info.recent_epochs_size(), 1);
  const v1::EpochReport& e = info.recent_epochs(0);
  EXPECT_EQ(e.samples(), 2944);
  EXPECT_EQ(e.eval_correct(), 700);
  EXPECT_EQ(e.eval_count(), 1000);
  EXPECT_EQ(e.eval_loss_sum(), 812.25);
  // And an epoch report comes in as it went out.
  const EpochFigures back = EpochFromProto(e);
  EXPECT_EQ(back.epoch, 0);
  EXPECT_EQ(back.train_seconds, 3.5);
  EXPECT_EQ(back.eval_loss_sum, 812.25);
}

TEST(MembershipProtoTest, TheViewKeepsItsServersInOrder) {
  ClusterShape view;
  view.num_workers = 2;
  view.num_servers = 2;
  view.kv_store = KVStoreMode::kDistAsync;
  view.job_id = "job-a";
  view.replication = 2;
  view.servers.resize(2);
  view.servers[0].role = view.servers[1].role = Role::kServer;
  view.servers[0].rank = 0;
  view.servers[1].rank = 1;
  const v1::ClusterView out = ViewToProto(view);
  EXPECT_EQ(out.num_workers(), 2);
  EXPECT_EQ(out.num_servers(), 2);
  EXPECT_EQ(out.kv_store(), "dist_async");
  EXPECT_EQ(out.job_id(), "job-a");
  EXPECT_EQ(out.replication(), 2);
  ASSERT_EQ(out.servers_size(), 2);
  EXPECT_EQ(out.servers(1).rank(), 1);
  EXPECT_EQ(out.servers(1).role(), v1::ROLE_SERVER);
  EXPECT_EQ(KeyOf(v1::ROLE_SERVER, 1, "BarrierRequest").value(), (NodeKey{Role::kServer, 1}));
}

}  // namespace
}  // namespace dtrain::scheduler
