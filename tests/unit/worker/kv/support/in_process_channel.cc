// InProcessChannel: a ServerChannel whose requests go through the server's own
// kv::PushPullHandler (see in_process_server.h). Requests are built as PsClient builds
// them (KeyRequestProto); answers are read as PsClient's reader reads them
// (ps_client_impl.h, Impl::Deliver), with the same texts.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/push_pull_handler.h"
#include "services/server/control_handler.h"
#include "services/worker/kv/control_request_proto.h"
#include "services/worker/kv/key_request_proto.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker::testing {
namespace {

// Between two looks at the clock a wait blocks this long at most (real time): with a
// TickingClock, time only moves when read.
constexpr absl::Duration kPoll = absl::Milliseconds(1);

// The handler's sink: the answers of one channel's requests, from any thread, written
// into their tickets. It outlives the channel, since a parked pull's callback holds it.
class Answers final : public kv::AnswerSink, public std::enable_shared_from_this<Answers> {
 public:
  struct Pending {
    KeyRequest::Op op = KeyRequest::Op::kPull;
    uint64_t key = 0;
    float* out = nullptr;  // weights targets: where the weights go
    int64_t numel = 0;
    int64_t* version = nullptr;
    // A push-pull with pull_delta: `out` holds the weights of `step`, and the answer
    // may be the packed change to step + 1.
    bool delta_ok = false;
    int64_t step = -1;
    absl::Time sent;
    bool done = false;
    absl::Status status;
  };

  explicit Answers(std::string who) : who_(std::move(who)) {}

  const std::string& who() const { return who_; }
  absl::Status Annotate(const absl::Status& s, const std::string& what) const {
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(who_, ": ", what, ": ", s.message()));
  }

  void Send(const v1::PushPullResponse& resp) override { Deliver(resp, nullptr, -1); }
  DataAnswer Prepare(const char* data, size_t bytes) override {
    // As the server's sink: a copy of the weights (or packed change) travels with the
    // answer, which may go out later.
    auto copy = std::make_shared<const std::string>(data, bytes);
    return [self = shared_from_this(), copy](const v1::PushPullResponse& resp) {
      self->Deliver(resp, copy->data(), static_cast<int64_t>(copy->size()));
    };
  }

  // A new ticket; fails at once with `refused` when that is not OK, or when the
  // channel is broken.
  ServerChannel::Ticket Add(Pending p, const absl::Status& refused, absl::Time now) {
    absl::MutexLock lock(&mu_);
    const ServerChannel::Ticket id = next_id_++;
    p.sent = now;
    if (!refused.ok() || !broken_.ok()) {
      p.done = true;
      p.status = refused.ok() ? broken_ : refused;
    }
    tickets_.emplace(id, std::move(p));
    return id;
  }
  bool Done(ServerChannel::Ticket id) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(id);
    return it == tickets_.end() || it->second.done;
  }

  // Every outstanding ticket and every later one fails with `why` (the first reason
  // sticks). Returns false when the channel was broken already.
  bool Break(const absl::Status& why) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return false;
    broken_ = why;
    for (auto& [id, p] : tickets_) {
      if (p.done) continue;
      p.done = true;
      p.status = why;
    }
    return true;
  }
  absl::Status broken() {
    absl::MutexLock lock(&mu_);
    return broken_;
  }

  // Blocks up to `slice` (real time) for the ticket's answer; true when it has one.
  bool AwaitSlice(ServerChannel::Ticket id, absl::Duration slice) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(id);
    if (it == tickets_.end()) return true;
    return mu_.AwaitWithTimeout(absl::Condition(&it->second.done), slice);
  }

  // The ticket's outcome (DEADLINE_EXCEEDED when `answered` is false), once.
  absl::Status Take(ServerChannel::Ticket id, bool answered, absl::Time now) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(id);
    if (it == tickets_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("ticket ", id, " unknown or already waited for"));
    }
    const Pending& p = it->second;
    absl::Status result = p.status;
    if (!answered || !p.done) {
      const double waited = absl::ToDoubleSeconds(now - p.sent);
      result = absl::DeadlineExceededError(absl::StrFormat("%s: no answer to %s of key %d within %.*f s", who_,
                                                           OpName(p.op), p.key, waited < 10 ? 1 : 0, waited));
    }
    tickets_.erase(it);
    return result;
  }
  std::vector<ServerChannel::Ticket> Outstanding() {
    absl::MutexLock lock(&mu_);
    std::vector<ServerChannel::Ticket> ids;
    for (const auto& entry : tickets_) ids.push_back(entry.first);
    return ids;
  }
  std::vector<ServerChannel::JoinNotice> TakeJoins() {
    absl::MutexLock lock(&mu_);
    std::vector<ServerChannel::JoinNotice> out;
    out.swap(joins_);
    return out;
  }

  // Set before the first request.
  std::unique_ptr<kv::GradientCodec> pull_codec;
  std::atomic<int64_t> bytes_pushed{0}, bytes_pushed_uncompressed{0}, bytes_pulled{0}, bytes_pulled_uncompressed{0};

 private:
  // Whether `r` may be a packed change for `p`: "" if so, else what is wrong with it.
  std::string CheckPacked(const v1::PushPullResponse& r, const Pending& p) const {
    return PackedAnswerProblem(r, p.delta_ok, p.step, pull_codec.get());
  }

  // The weights answer `r` with `size` bytes at `data` (-1: none) into `p`.
  absl::Status Unpack(const v1::PushPullResponse& r, const char* data, int64_t size, const std::string& what,
                      Pending& p) {
    if (r.compression() != v1::COMPRESSION_NONE) {
      const std::string wrong = CheckPacked(r, p);
      if (!wrong.empty()) return absl::InternalError(absl::StrCat(what, ": the server sent ", wrong));
      const int64_t want = pull_codec->PackedBytes(p.numel);
      if (size != want) {
        return absl::InternalError(
            absl::StrCat(what, " returned a packed change of ", std::max<int64_t>(size, 0), " bytes, want ", want));
      }
      // PsClient's arithmetic, which is the server's: held weights + unpacked change.
      std::vector<float> change(static_cast<size_t>(p.numel));
      if (absl::Status s = pull_codec->Decode(data, size, change.data(), p.numel); !s.ok()) {
        return absl::InternalError(absl::StrCat(what, ": ", s.message()));
      }
      for (int64_t i = 0; i < p.numel; ++i) p.out[i] += change[static_cast<size_t>(i)];
      bytes_pulled.fetch_add(want, std::memory_order_relaxed);
    } else {
      const int64_t want = p.numel * static_cast<int64_t>(sizeof(float));
      if (size != want) {
        return absl::InternalError(absl::StrCat(what, " returned ", std::max<int64_t>(size, 0), " bytes, want ", want));
      }
      if (want > 0) std::memcpy(p.out, data, static_cast<size_t>(want));
      bytes_pulled.fetch_add(want, std::memory_order_relaxed);
    }
    bytes_pulled_uncompressed.fetch_add(p.numel * static_cast<int64_t>(sizeof(float)), std::memory_order_relaxed);
    if (p.version != nullptr) *p.version = r.version();
    return absl::OkStatus();
  }

  // Replication: restarted chain members the answer says hold its key now.
  void NoteJoined(const v1::PushPullResponse& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int j = 0; j < r.joined_servers_size() && j < r.joined_addresses_size(); ++j) {
      joins_.push_back({r.key(), r.version(), r.joined_servers(j), r.joined_addresses(j)});
    }
  }

  void Deliver(const v1::PushPullResponse& r, const char* data, int64_t size) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(r.request_id());
    if (it == tickets_.end() || it->second.done) return;  // its waiter gave up already
    Pending& p = it->second;
    const std::string what = absl::StrCat(who_, ": ", OpName(p.op), " of key ", p.key);
    absl::Status st;
    if (r.code() != 0) {
      st = absl::Status(static_cast<absl::StatusCode>(r.code()), absl::StrCat(what, ": ", r.message()));
    } else if (p.out != nullptr) {
      st = Unpack(r, data, size, what, p);
    } else if (p.version != nullptr) {
      *p.version = r.version();  // a version-only answer
    }
    if (st.ok() && r.joined_servers_size() > 0) NoteJoined(r);
    p.done = true;
    p.status = st;
  }

  const std::string who_;
  absl::Mutex mu_;
  std::map<ServerChannel::Ticket, Pending> tickets_ ABSL_GUARDED_BY(mu_);
  ServerChannel::Ticket next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::vector<ServerChannel::JoinNotice> joins_ ABSL_GUARDED_BY(mu_);
};

class InProcessChannel final : public ServerChannel, public InProcessServer::Link {
 public:
  InProcessChannel(InProcessServer* server, int worker_rank, bool dead)
      : server_(server),
        answers_(std::make_shared<Answers>(absl::StrCat("server ", server->rank(), " at ", server->address()))),
        handler_(&server->store(), server->stream_options(), answers_, server->clock()) {
    sender_.worker_rank = worker_rank;
    if (dead) answers_->Break(absl::UnavailableError(absl::StrCat(answers_->who(), ": cannot be reached")));
    server_->Register(this);
  }
  ~InProcessChannel() override {
    server_->Unregister(this);
    // As PsClient's destructor: nothing is written into a caller's buffer after this.
    answers_->Break(absl::CancelledError(absl::StrCat(answers_->who(), ": client closed")));
    server_->store().DropPulls(handler_.owner());  // the reactor's OnDone
  }

  void Break(const absl::Status& why) override {
    // The server's parked pulls of this stream die with it; their answers find the
    // tickets done.
    if (answers_->Break(why)) server_->store().DropPulls(handler_.owner());
  }

  Ticket Submit(const KeyRequest& r) override;
  absl::Status Wait(Ticket ticket, absl::Time deadline) override {
    const bool answered = WaitUntil(ticket, deadline);
    return answers_->Take(ticket, answered, server_->clock()());
  }
  bool WaitUntil(Ticket ticket, absl::Time until) override;
  absl::Status WaitAll(absl::Time deadline) override;
  std::vector<JoinNotice> TakeJoinNotices() override { return answers_->TakeJoins(); }

  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness = 0,
                         kv::CompressionType pull_compression = kv::CompressionType::kNone,
                         const kv::EpochLrSteps& epoch_lr = {}) override;
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains = {}) override;
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                     absl::Duration timeout) override;
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                          absl::Duration timeout) override;

  void SetPullCompression(kv::CompressionType type) override {
    answers_->pull_codec = kv::MakeCodec({type, 1.0f});
    sender_.pull_delta = answers_->pull_codec != nullptr;
  }
  void SetPullTimeout(absl::Duration timeout) override {
    sender_.pull_timeout_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
  }
  void SetIdentity(const std::string& job_id, uint64_t incarnation) override {
    sender_.job_id = job_id;
    sender_.incarnation = incarnation;
  }

  const std::string& address() const override { return server_->address(); }
  int server_rank() const override { return server_->rank(); }
  int64_t bytes_pushed() const override { return answers_->bytes_pushed.load(); }
  int64_t bytes_pushed_uncompressed() const override { return answers_->bytes_pushed_uncompressed.load(); }
  int64_t bytes_pulled() const override { return answers_->bytes_pulled.load(); }
  int64_t bytes_pulled_uncompressed() const override { return answers_->bytes_pulled_uncompressed.load(); }

 private:
  // A unary call's outcome, named as PsClient names it. A killed server answers none
  // (the channel's broken status); a stream the server closed after a refusal leaves
  // the unary calls working, as gRPC's do.
  absl::Status Unary(const absl::Status& s, const char* what) const { return answers_->Annotate(s, what); }
  absl::Status Reachable() const { return server_->killed() ? answers_->broken() : absl::OkStatus(); }
  // The server closed the stream after `refusal` (the handler's: a fenced incarnation,
  // another job): PsClient reads the stream's end as FAILED_PRECONDITION "closed", or
  // any other code as UNAVAILABLE "broke".
  void Close(const absl::Status& refusal);

  InProcessServer* server_;
  const std::shared_ptr<Answers> answers_;
  kv::PushPullHandler handler_;  // after answers_, its sink
  RequestSender sender_;
};

ServerChannel::Ticket InProcessChannel::Submit(const KeyRequest& r) {
  using Target = KeyRequest::Target;
  const bool weights = r.target == Target::kWeights || r.target == Target::kExact || r.target == Target::kDelta;
  v1::PushPullRequest req = KeyRequestProto(r, sender_);
  Answers::Pending p{r.op, r.key, weights ? r.out : nullptr, r.numel, r.version_out};
  if (req.pull_delta()) {
    p.delta_ok = true;
    p.step = r.step_or_version;
  }
  const Ticket id = answers_->Add(p, answers_->Annotate(ValidateKeyRequest(r), "Submit"), server_->clock()());
  if (answers_->Done(id)) return id;
  req.set_request_id(id);
  const bool push = r.op != KeyRequest::Op::kPull;
  if (push) {
    answers_->bytes_pushed.fetch_add(r.payload.size, std::memory_order_relaxed);
    answers_->bytes_pushed_uncompressed.fetch_add(r.payload.numel * static_cast<int64_t>(sizeof(float)),
                                                  std::memory_order_relaxed);
  }
  // As the server's stream hands over a decoded request: the push's bytes where they
  // lie, their length, and whether they were taken (data after `op` on the wire).
  const absl::Status refusal = handler_.Handle(req, reinterpret_cast<const float*>(r.payload.bytes),
                                               push ? r.payload.size : -1, push && r.payload.size > 0);
  if (!refusal.ok()) Close(refusal);
  return id;
}

void InProcessChannel::Close(const absl::Status& refusal) {
  // The server's stream drops its parked pulls (they are answered CANCELLED), then ends.
  server_->store().DropPulls(handler_.owner());
  const bool refused = refusal.code() == absl::StatusCode::kFailedPrecondition;
  const std::string why = absl::StrCat(answers_->who(), ": PushPull stream ", refused ? "closed" : "broke", ": ",
                                       refusal.message(), " (code ", static_cast<int>(refusal.code()), ")");
  answers_->Break(refused ? absl::FailedPreconditionError(why) : absl::UnavailableError(why));
}

bool InProcessChannel::WaitUntil(Ticket ticket, absl::Time until) {
  for (;;) {
    if (answers_->AwaitSlice(ticket, kPoll)) return true;
    const absl::Time now = server_->clock()();
    if (now >= until) return answers_->Done(ticket);
    // The server's once-a-second sweep: parked pulls past their deadline fail.
    server_->store().CheckDeadlines(now);
  }
}

absl::Status InProcessChannel::WaitAll(absl::Time deadline) {
  absl::Status first;
  for (Ticket id : answers_->Outstanding()) {
    absl::Status s = Wait(id, deadline);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

// The control calls: built as PsClient builds them, answered by the server's own
// ControlHandler, read as PsClient reads the answers (control_request_proto.h).
absl::Status InProcessChannel::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                         absl::Duration /*timeout*/, int staleness,
                                         kv::CompressionType pull_compression, const kv::EpochLrSteps& epoch_lr) {
  if (absl::Status s = Reachable(); !s.ok()) return s;
  const v1::ConfigureRequest req =
      ConfigureRequestProto(mode, num_workers, optimizer, staleness, pull_compression, epoch_lr);
  return Unary(server_->control().Configure(req), "Configure");
}

absl::Status InProcessChannel::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration /*timeout*/,
                                        const std::vector<std::vector<int>>& chains) {
  if (absl::Status s = Reachable(); !s.ok()) return s;
  size_t next = 0;
  while (next < keys.size()) {
    const v1::InitKeysRequest req = NextInitKeysRequest(keys, chains, &next);
    if (absl::Status s = server_->control().InitKeys(req); !s.ok()) return Unary(s, "InitKeys");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<kv::KeyState>> InProcessChannel::GetState(const std::vector<uint64_t>& keys,
                                                                     absl::Duration /*timeout*/) {
  if (absl::Status s = Reachable(); !s.ok()) return s;
  const v1::GetStateRequest req = GetStateRequestProto(keys);
  // As the server's stream: the keys are checked first, then each is sent in turn.
  absl::StatusOr<std::vector<uint64_t>> sent = server_->control().StateKeys(req);
  if (!sent.ok()) return Unary(sent.status(), "GetState");
  std::vector<kv::KeyState> out;
  v1::KeyState message;
  for (uint64_t k : *sent) {
    absl::Status s = server_->control().KeyStateOf(k, &message);
    kv::KeyState state;
    if (s.ok()) s = KeyStateFromProto(message, &state);
    if (!s.ok()) return Unary(s, "GetState");
    out.push_back(std::move(state));
  }
  return out;
}

absl::StatusOr<std::vector<kv::KeyVersion>> InProcessChannel::GetVersions(const std::vector<uint64_t>& keys,
                                                                          absl::Duration /*timeout*/) {
  if (absl::Status s = Reachable(); !s.ok()) return s;
  const v1::GetVersionsRequest req =
      GetVersionsRequestProto(keys, sender_.worker_rank, sender_.job_id, sender_.incarnation);
  v1::GetVersionsResponse resp;
  if (absl::Status s = server_->control().GetVersions(req, &resp); !s.ok()) return Unary(s, "GetVersions");
  absl::StatusOr<std::vector<kv::KeyVersion>> out = VersionsFromProto(resp, keys.size());
  if (!out.ok()) return Unary(out.status(), "GetVersions");
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerChannel>> InProcessServer::Connect(int worker_rank,
                                                                        absl::Duration connect_timeout) {
  const bool dead = killed();
  if (dead && connect_timeout > absl::ZeroDuration()) {
    return absl::UnavailableError(absl::StrCat("cannot reach parameter server ", rank_, " at ", address_));
  }
  return std::unique_ptr<ServerChannel>(new InProcessChannel(this, worker_rank, dead));
}

}  // namespace dtrain::worker::testing
