// The in-process channel (support/in_process_server.h) against the real thing: the
// same requests go through it and through PsClient to the ParameterServer service over
// gRPC on loopback (tests/unit/server/loopback.h), and every answer must be the same:
// status code and text (the server's address aside), the bytes written into `out`,
// the version, and what GetVersions and GetState read back. A fake that drifted from
// the server's request path fails here.
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/kv/compression/gradient_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/server_channel.h"
#include "tests/unit/server/loopback.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker {
namespace {

// One answer, as the caller sees it.
struct Outcome {
  std::string asked;  // which request, for the failure message
  int code = 0;
  std::string message;  // the server's address replaced by "ADDRESS"
  std::string out;      // the bytes of `out` after the wait
  int64_t version = -1;

  bool operator==(const Outcome& o) const {
    return asked == o.asked && code == o.code && message == o.message && out == o.out && version == o.version;
  }
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << o.asked << " -> code " << o.code << " \"" << o.message << "\" version " << o.version << ", "
            << o.out.size() << " bytes out";
}

using Connect = std::function<std::unique_ptr<ServerChannel>(int rank)>;

// Asks workers' channels and writes down the answers. Owns every buffer a request
// reads or writes, so that they outlive the waits.
class Script {
 public:
  // `store`: the server's, to see what it parked.
  Script(Connect connect, std::string address, const kv::ShardStore* store)
      : connect_(std::move(connect)), address_(std::move(address)), store_(store) {}

  ServerChannel& worker(int rank) {
    while (static_cast<int>(workers_.size()) <= rank) workers_.push_back(connect_(static_cast<int>(workers_.size())));
    return *workers_[static_cast<size_t>(rank)];
  }
  // Another process (channel) of `rank`.
  ServerChannel& Another(int rank) {
    others_.push_back(connect_(rank));
    return *others_.back();
  }

  float* Floats(std::vector<float> v) {
    floats_.push_back(std::move(v));
    return floats_.back().data();
  }
  PushData Packed(const std::vector<float>& grad, kv::CompressionSpec spec, int64_t size_change = 0) {
    auto codec = kv::MakeCodec(spec);
    const int64_t n = static_cast<int64_t>(grad.size());
    std::vector<float> residual(grad.size(), 0.0f);
    std::string packed(static_cast<size_t>(codec->PackedBytes(n)), '\0');
    codec->Encode(grad.data(), residual.data(), n, packed.data());
    packed.resize(packed.size() + static_cast<size_t>(size_change));
    bytes_.push_back(std::move(packed));
    PushData d;
    d.bytes = bytes_.back().data();
    d.size = static_cast<int64_t>(bytes_.back().size());
    d.numel = n;
    d.compression = spec;
    return d;
  }

  // Submits `r` on `channel`; an `out` of r.numel floats is given when r has none.
  void Ask(ServerChannel& channel, const std::string& asked, KeyRequest r) {
    const bool needs_out = r.target != KeyRequest::Target::kNone && r.target != KeyRequest::Target::kVersionOnly;
    if (needs_out && r.out == nullptr) r.out = Floats(std::vector<float>(static_cast<size_t>(r.numel), -7.0f));
    Pending p{&channel, 0, asked, r.out, r.numel, std::make_unique<int64_t>(-1)};
    if (r.version_out == nullptr) r.version_out = p.version.get();
    p.version_out = r.version_out;
    p.ticket = channel.Submit(r);
    pending_.push_back(std::move(p));
  }
  // Waits until the server has `n` pulls parked: over gRPC a request is on its way
  // when Submit returns, and a unary call may overtake it.
  void AwaitParked(int64_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (store_->parked_pulls() < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_GE(store_->parked_pulls(), n) << "the server did not park the pull within 10 s";
  }
  // Waits for everything asked, in order.
  void Settle() {
    for (Pending& p : pending_) {
      const absl::Status s = p.channel->Wait(p.ticket, absl::Now() + absl::Seconds(10));
      Outcome o{p.asked, static_cast<int>(s.code()), Clean(s.message())};
      if (p.out != nullptr) o.out.assign(reinterpret_cast<const char*>(p.out), sizeof(float) * p.numel);
      o.version = *p.version_out;
      outcomes_.push_back(std::move(o));
    }
    pending_.clear();
  }
  void Note(const std::string& asked, const absl::Status& s, const std::string& out = "") {
    outcomes_.push_back({asked, static_cast<int>(s.code()), Clean(s.message()), out});
  }
  void Versions(ServerChannel& channel, const std::string& asked) {
    absl::StatusOr<std::vector<kv::KeyVersion>> v = channel.GetVersions({}, server::kRpc);
    std::string out;
    if (v.ok()) {
      for (const kv::KeyVersion& k : *v) absl::StrAppend(&out, k.key, "@", k.version, "/", k.last_push_step, " ");
    }
    Note(asked, v.status(), out);
  }
  void State(ServerChannel& channel, const std::string& asked) {
    absl::StatusOr<std::vector<kv::KeyState>> st = channel.GetState({}, server::kRpc);
    std::string out;
    if (st.ok()) {
      for (const kv::KeyState& k : *st) {
        absl::StrAppend(&out, k.key, "@", k.version, ":");
        out.append(reinterpret_cast<const char*>(k.values.data()), k.values.size() * sizeof(float));
        out.append(reinterpret_cast<const char*>(k.optimizer_state.data()), k.optimizer_state.size() * sizeof(float));
      }
    }
    Note(asked, st.status(), out);
  }
  void Pulled() {
    for (size_t r = 0; r < workers_.size(); ++r) {
      outcomes_.push_back(
          {absl::StrCat("worker ", r, "'s bytes pulled"), 0,
           absl::StrCat(workers_[r]->bytes_pulled(), " of ", workers_[r]->bytes_pulled_uncompressed())});
    }
  }

  const std::vector<Outcome>& outcomes() const { return outcomes_; }

 private:
  struct Pending {
    ServerChannel* channel;
    ServerChannel::Ticket ticket;
    std::string asked;
    float* out;
    int64_t numel;
    std::unique_ptr<int64_t> version;
    int64_t* version_out = nullptr;
  };
  std::string Clean(absl::string_view message) const { return absl::StrReplaceAll(message, {{address_, "ADDRESS"}}); }

  Connect connect_;
  const std::string address_;
  const kv::ShardStore* store_;
  std::vector<std::unique_ptr<ServerChannel>> workers_;
  std::vector<std::unique_ptr<ServerChannel>> others_;
  std::deque<std::vector<float>> floats_;
  std::deque<std::string> bytes_;
  std::vector<Pending> pending_;
  std::vector<Outcome> outcomes_;
};

using Scenario = std::function<void(Script&)>;

kv::OptimizerOptions Sgd() {
  kv::OptimizerOptions o;
  o.learning_rate = 0.5;
  o.momentum = 0.9;
  return o;
}

// Worker `rank`'s gradient of `step` for a key of `n` elements: inexact binary
// fractions, so that rounding shows.
std::vector<float> Grad(int rank, int64_t step, uint64_t key, int64_t n) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    g[static_cast<size_t>(i)] = static_cast<float>(rank + 1) * 0.1f + static_cast<float>(step) * 0.37f -
                                static_cast<float>(key + static_cast<uint64_t>(i)) * 0.013f;
  }
  return g;
}

void Setup(Script& s, kv::CompressionType pull_compression = kv::CompressionType::kNone) {
  s.Note("Configure", s.worker(0).Configure(KVStoreMode::kDistSync, 2, Sgd(), server::kRpc, 0, pull_compression));
  s.Note("InitKeys",
         s.worker(0).InitKeys({server::Key(5, {1.5f, -2.25f, 3.0f, 0.1f}), server::Key(9, {0.3f, 0.7f, -0.2f})},
                              server::kRpc));
  s.worker(1);
}

// Pushes, pulls and push-pulls of every target, a pull that times out, and the
// requests the server refuses, with their texts.
void Requests(Script& s) {
  Setup(s);
  ServerChannel& w0 = s.worker(0);
  ServerChannel& w1 = s.worker(1);
  // Nobody pushed yet: the server gives up after its pull timeout, naming both.
  ServerChannel& impatient = s.Another(0);
  impatient.SetPullTimeout(absl::Milliseconds(50));
  s.Ask(impatient, "pull that times out", KeyRequest::Pull(5, 1, nullptr, 4));
  s.Settle();

  s.Ask(w0, "w0 push-pull 5 step 0", KeyRequest::PushPull(0, 5, s.Floats(Grad(0, 0, 5, 4)), nullptr, 4));
  s.Ask(w1, "w1 push-pull 5 step 0", KeyRequest::PushPull(0, 5, s.Floats(Grad(1, 0, 5, 4)), nullptr, 4));
  s.Ask(w0, "w0 push 9 step 0", KeyRequest::Push(0, 9, s.Floats(Grad(0, 0, 9, 3)), 3));
  s.Ask(w1, "w1 push-pull version 9 step 0", KeyRequest::PushPullVersionOnly(0, 9, s.Floats(Grad(1, 0, 9, 3)), 3));
  s.Settle();

  s.Ask(w0, "w0 pull 9 version 1", KeyRequest::Pull(9, 1, nullptr, 3));
  s.Ask(w1, "w1 exact pull 5 version 0", KeyRequest::PullExact(5, 0, nullptr, 4));
  s.Ask(w1, "w1 exact pull 5 version 1", KeyRequest::PullExact(5, 1, nullptr, 4));
  s.Ask(w0, "w0 version of 5", KeyRequest::PullVersionOnly(5, 1));
  s.Settle();

  for (int64_t step = 1; step < 3; ++step) {
    for (int r = 0; r < 2; ++r) {
      ServerChannel& w = s.worker(r);
      const std::string who = absl::StrCat("w", r, " step ", step);
      s.Ask(w, who + " push-pull 5", KeyRequest::PushPull(step, 5, s.Floats(Grad(r, step, 5, 4)), nullptr, 4));
      if (r == 0 && step == 2) {  // 2-bit packed, as --gc-type 2bit sends it
        const PushData packed = s.Packed(Grad(r, step, 9, 3), {kv::CompressionType::kTwoBit, 0.05f});
        s.Ask(w, who + " packed push-pull 9",
              KeyRequest::PushPull(step, 9, packed, s.Floats(std::vector<float>(3)), false));
      } else {
        s.Ask(w, who + " push-pull 9", KeyRequest::PushPull(step, 9, s.Floats(Grad(r, step, 9, 3)), nullptr, 3));
      }
    }
    s.Settle();
  }

  // Refused, each with the server's text.
  s.Ask(w0, "exact pull of a version gone", KeyRequest::PullExact(5, 0, nullptr, 4));
  s.Ask(w0, "pull of an unknown key", KeyRequest::Pull(77, 0, nullptr, 2));
  s.Ask(w0, "push of NaN", KeyRequest::Push(3, 5, s.Floats({1, std::numeric_limits<float>::quiet_NaN(), 0, 0}), 4));
  s.Ask(w0, "push of the wrong size", KeyRequest::Push(3, 5, s.Floats({1, 2}), 2));
  s.Ask(w1, "packed push of the wrong size",
        KeyRequest::Push(3, 9, s.Packed(Grad(1, 3, 9, 3), {kv::CompressionType::kTwoBit, 0.05f}, 1)));
  KeyRequest nonsense = KeyRequest::Pull(5, 0, s.Floats({0, 0, 0, 0}), 4);
  nonsense.target = KeyRequest::Target::kNone;
  s.Ask(w0, "a pull answered with nothing", nonsense);
  s.Ask(w1, "pull into a buffer of the wrong size", KeyRequest::Pull(5, 0, nullptr, 3));
  s.Settle();

  s.Versions(w0, "w0 GetVersions");
  s.Versions(w1, "w1 GetVersions");
  s.State(w0, "GetState");
  s.Pulled();
}

// Pull compression: each step's change packed as fp16 and added to the held weights.
void PackedPulls(Script& s) {
  Setup(s, kv::CompressionType::kFp16);
  std::vector<float*> held;
  for (int r = 0; r < 2; ++r) {
    s.worker(r).SetPullCompression(kv::CompressionType::kFp16);
    held.push_back(s.Floats(std::vector<float>(4)));
    s.Ask(s.worker(r), absl::StrCat("w", r, " first pull"), KeyRequest::Pull(5, 0, held.back(), 4));
  }
  s.Settle();
  for (int64_t step = 0; step < 3; ++step) {
    for (int r = 0; r < 2; ++r) {
      const PushData g = PushData::Floats(s.Floats(Grad(r, step, 5, 4)), 4);
      s.Ask(s.worker(r), absl::StrCat("w", r, " step ", step, " delta push-pull"),
            KeyRequest::PushPull(step, 5, g, held[static_cast<size_t>(r)], /*pull_delta=*/true));
    }
    s.Settle();
  }
  s.State(s.worker(0), "GetState");
  s.Pulled();
}

// Recovery: a replacement fences its predecessor; another job is refused.
void Fencing(Script& s) {
  s.worker(0).SetIdentity("job-a", 1);
  s.worker(1).SetIdentity("job-a", 1);
  Setup(s);
  s.Ask(s.worker(1), "w1 push-pull before dying", KeyRequest::PushPull(0, 5, s.Floats(Grad(1, 0, 5, 4)), nullptr, 4));
  s.AwaitParked(1);  // its push is in before the replacement fences it
  ServerChannel& replacement = s.Another(1);
  replacement.SetIdentity("job-a", 2);
  s.Versions(replacement, "replacement GetVersions");
  s.Settle();
  s.Ask(s.worker(1), "fenced pull", KeyRequest::Pull(5, 0, nullptr, 4));
  s.Settle();
  s.Ask(s.worker(0), "w0 push-pull", KeyRequest::PushPull(0, 5, s.Floats(Grad(0, 0, 5, 4)), nullptr, 4));
  s.Ask(replacement, "replacement pull", KeyRequest::Pull(5, 1, nullptr, 4));
  s.Settle();
  ServerChannel& stranger = s.Another(0);
  stranger.SetIdentity("job-b", 1);
  s.Ask(stranger, "another job's pull", KeyRequest::Pull(5, 0, nullptr, 4));
  s.Settle();
}

// The unary calls: setup repeated or contradicted, keys that cannot be, reads of keys
// not held.
void Control(Script& s) {
  ServerChannel& w0 = s.worker(0);
  s.Note("Configure local", w0.Configure(KVStoreMode::kLocal, 2, Sgd(), server::kRpc));
  Setup(s);
  s.Note("Configure again", w0.Configure(KVStoreMode::kDistSync, 2, Sgd(), server::kRpc));
  s.Note("Configure for 3 workers", w0.Configure(KVStoreMode::kDistSync, 3, Sgd(), server::kRpc));
  s.Note("InitKeys again", w0.InitKeys({server::Key(5, {1.5f, -2.25f, 3.0f, 0.1f})}, server::kRpc));
  s.Note("InitKeys of another shape", w0.InitKeys({server::Key(5, {1, 2})}, server::kRpc));
  s.Note("InitKeys of NaN", w0.InitKeys({server::Key(11, {1, std::numeric_limits<float>::quiet_NaN()})}, server::kRpc));
  kv::KeyState resumed = server::Key(12, {1, 2});
  resumed.version = 4;
  resumed.optimizer_state = {0.5f, 0.25f};  // momentum's slot
  s.Note("InitKeys resumed", w0.InitKeys({resumed}, server::kRpc));
  s.State(w0, "GetState");
  absl::StatusOr<std::vector<kv::KeyState>> missing = w0.GetState({77}, server::kRpc);
  s.Note("GetState of a key not held", missing.status());
  absl::StatusOr<std::vector<kv::KeyVersion>> unknown = w0.GetVersions({77}, server::kRpc);
  s.Note("GetVersions of a key not held", unknown.status());
  s.Versions(s.worker(1), "w1 GetVersions");
  // More keys than the server holds (duplicates), and a chain no job has.
  absl::StatusOr<std::vector<kv::KeyState>> repeated = w0.GetState({5, 5, 5, 5}, server::kRpc);
  s.Note("GetState of more keys than held", repeated.status());
  absl::StatusOr<std::vector<kv::KeyVersion>> many = w0.GetVersions({9, 9, 9, 9}, server::kRpc);
  s.Note("GetVersions of more keys than held", many.status());
  std::vector<int> chain(65);
  for (int i = 0; i < 65; ++i) chain[static_cast<size_t>(i)] = i;
  s.Note("InitKeys with a chain of 65", w0.InitKeys({server::Key(13, {1})}, server::kRpc, {chain}));
  absl::StatusOr<std::vector<kv::KeyVersion>> named = w0.GetVersions({12, 5}, server::kRpc);
  std::string out;
  if (named.ok()) {
    for (const kv::KeyVersion& k : *named) absl::StrAppend(&out, k.key, "@", k.version, "/", k.last_push_step, " ");
  }
  s.Note("GetVersions of named keys", named.status(), out);
}

std::vector<Outcome> InProcess(const Scenario& scenario) {
  testing::InProcessServer server(0);
  Script s([&server](int rank) { return *server.Connect(rank, absl::Seconds(1)); }, server.address(), &server.store());
  scenario(s);
  return s.outcomes();
}

std::vector<Outcome> OverGrpc(const Scenario& scenario) {
  server::PsServiceOptions options;
  options.check_interval = absl::Milliseconds(5);  // the timed-out pull is answered soon
  server::Loopback ps(options);
  EXPECT_TRUE(ps.ok());
  Script s([&ps](int rank) -> std::unique_ptr<ServerChannel> { return ps.Connect(rank); }, ps.address(), &ps.store_);
  scenario(s);
  return s.outcomes();
}

void ExpectSameAnswers(const Scenario& scenario) {
  const std::vector<Outcome> fake = InProcess(scenario);
  const std::vector<Outcome> real = OverGrpc(scenario);
  ASSERT_EQ(fake.size(), real.size());
  for (size_t i = 0; i < fake.size(); ++i) EXPECT_EQ(fake[i], real[i]) << "answer " << i;
}

TEST(InProcessParityTest, RequestsAndRefusalsAreAnsweredAsByTheServer) { ExpectSameAnswers(Requests); }

TEST(InProcessParityTest, PackedPullsAreAnsweredAsByTheServer) { ExpectSameAnswers(PackedPulls); }

TEST(InProcessParityTest, FencingIsAnsweredAsByTheServer) { ExpectSameAnswers(Fencing); }

TEST(InProcessParityTest, UnaryCallsAreAnsweredAsByTheServer) { ExpectSameAnswers(Control); }

}  // namespace
}  // namespace dtrain::worker
