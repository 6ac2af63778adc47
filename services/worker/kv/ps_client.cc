#include "services/worker/kv/ps_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::worker {
namespace {

// InitKeys requests stay well under the 64 MB message limit (a lone key bigger than
// this still goes, alone).
constexpr size_t kInitBatchBytes = 8 << 20;

// The PushPull stream carries hand-assembled buffers (see tensor_codec.h); these are
// the `data` fields of PushPullRequest and PushPullResponse.
constexpr int kRequestDataField = v1::PushPullRequest::kDataFieldNumber;
constexpr int kResponseDataField = v1::PushPullResponse::kDataFieldNumber;
constexpr char kPushPullMethod[] = "/dtrain.v1.ParameterServer/PushPull";

const char* OpName(v1::Op op) {
  switch (op) {
    case v1::OP_PUSH: return "push";
    case v1::OP_PULL: return "pull";
    case v1::OP_PUSH_PULL: return "push-pull";
    default: return "request";
  }
}

void ToProto(const kv::OptimizerOptions& o, v1::OptimizerConfig* p) {
  p->set_name(o.name);
  p->set_learning_rate(o.learning_rate);
  p->set_momentum(o.momentum);
  p->set_weight_decay(o.weight_decay);
  p->set_lr_factor(o.lr_factor);
  for (int64_t s : o.lr_steps) p->add_lr_steps(s);
  p->set_beta1(o.beta1);
  p->set_beta2(o.beta2);
  p->set_epsilon(o.epsilon);
  p->set_rescale_grad(o.rescale_grad);
  p->set_clip_gradient(o.clip_gradient);
}

// Gradients are lent to gRPC rather than copied (see Impl::Submit): a slice over the
// caller's memory whose destroy callback reports when gRPC has let go of it. The
// state outlives the client, since the last slice may be released after it.
struct LentBuffers {
  absl::Mutex mu;
  std::unordered_map<uint64_t, int> lent ABSL_GUARDED_BY(mu);  // ticket -> slices not yet released

  bool AllReturned(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return lent.count(id) == 0; }
};

struct LentSlice {
  std::shared_ptr<LentBuffers> buffers;
  uint64_t id;

  static void Release(void* arg) {
    auto* self = static_cast<LentSlice*>(arg);
    {
      absl::MutexLock lock(&self->buffers->mu);
      auto it = self->buffers->lent.find(self->id);
      if (it != self->buffers->lent.end() && --it->second == 0) self->buffers->lent.erase(it);
    }
    delete self;
  }
};

// How long gRPC may keep a lent gradient after its call was cancelled before we
// stop rather than let the caller free memory that might still be read.
constexpr absl::Duration kReleaseAfterCancel = absl::Seconds(30);

}  // namespace

struct PsClient::Impl {
  struct Pending {
    v1::Op op;
    uint64_t key;
    float* out = nullptr;  // pulls: where the weights go
    int64_t numel = 0;
    int64_t* version = nullptr;
    // Push-pulls with pull_delta: the step pushed, whose weights `out` holds; the
    // answer may then be the packed change to step + 1 (PushPullRequest.pull_delta).
    bool delta_ok = false;
    int64_t step = -1;
    absl::Time sent;
    bool done = false;
    bool copying = false;  // the reader is writing into `out` without holding mu
    absl::Status status;
  };

  std::string address;
  int server_rank = 0;
  int worker_rank = 0;
  // Set by SetIdentity before the first request, then only read by the sending thread.
  std::string job_id;
  uint64_t incarnation = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ParameterServer::Stub> stub;
  grpc::ClientContext stream_ctx;  // outlives `stream`
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream;
  std::thread reader;
  std::thread writer;

  absl::Mutex mu;
  std::unordered_map<uint64_t, Pending> tickets ABSL_GUARDED_BY(mu);
  struct Outgoing {
    grpc::ByteBuffer buffer;
    int64_t payload_bytes = 0;
    int64_t uncompressed_bytes = 0;  // a push's payload as float32s
  };
  // Waiting for the writer, lowest key first (then in order): keys are param_index << 24 |
  // chunk, so when the link is slower than backward (flow control holds the writer) the
  // first layer's push, computed last, overtakes what is still queued, and its weights,
  // which the next forward needs first, come back sooner (P3's priority). One
  // key's requests keep their order; nothing else depends on the order between keys.
  std::map<std::pair<uint64_t, uint64_t>, Outgoing> outbox ABSL_GUARDED_BY(mu);
  uint64_t outbox_seq ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  bool closing ABSL_GUARDED_BY(mu) = false;  // the destructor runs
  bool broken ABSL_GUARDED_BY(mu) = false;   // the stream ended: new tickets fail at once
  absl::Status broken_status ABSL_GUARDED_BY(mu);
  bool writer_exited ABSL_GUARDED_BY(mu) = false;
  std::vector<JoinNotice> joins ABSL_GUARDED_BY(mu);  // TakeJoinNotices

  std::shared_ptr<LentBuffers> lent = std::make_shared<LentBuffers>();

  // Blocks until gRPC released every slice lent for ticket `id`; past `deadline` the
  // stream is cancelled (which makes gRPC drop pending writes) and the wait goes on,
  // bounded by kReleaseAfterCancel.
  void AwaitReturned(uint64_t id, absl::Time deadline) {
    absl::MutexLock lock(&lent->mu);
    auto returned = [this, id]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return lent->AllReturned(id); };
    if (lent->mu.AwaitWithDeadline(absl::Condition(&returned), deadline)) return;
    lent->mu.Unlock();
    stream_ctx.TryCancel();
    lent->mu.Lock();
    if (lent->mu.AwaitWithTimeout(absl::Condition(&returned), kReleaseAfterCancel)) return;
    DTRAIN_LOG(ERROR) << Who() << ": gRPC kept a gradient buffer " << kReleaseAfterCancel
                      << " after the stream was cancelled; stopping rather than risk a read of freed memory";
    std::abort();
  }

  std::atomic<int64_t> bytes_pushed{0};
  std::atomic<int64_t> bytes_pushed_uncompressed{0};
  std::atomic<int64_t> bytes_pulled{0};
  std::atomic<int64_t> bytes_pulled_uncompressed{0};
  // Pull compression (SetPullCompression; null: none), and the reader thread's buffers
  // for a packed answer and its unpacked values.
  std::unique_ptr<kv::GradientCodec> pull_codec;
  std::string packed_answer;
  std::vector<float> unpacked_answer;
  std::atomic<int64_t> pull_timeout_ms{0};

  std::string Who() const { return absl::StrCat("server ", server_rank, " at ", address); }

  absl::Status Annotate(const absl::Status& s, const std::string& what) const {
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(Who(), ": ", what, ": ", s.message()));
  }

  // A pull of `key` at `min_version` or later.
  v1::PushPullRequest PullRequest(uint64_t key, int64_t min_version) const {
    v1::PushPullRequest req;
    req.set_op(v1::OP_PULL);
    req.set_worker_rank(worker_rank);
    req.set_key(key);
    req.set_dtype(v1::DTYPE_FLOAT32);
    req.set_min_version(min_version);
    req.set_timeout_ms(pull_timeout_ms.load(std::memory_order_relaxed));
    return req;
  }

  // Sends `req` with `payload` (lent to gRPC, not copied) as its data, saying how it
  // is packed.
  Ticket Submit(v1::PushPullRequest req, Pending p, const PushData* payload = nullptr) {
    if (payload != nullptr && payload->compression.type != kv::CompressionType::kNone) {
      req.set_compression(static_cast<v1::Compression>(payload->compression.type));
      if (payload->compression.type == kv::CompressionType::kTwoBit) {
        req.set_gc_threshold(payload->compression.threshold);
      }
    }
    if (!job_id.empty()) req.set_job_id(job_id);
    if (incarnation != 0) req.set_incarnation(incarnation);
    uint64_t id;
    {
      absl::MutexLock lock(&mu);
      id = next_id++;
      p.sent = absl::Now();
      if (broken || closing) {
        p.done = true;
        p.status = broken ? broken_status : absl::CancelledError(absl::StrCat(Who(), ": client closed"));
        tickets.emplace(id, std::move(p));
        return id;
      }
      tickets.emplace(id, std::move(p));
    }
    req.set_request_id(id);
    Outgoing out;
    if (payload != nullptr) {
      {
        absl::MutexLock lock(&lent->mu);
        ++lent->lent[id];
      }
      const size_t bytes = static_cast<size_t>(payload->size);
      grpc::Slice view(const_cast<char*>(payload->bytes), bytes, &LentSlice::Release, new LentSlice{lent, id});
      out.buffer = kv::EncodeWithPayload(req, kRequestDataField, std::move(view));
      out.payload_bytes = static_cast<int64_t>(bytes);
      out.uncompressed_bytes = payload->numel * static_cast<int64_t>(sizeof(float));
    } else {
      out.buffer = kv::EncodeMessage(req);
    }
    absl::MutexLock lock(&mu);
    if (broken || closing) {
      Pending& t = tickets[id];
      if (!t.done) {
        t.done = true;
        t.status = broken ? broken_status : absl::CancelledError(absl::StrCat(Who(), ": client closed"));
      }
    } else {
      outbox.emplace(std::make_pair(req.key(), outbox_seq++), std::move(out));
    }
    return id;
  }

  // Writes run here, not in Push, so a server that stops reading (flow control) can
  // only make Wait time out, never block the caller without a deadline.
  void WriterLoop() {
    while (true) {
      Outgoing msg;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Impl* impl) { return !impl->outbox.empty() || impl->closing || impl->broken; }, this));
        if (closing || broken) break;
        msg = std::move(outbox.begin()->second);
        outbox.erase(outbox.begin());
      }
      if (!stream->Write(msg.buffer)) break;  // the stream ended; the reader fails the tickets
      bytes_pushed.fetch_add(msg.payload_bytes, std::memory_order_relaxed);
      bytes_pushed_uncompressed.fetch_add(msg.uncompressed_bytes, std::memory_order_relaxed);
    }
    absl::MutexLock lock(&mu);
    writer_exited = true;
  }

  void ReaderLoop() {
    grpc::ByteBuffer buffer;
    while (stream->Read(&buffer)) Deliver(&buffer);
    {
      absl::MutexLock lock(&mu);
      broken = true;  // wakes the writer
      // Tickets submitted from now fail at once with broken_status, which Finish below
      // makes precise; until then it must not read OK.
      if (broken_status.ok()) {
        broken_status = absl::UnavailableError(absl::StrCat(Who(), ": PushPull stream ended"));
      }
      // A Write stuck on flow control returns once the call is cancelled.
      if (!mu.AwaitWithTimeout(absl::Condition(&writer_exited), absl::Seconds(1))) {
        stream_ctx.TryCancel();
        if (!mu.AwaitWithTimeout(absl::Condition(&writer_exited), absl::Seconds(30))) {
          DTRAIN_LOG(ERROR) << Who() << ": PushPull writer did not stop within 30 s";
        }
      }
    }
    const grpc::Status end = stream->Finish();
    absl::MutexLock lock(&mu);
    // A server that closed the stream because this process was fenced (or is of another
    // job) said FAILED_PRECONDITION: keep that code, since retrying cannot help.
    const bool refused = end.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
    const std::string why = absl::StrCat(Who(), ": PushPull stream ", refused ? "closed" : "broke", ": ",
                                         end.error_message(), " (code ", static_cast<int>(end.error_code()), ")");
    broken_status = closing   ? absl::CancelledError(absl::StrCat(Who(), ": client closed"))
                    : refused ? absl::FailedPreconditionError(why)
                              : absl::UnavailableError(why);
    if (!closing) DTRAIN_LOG(WARNING) << broken_status.message();
    for (auto& [id, p] : tickets) {
      if (!p.done) {
        p.done = true;
        p.status = broken_status;
      }
    }
    outbox.clear();
  }

  // Replication: restarted chain members the answer says hold its key now. Sizes from
  // the wire are checked, not trusted.
  void NoteJoined(const v1::PushPullResponse& resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    constexpr int kMaxJoined = 64;
    constexpr size_t kMaxAddressBytes = 512;
    if (resp.joined_servers_size() != resp.joined_addresses_size() || resp.joined_servers_size() > kMaxJoined) {
      DTRAIN_LOG(WARNING) << Who() << ": ignoring a malformed list of joined servers for key " << resp.key();
      return;
    }
    for (int j = 0; j < resp.joined_servers_size(); ++j) {
      if (resp.joined_addresses(j).size() > kMaxAddressBytes || joins.size() >= 4096) continue;
      joins.push_back({resp.key(), resp.version(), resp.joined_servers(j), resp.joined_addresses(j)});
    }
  }

  // Decodes one response; pulled weights are copied from the received slices
  // straight into the ticket's buffer, without holding `mu` (Wait does not give up on,
  // and so free, a buffer while `copying` is set).
  // Whether the answer `r` to ticket `p` may be a packed change (and is well formed for
  // one): "" if so, else what is wrong with it.
  std::string CheckPacked(const v1::PushPullResponse& r, const Pending& p) const {
    if (!p.delta_ok || pull_codec == nullptr) return "a packed answer that was not asked for";
    if (r.compression() != static_cast<v1::Compression>(pull_codec->type())) {
      return absl::StrCat("an answer packed as ", r.compression(), ", not ", kv::CompressionTypeName(pull_codec->type()));
    }
    if (r.version() != p.step + 1) {
      return absl::StrCat("a packed change to version ", r.version(), " after pushing step ", p.step);
    }
    return "";
  }

  void Deliver(grpc::ByteBuffer* buffer) {
    v1::PushPullResponse resp;
    Pending* claimed = nullptr;
    bool packed = false;
    auto sink = [&](const google::protobuf::MessageLite& header, size_t size) -> char* {
      const auto& r = static_cast<const v1::PushPullResponse&>(header);
      absl::MutexLock lock(&mu);
      auto it = tickets.find(r.request_id());
      if (it == tickets.end() || it->second.done || it->second.out == nullptr || r.code() != 0) return nullptr;
      if (r.compression() != v1::COMPRESSION_NONE) {
        // A packed change: the codec's exact size for the ticket's element count, into
        // our own buffer; it is added to `out` below.
        if (!CheckPacked(r, it->second).empty()) return nullptr;  // reported below
        if (static_cast<int64_t>(size) != pull_codec->PackedBytes(it->second.numel)) return nullptr;
        claimed = &it->second;
        claimed->copying = true;
        packed = true;
        packed_answer.resize(size);
        return packed_answer.data();
      }
      if (size != static_cast<size_t>(it->second.numel) * sizeof(float)) return nullptr;  // reported below
      claimed = &it->second;  // unordered_map nodes do not move on rehash
      claimed->copying = true;
      return reinterpret_cast<char*>(claimed->out);
    };
    int64_t payload_size = -1;
    // The codec refuses a payload length beyond the bytes received (or gRPC's receive
    // limit) before the sink is asked, and the sink takes only the ticket's own size.
    const absl::Status decoded =
        kv::DecodeWithPayload(buffer, &resp, kResponseDataField, sink, &payload_size, kMaxMessageBytes);
    absl::Status unpacked;
    if (claimed != nullptr && packed && decoded.ok()) {
      // The same arithmetic as the server's (ShardStore: weights + unpacked change), so
      // the weights stay bit-identical to its own. `copying` keeps `out` alive meanwhile.
      const int64_t n = claimed->numel;
      unpacked_answer.resize(static_cast<size_t>(n));
      unpacked = pull_codec->Decode(packed_answer.data(), static_cast<int64_t>(packed_answer.size()),
                                    unpacked_answer.data(), n);
      if (unpacked.ok()) {
        float* out = claimed->out;
        const float* d = unpacked_answer.data();
        for (int64_t i = 0; i < n; ++i) out[i] += d[i];
      }
    }
    absl::MutexLock lock(&mu);
    if (claimed != nullptr) claimed->copying = false;
    if (!decoded.ok() && resp.request_id() == 0) {
      DTRAIN_LOG(ERROR) << Who() << ": undecodable PushPull response: " << decoded.message();
      return;
    }
    auto it = tickets.find(resp.request_id());
    if (it == tickets.end() || it->second.done) return;  // its waiter gave up already
    Pending& p = it->second;
    const std::string what = absl::StrCat(Who(), ": ", OpName(p.op), " of key ", p.key);
    absl::Status st;
    if (!decoded.ok()) {
      st = absl::InternalError(absl::StrCat(what, ": malformed response: ", decoded.message()));
    } else if (resp.code() != 0) {
      st = absl::Status(static_cast<absl::StatusCode>(resp.code()), absl::StrCat(what, ": ", resp.message()));
    } else if (p.out != nullptr && resp.compression() != v1::COMPRESSION_NONE) {
      const std::string wrong = CheckPacked(resp, p);
      const int64_t want = pull_codec != nullptr ? pull_codec->PackedBytes(p.numel) : 0;
      if (!wrong.empty()) {
        st = absl::InternalError(absl::StrCat(what, ": the server sent ", wrong));
      } else if (claimed != &p || payload_size != want) {
        st = absl::InternalError(absl::StrCat(what, " returned a packed change of ",
                                              std::max<int64_t>(payload_size, 0), " bytes, want ", want));
      } else if (!unpacked.ok()) {
        st = absl::InternalError(absl::StrCat(what, ": ", unpacked.message()));
      } else {
        if (p.version != nullptr) *p.version = resp.version();
        bytes_pulled.fetch_add(want, std::memory_order_relaxed);
        bytes_pulled_uncompressed.fetch_add(p.numel * static_cast<int64_t>(sizeof(float)), std::memory_order_relaxed);
      }
    } else if (p.out != nullptr) {
      const int64_t want = p.numel * static_cast<int64_t>(sizeof(float));
      if (claimed != &p || payload_size != want) {
        st = absl::InternalError(absl::StrCat(what, " returned ", std::max<int64_t>(payload_size, 0),
                                              " bytes, want ", want));
      } else {
        if (p.version != nullptr) *p.version = resp.version();
        bytes_pulled.fetch_add(want, std::memory_order_relaxed);
        bytes_pulled_uncompressed.fetch_add(want, std::memory_order_relaxed);
      }
    } else if (p.version != nullptr) {
      *p.version = resp.version();  // a version-only answer
    }
    if (st.ok() && resp.joined_servers_size() > 0) NoteJoined(resp);
    p.done = true;
    p.status = st;
  }
};

PsClient::PsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const std::string& address, int server_rank,
                                                            int worker_rank, absl::Duration connect_timeout) {
  auto impl = std::make_unique<Impl>();
  impl->address = address;
  impl->server_rank = server_rank;
  impl->worker_rank = worker_rank;
  impl->channel = MakeChannel(address);
  if (connect_timeout > absl::ZeroDuration() && !impl->channel->WaitForConnected(DeadlineAfter(connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot reach parameter server ", server_rank, " at ", address,
                                               " within ", absl::FormatDuration(connect_timeout)));
  }
  impl->stub = v1::ParameterServer::NewStub(impl->channel);
  // The stream speaks raw buffers (tensor_codec.h); the unary calls use the stub.
  impl->stream.reset(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
      impl->channel.get(),
      grpc::internal::RpcMethod(kPushPullMethod, grpc::internal::RpcMethod::BIDI_STREAMING),
      &impl->stream_ctx));
  Impl* raw = impl.get();
  impl->reader = std::thread([raw] { raw->ReaderLoop(); });
  impl->writer = std::thread([raw] { raw->WriterLoop(); });
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::~PsClient() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->closing = true;
  }
  impl_->stream_ctx.TryCancel();
  impl_->writer.join();
  impl_->reader.join();
  impl_->stream.reset();
  // Gradients lent to gRPC must be back before the caller may free them.
  absl::MutexLock lock(&impl_->lent->mu);
  auto all_back = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return impl_->lent->lent.empty(); };
  if (!impl_->lent->mu.AwaitWithTimeout(absl::Condition(&all_back), kReleaseAfterCancel)) {
    DTRAIN_LOG(ERROR) << impl_->Who() << ": gRPC kept gradient buffers after the stream closed; stopping";
    std::abort();
  }
}

absl::Status PsClient::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                 absl::Duration timeout, int staleness, kv::CompressionType pull_compression) {
  v1::ConfigureRequest req;
  req.set_kv_store(KVStoreModeName(mode));
  req.set_num_workers(num_workers);
  req.set_staleness(staleness);
  req.set_pull_compression(static_cast<v1::Compression>(pull_compression));
  ToProto(optimizer, req.mutable_optimizer());
  v1::ConfigureResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  return impl_->Annotate(FromGrpc(impl_->stub->Configure(&ctx, req, &resp)), "Configure");
}

absl::Status PsClient::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                                const std::vector<std::vector<int>>& chains) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t i = 0;
  while (i < keys.size()) {
    v1::InitKeysRequest req;
    size_t bytes = 0;
    for (; i < keys.size(); ++i) {
      const kv::KeyState& k = keys[i];
      const size_t size = (k.values.size() + k.optimizer_state.size()) * sizeof(float) + 64;
      if (req.keys_size() > 0 && bytes + size > kInitBatchBytes) break;
      bytes += size;
      v1::KeyInit* ki = req.add_keys();
      ki->set_key(k.key);
      for (int64_t d : k.shape) ki->add_shape(d);
      ki->set_dtype(v1::DTYPE_FLOAT32);
      ki->set_values(kv::FloatsToBytes(k.values.data(), static_cast<int64_t>(k.values.size())));
      ki->set_version(k.version);
      ki->set_optimizer_state(kv::FloatsToBytes(k.optimizer_state.data(), static_cast<int64_t>(k.optimizer_state.size())));
      if (i < chains.size()) {
        for (int r : chains[i]) ki->add_chain(r);
      }
    }
    v1::InitKeysResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    absl::Status s = FromGrpc(impl_->stub->InitKeys(&ctx, req, &resp));
    if (!s.ok()) return impl_->Annotate(s, "InitKeys");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<kv::KeyState>> PsClient::GetState(const std::vector<uint64_t>& keys,
                                                            absl::Duration timeout) {
  v1::GetStateRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  std::unique_ptr<grpc::ClientReader<v1::KeyState>> reader = impl_->stub->GetState(&ctx, req);
  std::vector<kv::KeyState> out;
  v1::KeyState ks;
  absl::Status bad;
  while (reader->Read(&ks)) {
    if (!bad.ok()) continue;  // drain, then report
    kv::KeyState snap;
    snap.key = ks.key();
    snap.shape.assign(ks.shape().begin(), ks.shape().end());
    snap.version = ks.version();
    bad = kv::BytesToFloats(ks.values(), &snap.values);
    if (bad.ok()) bad = kv::BytesToFloats(ks.optimizer_state(), &snap.optimizer_state);
    // Our own server sent it: a broken answer is INTERNAL, not the caller's argument.
    if (!bad.ok()) bad = absl::InternalError(absl::StrCat("key ", ks.key(), ": ", bad.message()));
    out.push_back(std::move(snap));
  }
  absl::Status s = FromGrpc(reader->Finish());
  if (s.ok()) s = bad;
  if (!s.ok()) return impl_->Annotate(s, "GetState");
  return out;
}

void PsClient::SetIdentity(const std::string& job_id, uint64_t incarnation) {
  impl_->job_id = job_id;
  impl_->incarnation = incarnation;
}

absl::StatusOr<std::vector<kv::KeyVersion>> PsClient::GetVersions(const std::vector<uint64_t>& keys,
                                                                  absl::Duration timeout) {
  v1::GetVersionsRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  req.set_worker_rank(impl_->worker_rank);
  req.set_job_id(impl_->job_id);
  req.set_incarnation(impl_->incarnation);
  v1::GetVersionsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  absl::Status s = FromGrpc(impl_->stub->GetVersions(&ctx, req, &resp));
  if (!s.ok()) return impl_->Annotate(s, "GetVersions");
  if (!keys.empty() && resp.keys_size() != static_cast<int>(keys.size())) {
    return impl_->Annotate(absl::InternalError(absl::StrCat("answered ", resp.keys_size(), " keys, asked for ",
                                                            keys.size())),
                           "GetVersions");
  }
  std::vector<kv::KeyVersion> out;
  out.reserve(static_cast<size_t>(resp.keys_size()));
  for (const v1::KeyVersion& v : resp.keys()) out.push_back({v.key(), v.version(), v.last_push_step()});
  return out;
}

PsClient::Ticket PsClient::Push(int64_t step, uint64_t key, const float* grad, int64_t numel) {
  return Push(step, key, PushData::Floats(grad, numel));
}

PsClient::Ticket PsClient::Push(int64_t step, uint64_t key, const PushData& data) {
  v1::PushPullRequest req;
  req.set_op(v1::OP_PUSH);
  req.set_worker_rank(impl_->worker_rank);
  req.set_step(step);
  req.set_key(key);
  req.set_dtype(v1::DTYPE_FLOAT32);
  return impl_->Submit(std::move(req), {v1::OP_PUSH, key}, &data);
}

PsClient::Ticket PsClient::Pull(uint64_t key, int64_t min_version, float* out, int64_t numel, int64_t* version) {
  return impl_->Submit(impl_->PullRequest(key, min_version), {v1::OP_PULL, key, out, numel, version});
}

PsClient::Ticket PsClient::PullExact(uint64_t key, int64_t version, float* out, int64_t numel,
                                     int64_t* version_out) {
  v1::PushPullRequest req = impl_->PullRequest(key, version);
  req.set_exact_version(true);
  return impl_->Submit(std::move(req), {v1::OP_PULL, key, out, numel, version_out});
}

PsClient::Ticket PsClient::PushPull(int64_t step, uint64_t key, const float* grad, float* out, int64_t numel) {
  return PushPull(step, key, PushData::Floats(grad, numel), out);
}

PsClient::Ticket PsClient::PushPull(int64_t step, uint64_t key, const PushData& data, float* out, bool pull_delta) {
  const int64_t numel = data.numel;
  v1::PushPullRequest req;
  req.set_op(v1::OP_PUSH_PULL);
  req.set_worker_rank(impl_->worker_rank);
  req.set_step(step);
  req.set_key(key);
  req.set_dtype(v1::DTYPE_FLOAT32);
  req.set_timeout_ms(impl_->pull_timeout_ms.load(std::memory_order_relaxed));
  Impl::Pending p{v1::OP_PUSH_PULL, key, out, numel};
  if (pull_delta && impl_->pull_codec != nullptr) {
    req.set_pull_delta(true);
    p.delta_ok = true;
    p.step = step;
  }
  return impl_->Submit(std::move(req), std::move(p), &data);
}

void PsClient::SetPullCompression(kv::CompressionType type) {
  impl_->pull_codec = kv::MakeCodec({type, 1.0f});
}

PsClient::Ticket PsClient::PushPullVersionOnly(int64_t step, uint64_t key, const float* grad, int64_t numel,
                                               int64_t* version) {
  return PushPullVersionOnly(step, key, PushData::Floats(grad, numel), version);
}

PsClient::Ticket PsClient::PushPullVersionOnly(int64_t step, uint64_t key, const PushData& data, int64_t* version) {
  const int64_t numel = data.numel;
  v1::PushPullRequest req;
  req.set_op(v1::OP_PUSH_PULL);
  req.set_worker_rank(impl_->worker_rank);
  req.set_step(step);
  req.set_key(key);
  req.set_dtype(v1::DTYPE_FLOAT32);
  req.set_timeout_ms(impl_->pull_timeout_ms.load(std::memory_order_relaxed));
  req.set_version_only(true);
  return impl_->Submit(std::move(req), {v1::OP_PUSH_PULL, key, nullptr, numel, version}, &data);
}

PsClient::Ticket PsClient::PullVersionOnly(uint64_t key, int64_t min_version, int64_t* version) {
  v1::PushPullRequest req = impl_->PullRequest(key, min_version);
  req.set_version_only(true);
  return impl_->Submit(std::move(req), {v1::OP_PULL, key, nullptr, 0, version});
}

void PsClient::SetPullTimeout(absl::Duration timeout) {
  impl_->pull_timeout_ms.store(std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)), std::memory_order_relaxed);
}

absl::Status PsClient::Wait(Ticket ticket, absl::Time deadline) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->tickets.find(ticket);
  if (it == impl_->tickets.end()) {
    return absl::InvalidArgumentError(absl::StrCat("ticket ", ticket, " unknown or already waited for"));
  }
  Impl::Pending* p = &it->second;
  auto finished = [p] { return p->done && !p->copying; };
  impl_->mu.AwaitWithDeadline(absl::Condition(&finished), deadline);
  // A copy in progress ends within a memcpy; the caller's buffer must not be
  // released under it.
  auto not_copying = [p] { return !p->copying; };
  impl_->mu.Await(absl::Condition(&not_copying));
  absl::Status result;
  if (p->done) {
    result = p->status;
  } else {
    const double waited = absl::ToDoubleSeconds(absl::Now() - p->sent);
    result = absl::DeadlineExceededError(absl::StrFormat("%s: no answer to %s of key %d within %.*f s", impl_->Who(),
                                                         OpName(p->op), p->key, waited < 10 ? 1 : 0, waited));
  }
  impl_->tickets.erase(it);
  impl_->mu.Unlock();
  // The answer can overtake gRPC's release of the pushed gradient by a moment.
  impl_->AwaitReturned(ticket, std::max(deadline, absl::Now() + absl::Seconds(1)));
  impl_->mu.Lock();
  return result;
}

bool PsClient::WaitUntil(Ticket ticket, absl::Time until) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->tickets.find(ticket);
  if (it == impl_->tickets.end()) return true;
  Impl::Pending* p = &it->second;
  auto finished = [p] { return p->done && !p->copying; };
  return impl_->mu.AwaitWithDeadline(absl::Condition(&finished), until);
}

absl::Status PsClient::WaitAll(absl::Time deadline) {
  std::vector<Ticket> ids;
  {
    absl::MutexLock lock(&impl_->mu);
    ids.reserve(impl_->tickets.size());
    for (const auto& entry : impl_->tickets) ids.push_back(entry.first);
  }
  std::sort(ids.begin(), ids.end());
  absl::Status first;
  for (Ticket id : ids) {
    absl::Status s = Wait(id, deadline);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

std::vector<PsClient::JoinNotice> PsClient::TakeJoinNotices() {
  absl::MutexLock lock(&impl_->mu);
  std::vector<JoinNotice> out;
  out.swap(impl_->joins);
  return out;
}

const std::string& PsClient::address() const { return impl_->address; }
int PsClient::server_rank() const { return impl_->server_rank; }
int64_t PsClient::bytes_pushed() const { return impl_->bytes_pushed.load(std::memory_order_relaxed); }
int64_t PsClient::bytes_pushed_uncompressed() const {
  return impl_->bytes_pushed_uncompressed.load(std::memory_order_relaxed);
}
int64_t PsClient::bytes_pulled() const { return impl_->bytes_pulled.load(std::memory_order_relaxed); }
int64_t PsClient::bytes_pulled_uncompressed() const {
  return impl_->bytes_pulled_uncompressed.load(std::memory_order_relaxed);
}

}  // namespace dtrain::worker
