// PsClient's insides, shared by ps_client.cc (the PushPull stream: tickets, the
// writer and reader threads, lent gradient buffers) and ps_client_control.cc (the
// unary calls that configure a server and read or set its keys). Not for other users.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/kv/message_batch.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "services/worker/kv/key_request_proto.h"
#include "services/worker/kv/ps_client.h"

namespace dtrain::worker {
namespace ps_client_internal {

// The PushPull stream carries hand-assembled buffers (see tensor_codec.h); these are
// the `data` fields of PushPullRequest and PushPullResponse.
inline constexpr int kRequestDataField = v1::PushPullRequest::kDataFieldNumber;
inline constexpr int kResponseDataField = v1::PushPullResponse::kDataFieldNumber;
inline constexpr char kPushPullMethod[] = "/dtrain.v1.ParameterServer/PushPull";

inline const char* OpName(v1::Op op) {
  switch (op) {
    case v1::OP_PUSH: return "push";
    case v1::OP_PULL: return "pull";
    case v1::OP_PUSH_PULL: return "push-pull";
    default: return "request";
  }
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
inline constexpr absl::Duration kReleaseAfterCancel = absl::Seconds(30);

}  // namespace ps_client_internal

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
  // The server's answers said it reads batches of requests (PushPullResponse.reads_batches).
  std::atomic<bool> server_reads_batches{false};
  std::vector<JoinNotice> joins ABSL_GUARDED_BY(mu);  // TakeJoinNotices

  std::shared_ptr<ps_client_internal::LentBuffers> lent = std::make_shared<ps_client_internal::LentBuffers>();

  // Blocks until gRPC released every slice lent for ticket `id`; past `deadline` the
  // stream is cancelled (which makes gRPC drop pending writes) and the wait goes on,
  // bounded by ps_client_internal::kReleaseAfterCancel.
  void AwaitReturned(uint64_t id, absl::Time deadline) {
    absl::MutexLock lock(&lent->mu);
    auto returned = [this, id]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return lent->AllReturned(id); };
    if (lent->mu.AwaitWithDeadline(absl::Condition(&returned), deadline)) return;
    lent->mu.Unlock();
    stream_ctx.TryCancel();
    lent->mu.Lock();
    if (lent->mu.AwaitWithTimeout(absl::Condition(&returned), ps_client_internal::kReleaseAfterCancel)) return;
    DTRAIN_LOG(ERROR) << Who() << ": gRPC kept a gradient buffer " << ps_client_internal::kReleaseAfterCancel
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

  // A ticket that fails with `why` without going anywhere (a request that makes no sense).
  Ticket Refuse(Pending p, const absl::Status& why) {
    absl::MutexLock lock(&mu);
    const uint64_t id = next_id++;
    p.sent = absl::Now();
    p.done = true;
    p.status = why;
    tickets.emplace(id, std::move(p));
    return id;
  }

  // Sends `req` (KeyRequestProto's) with `payload` (lent to gRPC, not copied) as its data.
  Ticket Submit(v1::PushPullRequest req, Pending p, const PushData* payload = nullptr) {
    req.set_batch_answers(true);  // ReaderLoop splits batches
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
      grpc::Slice view(const_cast<char*>(payload->bytes), bytes, &ps_client_internal::LentSlice::Release,
                       new ps_client_internal::LentSlice{lent, id});
      out.buffer = kv::EncodeWithPayload(req, ps_client_internal::kRequestDataField, std::move(view));
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
  //
  // A stream has one write in flight: what queued meanwhile goes as one batch
  // (common/kv/message_batch.h) once the server's answers said it reads batches, up to
  // kMaxBatchBytes (a request larger than that goes alone), lowest key first as ever.
  void WriterLoop() {
    using kv::kMaxBatchBytes;
    constexpr size_t kMaxBatchParts = 1024;
    std::vector<Outgoing> msgs;
    std::vector<grpc::ByteBuffer> parts;
    while (true) {
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Impl* impl) { return !impl->outbox.empty() || impl->closing || impl->broken; }, this));
        if (closing || broken) break;
        size_t bytes = 0;
        do {
          Outgoing& next = outbox.begin()->second;
          const size_t length = next.buffer.Length();
          if (!msgs.empty() && (bytes + length > kMaxBatchBytes || msgs.size() == kMaxBatchParts)) break;
          bytes += length;
          msgs.push_back(std::move(next));
          outbox.erase(outbox.begin());
        } while (!outbox.empty() && server_reads_batches.load(std::memory_order_relaxed));
      }
      bool written;
      if (msgs.size() == 1) {
        written = stream->Write(msgs[0].buffer);
      } else {
        parts.clear();
        for (Outgoing& m : msgs) parts.push_back(std::move(m.buffer));
        written = stream->Write(kv::EncodeBatch(parts, v1::PushPullRequest::kBatchFieldNumber));
      }
      for (const Outgoing& m : msgs) {
        bytes_pushed.fetch_add(m.payload_bytes, std::memory_order_relaxed);
        bytes_pushed_uncompressed.fetch_add(m.uncompressed_bytes, std::memory_order_relaxed);
      }
      // Let go of the written buffers now: their slices lend the caller's gradients, which
      // the next push of a key waits to have back (AwaitReturned).
      msgs.clear();
      parts.clear();
      if (!written) break;  // the stream ended; the reader fails the tickets
    }
    absl::MutexLock lock(&mu);
    writer_exited = true;
  }

  void ReaderLoop() {
    // A batch holds at most what the server puts in one (1024 answers); more is refused.
    constexpr size_t kMaxBatchParts = 4096;
    grpc::ByteBuffer buffer;
    std::vector<grpc::ByteBuffer> parts;
    while (stream->Read(&buffer)) {
      if (!kv::IsBatch(&buffer, v1::PushPullResponse::kBatchFieldNumber)) {
        Deliver(&buffer);
        continue;
      }
      const absl::Status split =
          kv::SplitBatch(&buffer, v1::PushPullResponse::kBatchFieldNumber, kMaxBatchParts, &parts);
      for (grpc::ByteBuffer& part : parts) {
        // A batch inside a batch is not sent by any server: undecodable like any other
        // malformed answer (Deliver says so).
        Deliver(&part);
      }
      if (!split.ok()) {
        // Which answers the rest was meant to carry is lost: end the stream, so that every
        // waiting ticket fails now (with the stream's status) instead of at its deadline.
        DTRAIN_LOG(ERROR) << Who() << ": malformed batch of PushPull answers: " << split.message();
        stream_ctx.TryCancel();
      }
    }
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
    return PackedAnswerProblem(r, p.delta_ok, p.step, pull_codec.get());
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
    const absl::Status decoded = kv::DecodeWithPayload(buffer, &resp, ps_client_internal::kResponseDataField, sink,
                                                       &payload_size, kMaxMessageBytes);
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
    const std::string what = absl::StrCat(Who(), ": ", ps_client_internal::OpName(p.op), " of key ", p.key);
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
        st = absl::InternalError(absl::StrCat(what, " returned a packed change of ", std::max<int64_t>(payload_size, 0),
                                              " bytes, want ", want));
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
        st = absl::InternalError(
            absl::StrCat(what, " returned ", std::max<int64_t>(payload_size, 0), " bytes, want ", want));
      } else {
        if (p.version != nullptr) *p.version = resp.version();
        bytes_pulled.fetch_add(want, std::memory_order_relaxed);
        bytes_pulled_uncompressed.fetch_add(want, std::memory_order_relaxed);
      }
    } else if (p.version != nullptr) {
      *p.version = resp.version();  // a version-only answer
    }
    if (resp.reads_batches()) server_reads_batches.store(true, std::memory_order_relaxed);
    if (st.ok() && resp.joined_servers_size() > 0) NoteJoined(resp);
    p.done = true;
    p.status = st;
  }
};

}  // namespace dtrain::worker
