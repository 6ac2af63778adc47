// The scheduler service of an elastic job over real gRPC, in one process: nodes
// register with --elastic, a joiner gets its rank at once, the server's heartbeat
// stream (a real client written here, standing in for dtrain-server) carries the
// proposal and the commit, and only then do the workers' heartbeats carry the new
// schedule; leave notices, a node with other bounds, GetStatus.
#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>
#include <vector>

#include "common/elastic/membership_file.h"
#include "common/elastic/membership_proto.h"
#include "common/grpc_util.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/scheduler/barrier.h"
#include "services/scheduler/elastic_job.h"
#include "services/scheduler/membership.h"
#include "services/scheduler/scheduler_service.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::scheduler {
namespace {

using ::testing::HasSubstr;
using v1::MembershipOrder;

class ElasticServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ElasticJobOptions eo;
    eo.spec.min_workers = 2;
    eo.spec.max_workers = 4;
    eo.num_workers = 2;
    eo.num_servers = 1;
    eo.membership_file = dir_.File("membership.json");
    job_ = *ElasticJob::Create(eo);
    MembershipOptions mo;
    mo.num_workers = 2;
    mo.num_servers = 1;
    mo.kv_store = KVStoreMode::kDistSync;
    mo.elastic = job_.get();
    membership_ = std::make_unique<Membership>(mo);
    barriers_ = std::make_unique<BarrierSet>(2, 1, [](const NodeKey&) { return std::string(); });
    SchedulerServiceOptions so;
    so.register_timeout = absl::Seconds(10);
    so.elastic = job_.get();
    service_ = std::make_unique<SchedulerService>(membership_.get(), barriers_.get(), so);
    int port = 0;
    server_ = StartGrpcServer("127.0.0.1:0", service_.get(), &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Scheduler::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    service_->Close();
    server_->Shutdown(DeadlineAfter(absl::Milliseconds(200)));
  }

  grpc::Status Register(v1::Role role, int rank, const std::string& elastic, v1::RegisterResponse* response) {
    v1::RegisterRequest request;
    request.set_role(role);
    request.set_requested_rank(rank);
    request.set_address("127.0.0.1:1");
    request.set_num_workers(2);
    request.set_num_servers(1);
    request.set_elastic(elastic);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Register(&context, request, response);
  }
  grpc::Status Leave(int rank, bool elastic_leave) {
    v1::LeaveRequest request;
    request.set_role(v1::ROLE_WORKER);
    request.set_rank(rank);
    request.set_elastic_leave(elastic_leave);
    v1::LeaveResponse response;
    grpc::ClientContext context;
    return stub_->Leave(&context, request, &response);
  }
  // Workers 0 and 1 and server 0, registered at once: the job starts.
  void StartJob() {
    std::vector<std::future<grpc::Status>> nodes;
    for (v1::Role role : {v1::ROLE_WORKER, v1::ROLE_WORKER, v1::ROLE_SERVER}) {
      nodes.push_back(std::async(std::launch::async, [this, role] {
        v1::RegisterResponse r;
        grpc::Status s = Register(role, -1, "2:4", &r);
        EXPECT_EQ(r.membership().generations_size(), 1);
        return s;
      }));
    }
    for (auto& n : nodes) ASSERT_TRUE(n.get().ok());
  }

  testing::TempDir dir_;  // removed with the test
  std::unique_ptr<ElasticJob> job_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<BarrierSet> barriers_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

// One node's heartbeat stream.
struct Stream {
  Stream(v1::Scheduler::Stub& stub, v1::Role role, int rank) : role(role), rank(rank) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    rpc = stub.Heartbeat(&context);
  }
  ~Stream() {
    rpc->WritesDone();
    rpc->Finish().ok();
  }
  // A heartbeat (with the server's report, if any) and its answer.
  v1::HeartbeatResponse Beat(const v1::MembershipReport* report = nullptr) {
    v1::HeartbeatRequest request;
    request.set_role(role);
    request.set_rank(rank);
    if (report != nullptr) *request.mutable_membership() = *report;
    EXPECT_TRUE(rpc->Write(request));
    v1::HeartbeatResponse response;
    EXPECT_TRUE(rpc->Read(&response));
    return response;
  }
  v1::Role role;
  int rank;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>> rpc;
};

v1::MembershipReport Answer(const MembershipOrder& order, int64_t highest_step) {
  v1::MembershipReport r;
  r.set_generation(order.generation());
  r.set_phase(order.phase());
  r.set_highest_step(highest_step);
  r.set_committed_from(order.phase() == MembershipOrder::PHASE_COMMIT ? order.next().from_step() : -1);
  return r;
}

TEST_F(ElasticServiceTest, AJoinerIsAnsweredAtOnceAndWorkersHearOfItOnceTheServerCommitted) {
  StartJob();
  v1::RegisterResponse joined;
  ASSERT_TRUE(Register(v1::ROLE_WORKER, -1, "2:4", &joined).ok());
  EXPECT_EQ(joined.rank(), 2);
  EXPECT_EQ(joined.incarnation(), 1u);
  EXPECT_FALSE(joined.rejoined());
  ASSERT_EQ(joined.membership().generations_size(), 1);  // it waits for a generation that holds it
  EXPECT_EQ(joined.membership().max_workers(), 4);

  Stream server(*stub_, v1::ROLE_SERVER, 0);
  Stream worker(*stub_, v1::ROLE_WORKER, 0);
  // An elastic server reports on every heartbeat, its first too: the generations it holds.
  v1::MembershipReport first;
  first.set_highest_step(-1);
  first.set_committed_from(-1);
  *first.add_generations() = elastic::GenerationToProto({0, {0, 1}});
  const v1::HeartbeatResponse propose = server.Beat(&first);
  ASSERT_TRUE(propose.has_membership_order());
  EXPECT_EQ(propose.membership_order().phase(), MembershipOrder::PHASE_PROPOSE);
  EXPECT_EQ(propose.membership_order().generation(), 1);
  EXPECT_EQ(worker.Beat().membership().generations_size(), 1);  // not committed yet
  const v1::MembershipReport proposed = Answer(propose.membership_order(), 179);
  const v1::HeartbeatResponse commit = server.Beat(&proposed);
  ASSERT_EQ(commit.membership_order().phase(), MembershipOrder::PHASE_COMMIT);
  EXPECT_EQ(commit.membership_order().next().from_step(), 180);
  EXPECT_FALSE(commit.membership_order().drop_pending());
  EXPECT_EQ(worker.Beat().membership().generations_size(), 1);
  const v1::MembershipReport committed = Answer(commit.membership_order(), 179);
  ASSERT_TRUE(server.rpc->Write([&] {
    v1::HeartbeatRequest r;
    r.set_role(v1::ROLE_SERVER);
    *r.mutable_membership() = committed;
    return r;
  }()));
  v1::MembershipState state;
  for (int beat = 0; beat < 50 && state.generations_size() < 2; ++beat) state = worker.Beat().membership();
  ASSERT_EQ(state.generations_size(), 2);
  EXPECT_EQ(state.generations(1).from_step(), 180);
  EXPECT_EQ(state.generations(1).ranks_size(), 3);

  v1::GetStatusResponse status;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetStatus(&context, v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.membership().generations_size(), 2);
  const auto file = elastic::ReadMembershipFile(dir_.File("membership.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->latest().from_step, 180);
}

TEST_F(ElasticServiceTest, ANodeWithOtherBoundsIsRefusedAndALeaveBelowMinNamesIt) {
  v1::RegisterResponse r;
  const grpc::Status other = Register(v1::ROLE_WORKER, -1, "2:5", &r);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(other.error_message(), HasSubstr("started with --elastic 2:5, but the job runs with --elastic 2:4"));
  StartJob();
  const grpc::Status below = Leave(1, /*elastic_leave=*/true);
  EXPECT_EQ(below.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(below.error_message(), HasSubstr("below --elastic 2:4's MIN 2"));
  v1::RegisterResponse joined;
  ASSERT_TRUE(Register(v1::ROLE_WORKER, 3, "2:4", &joined).ok());  // a free rank asked for
  EXPECT_EQ(joined.rank(), 3);
  EXPECT_TRUE(Leave(1, true).ok());  // three would be in the job: two remain
  // A plain Leave of a worker in the latest generation is its finish, not a departure.
  EXPECT_TRUE(Leave(0, false).ok());
  std::string reason;
  EXPECT_FALSE(membership_->JobOver(&reason));
}

}  // namespace
}  // namespace dtrain::scheduler
