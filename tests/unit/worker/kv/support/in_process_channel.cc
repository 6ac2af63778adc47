// InProcessChannel: a ServerChannel over an InProcessServer's ShardStore, driving the
// store as services/server/push_pull_handler.cc does (see in_process_server.h).
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/finite_check.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker::testing {
namespace {

// Between two looks at the clock a wait blocks this long at most (real time): with a
// TickingClock, time only moves when read.
constexpr absl::Duration kPoll = absl::Milliseconds(1);

std::atomic<uint64_t> next_owner{1};

// What the store's callbacks and the waiters share: it outlives the channel, since a
// callback may hold it while the channel goes away.
struct State {
  struct Pending {
    KeyRequest request;
    bool delta_ok = false;
    absl::Time sent;
    bool done = false;
    absl::Status status;
  };

  std::string who;
  absl::Mutex mu;
  std::map<ServerChannel::Ticket, Pending> tickets ABSL_GUARDED_BY(mu);
  ServerChannel::Ticket next_id ABSL_GUARDED_BY(mu) = 1;
  absl::Status broken ABSL_GUARDED_BY(mu);
  std::unique_ptr<kv::GradientCodec> pull_codec;  // set before the first Submit
  std::atomic<int64_t> bytes_pushed{0}, bytes_pushed_uncompressed{0}, bytes_pulled{0}, bytes_pulled_uncompressed{0};

  std::string What(const KeyRequest& r) const { return absl::StrCat(who, ": ", OpName(r.op), " of key ", r.key); }

  void Finish(ServerChannel::Ticket id, const absl::Status& s) {
    absl::MutexLock lock(&mu);
    auto it = tickets.find(id);
    if (it == tickets.end() || it->second.done) return;
    it->second.done = true;
    it->second.status = s.ok() ? s : absl::Status(s.code(), absl::StrCat(What(it->second.request), ": ", s.message()));
  }

  // The store's answer to ticket `id`, written as PsClient's reader writes a response.
  void Answer(ServerChannel::Ticket id, const absl::Status& s, const kv::PullAnswer& a) {
    absl::MutexLock lock(&mu);
    auto it = tickets.find(id);
    if (it == tickets.end() || it->second.done) return;  // its waiter gave up already
    Pending& p = it->second;
    const KeyRequest& r = p.request;
    p.done = true;
    if (!s.ok()) {
      p.status = absl::Status(s.code(), absl::StrCat(What(r), ": ", s.message()));
      return;
    }
    if (r.target == KeyRequest::Target::kVersionOnly) {
      if (r.version_out != nullptr) *r.version_out = a.version;
      return;
    }
    if (a.numel != r.numel) {
      p.status = absl::InternalError(absl::StrCat(What(r), " returned ", a.numel, " elements, want ", r.numel));
      return;
    }
    const int64_t weight_bytes = r.numel * static_cast<int64_t>(sizeof(float));
    if (a.delta != nullptr && p.delta_ok && pull_codec != nullptr && a.delta_type == pull_codec->type()) {
      // As PsClient: the held weights plus the unpacked change, the server's arithmetic.
      std::vector<float> change(static_cast<size_t>(r.numel));
      p.status = pull_codec->Decode(a.delta, a.delta_bytes, change.data(), r.numel);
      if (!p.status.ok()) return;
      for (int64_t i = 0; i < r.numel; ++i) r.out[i] += change[static_cast<size_t>(i)];
      bytes_pulled.fetch_add(a.delta_bytes, std::memory_order_relaxed);
    } else {
      std::copy(a.data, a.data + r.numel, r.out);
      bytes_pulled.fetch_add(weight_bytes, std::memory_order_relaxed);
    }
    bytes_pulled_uncompressed.fetch_add(weight_bytes, std::memory_order_relaxed);
    if (r.version_out != nullptr) *r.version_out = a.version;
  }
};

class InProcessChannel final : public ServerChannel, public InProcessServer::Link {
 public:
  InProcessChannel(InProcessServer* server, int worker_rank, bool dead)
      : server_(server), worker_rank_(worker_rank), owner_(next_owner.fetch_add(1)) {
    state_->who = absl::StrCat("server ", server->rank(), " at ", server->address());
    if (dead) Break(absl::UnavailableError(absl::StrCat(state_->who, ": cannot be reached")));
    server_->Register(this);
  }
  ~InProcessChannel() override {
    server_->Unregister(this);
    server_->store().DropPulls(owner_);
  }

  void Break(const absl::Status& why) override {
    {
      absl::MutexLock lock(&state_->mu);
      if (!state_->broken.ok()) return;
      state_->broken = why;
      for (auto& [id, p] : state_->tickets) {
        if (p.done) continue;
        p.done = true;
        p.status = why;
      }
    }
    server_->store().DropPulls(owner_);  // their answers find the tickets done
  }

  Ticket Submit(const KeyRequest& r) override;
  absl::Status Wait(Ticket ticket, absl::Time deadline) override;
  bool WaitUntil(Ticket ticket, absl::Time until) override;
  absl::Status WaitAll(absl::Time deadline) override;
  std::vector<JoinNotice> TakeJoinNotices() override { return {}; }  // no replica catch-up here

  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness = 0,
                         kv::CompressionType pull_compression = kv::CompressionType::kNone) override;
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains = {}) override;
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                     absl::Duration timeout) override;
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                          absl::Duration timeout) override;

  void SetPullCompression(kv::CompressionType type) override { state_->pull_codec = kv::MakeCodec({type, 1.0f}); }
  void SetPullTimeout(absl::Duration timeout) override { pull_timeout_ = timeout; }
  void SetIdentity(const std::string& job_id, uint64_t incarnation) override {
    job_id_ = job_id;
    incarnation_ = incarnation;
  }

  const std::string& address() const override { return server_->address(); }
  int server_rank() const override { return server_->rank(); }
  int64_t bytes_pushed() const override { return state_->bytes_pushed.load(); }
  int64_t bytes_pushed_uncompressed() const override { return state_->bytes_pushed_uncompressed.load(); }
  int64_t bytes_pulled() const override { return state_->bytes_pulled.load(); }
  int64_t bytes_pulled_uncompressed() const override { return state_->bytes_pulled_uncompressed.load(); }

 private:
  // The push half of `r`, as the handler's Push: unpacked, checked, merged.
  absl::Status Push(const KeyRequest& r);
  // The pull half: parks in the store until it can be answered.
  void Pull(Ticket id, const KeyRequest& r, int64_t min_version);
  // An unary call's error, named as PsClient names it.
  absl::Status Unary(const absl::Status& s, const char* what) const {
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(state_->who, ": ", what, ": ", s.message()));
    absl::MutexLock lock(&state_->mu);
    return state_->broken;
  }

  InProcessServer* server_;
  const int worker_rank_;
  const uint64_t owner_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  absl::Duration pull_timeout_ = absl::ZeroDuration();
  std::string job_id_;
  uint64_t incarnation_ = 0;
  std::vector<float> unpacked_;
};

ServerChannel::Ticket InProcessChannel::Submit(const KeyRequest& r) {
  Ticket id;
  absl::Status refused = ValidateKeyRequest(r);
  {
    absl::MutexLock lock(&state_->mu);
    id = state_->next_id++;
    State::Pending& p = state_->tickets[id];
    p.request = r;
    p.sent = server_->clock()();
    p.delta_ok = r.target == KeyRequest::Target::kDelta && state_->pull_codec != nullptr;
    if (refused.ok()) refused = state_->broken;
    if (!refused.ok()) {
      p.done = true;
      p.status = refused;
      return id;
    }
  }
  absl::Status s = server_->store().AdmitWorker(worker_rank_, job_id_, incarnation_);
  int64_t min_version = r.step_or_version;
  if (s.ok() && r.op != KeyRequest::Op::kPull) {
    s = Push(r);
    min_version = server_->store().PullVersionAfterPush(r.step_or_version);
  }
  if (!s.ok() || r.op == KeyRequest::Op::kPush) {
    state_->Finish(id, s);
    return id;
  }
  Pull(id, r, min_version);
  return id;
}

absl::Status InProcessChannel::Push(const KeyRequest& r) {
  state_->bytes_pushed.fetch_add(r.payload.size, std::memory_order_relaxed);
  state_->bytes_pushed_uncompressed.fetch_add(r.payload.numel * static_cast<int64_t>(sizeof(float)),
                                              std::memory_order_relaxed);
  const float* grad = reinterpret_cast<const float*>(r.payload.bytes);
  int64_t numel = r.payload.size / static_cast<int64_t>(sizeof(float));
  if (r.payload.compression.type != kv::CompressionType::kNone) {
    // The size comes from the key the store holds, as on the server.
    absl::StatusOr<int64_t> n = server_->store().ElementCount(r.key);
    if (!n.ok()) return n.status();
    std::unique_ptr<kv::GradientCodec> codec = kv::MakeCodec(r.payload.compression);
    if (r.payload.size != codec->PackedBytes(*n)) {
      return absl::InvalidArgumentError(absl::StrCat("compressed data has ", r.payload.size, " bytes, expected ",
                                                     codec->PackedBytes(*n), " for ", *n, " elements"));
    }
    unpacked_.resize(static_cast<size_t>(*n));
    if (absl::Status s = codec->Decode(r.payload.bytes, r.payload.size, unpacked_.data(), *n); !s.ok()) return s;
    grad = unpacked_.data();
    numel = *n;
  }
  if (!kv::AllFinite(grad, numel)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient element ", kv::FirstNonFinite(grad, numel), " is not finite"));
  }
  return server_->store().Push(worker_rank_, r.step_or_version, r.key, grad, numel);
}

void InProcessChannel::Pull(Ticket id, const KeyRequest& r, int64_t min_version) {
  const absl::Duration wait = pull_timeout_ > absl::ZeroDuration() ? pull_timeout_ : server_->sync_timeout();
  const absl::Time deadline = server_->clock()() + wait;
  std::weak_ptr<State> weak = state_;
  if (r.target == KeyRequest::Target::kExact) {
    server_->store().Pull(
        worker_rank_, r.key, min_version, deadline,
        [weak, id](const absl::Status& s, int64_t version, const float* data, int64_t numel) {
          if (auto state = weak.lock()) state->Answer(id, s, kv::PullAnswer{version, data, numel});
        },
        owner_, kv::PullMode::kExact);
    return;
  }
  const int64_t held = r.target == KeyRequest::Target::kDelta ? r.step_or_version : -1;
  server_->store().PullDelta(
      worker_rank_, r.key, min_version, held, deadline,
      [weak, id](const absl::Status& s, const kv::PullAnswer& a) {
        if (auto state = weak.lock()) state->Answer(id, s, a);
      },
      owner_);
}

absl::Status InProcessChannel::Wait(Ticket ticket, absl::Time deadline) {
  const bool answered = WaitUntil(ticket, deadline);
  absl::MutexLock lock(&state_->mu);
  auto it = state_->tickets.find(ticket);
  if (it == state_->tickets.end()) {
    return absl::InvalidArgumentError(absl::StrCat("ticket ", ticket, " unknown or already waited for"));
  }
  absl::Status result = it->second.status;
  if (!answered) {
    result = absl::DeadlineExceededError(absl::StrCat(state_->What(it->second.request), ": no answer within ",
                                                      absl::FormatDuration(server_->clock()() - it->second.sent)));
  }
  state_->tickets.erase(it);
  return result;
}

bool InProcessChannel::WaitUntil(Ticket ticket, absl::Time until) {
  for (;;) {
    {
      absl::MutexLock lock(&state_->mu);
      auto it = state_->tickets.find(ticket);
      if (it == state_->tickets.end()) return true;
      const bool* done = &it->second.done;
      if (state_->mu.AwaitWithTimeout(absl::Condition(done), kPoll)) return true;
    }
    const absl::Time now = server_->clock()();
    if (now >= until) return false;
    // The server's once-a-second sweep: parked pulls past their deadline fail.
    server_->store().CheckDeadlines(now);
  }
}

absl::Status InProcessChannel::WaitAll(absl::Time deadline) {
  std::vector<Ticket> ids;
  {
    absl::MutexLock lock(&state_->mu);
    for (const auto& entry : state_->tickets) ids.push_back(entry.first);
  }
  absl::Status first;
  for (Ticket id : ids) {
    absl::Status s = Wait(id, deadline);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

absl::Status InProcessChannel::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                         absl::Duration /*timeout*/, int staleness,
                                         kv::CompressionType pull_compression) {
  if (!IsDistributed(mode)) {
    return Unary(absl::InvalidArgumentError(
                     absl::StrCat("kv_store \"", KVStoreModeName(mode), "\" is not served by a parameter server")),
                 "Configure");
  }
  kv::StoreConfig config;
  config.mode = IsAsync(mode) ? kv::MergeMode::kAsync
                              : (mode == KVStoreMode::kDistSsp ? kv::MergeMode::kSsp : kv::MergeMode::kSync);
  config.num_workers = num_workers;
  config.staleness = staleness;
  config.optimizer = optimizer;
  config.keep_previous_version = config.mode == kv::MergeMode::kSync;  // as dtrain-server
  config.pull_compression = pull_compression;
  return Unary(server_->store().Configure(config), "Configure");
}

absl::Status InProcessChannel::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration /*timeout*/,
                                        const std::vector<std::vector<int>>& /*chains*/) {
  for (const kv::KeyState& k : keys) {
    absl::Status s = server_->store().InitKey(k.key, k.shape, k.values.data(), static_cast<int64_t>(k.values.size()),
                                              k.version, k.optimizer_state);
    if (!s.ok()) return Unary(s, "InitKeys");
  }
  return Unary(absl::OkStatus(), "InitKeys");
}

absl::StatusOr<std::vector<kv::KeyState>> InProcessChannel::GetState(const std::vector<uint64_t>& keys,
                                                                     absl::Duration /*timeout*/) {
  std::vector<kv::KeyState> out;
  absl::Status s = Unary(server_->store().Snapshot(keys, &out), "GetState");
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<kv::KeyVersion>> InProcessChannel::GetVersions(const std::vector<uint64_t>& keys,
                                                                          absl::Duration /*timeout*/) {
  absl::Status s = server_->store().AdmitWorker(worker_rank_, job_id_, incarnation_);
  std::vector<kv::KeyVersion> out;
  if (s.ok()) s = server_->store().Versions(keys, worker_rank_, &out);
  s = Unary(s, "GetVersions");
  if (!s.ok()) return s;
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
