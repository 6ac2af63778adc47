// The Open Inference Protocol (KServe v2, inference.GRPCInferenceService) against a real
// dtrain-infer process over loopback: answers equal dtrain.v1's on the same images,
// metadata names the tensors, bad requests get their code and message, reflection v1
// lists both protocols, tokens guard it as they guard dtrain.v1, and concurrent
// callers of both protocols, batched together, each get their own answer.
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "common/checkpoint/checkpoint.h"
#include "common/file_io.h"
#include "common/grpc_util.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "tests/integration/inference/infer_process.h"

namespace dtrain::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;
namespace oip = ::inference;

// A fresh directory holding the trained checkpoint's symbol and epoch 1, as DIR/m.
std::string ServedPrefix() {
  const std::string prefix = ScratchDir() + "/m";
  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 1), checkpoint::ParamsPath(prefix, 1));
  return prefix;
}

// On a connection of its own, as a separate client would have.
std::unique_ptr<oip::GRPCInferenceService::Stub> OipStub(InferProcess& server) {
  return oip::GRPCInferenceService::NewStub(server.Connect());
}

// The first `count` t10k images as an FP32 [count,1,28,28] raw request (pixels / 255,
// as dtrain.v1 scales uint8).
oip::ModelInferRequest T10kInfer(int count, int first = 0) {
  const v1::PredictRequest bytes = T10kRequest(first + count);
  oip::ModelInferRequest req;
  req.set_model_name("m");
  auto* in = req.add_inputs();
  in->set_name("images");
  in->set_datatype("FP32");
  for (int64_t d : {int64_t{count}, int64_t{1}, int64_t{28}, int64_t{28}}) in->add_shape(d);
  std::vector<float> pixels(static_cast<size_t>(count) * 784);
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<float>(static_cast<uint8_t>(bytes.data()[static_cast<size_t>(first) * 784 + i])) / 255.0f;
  }
  req.add_raw_input_contents(reinterpret_cast<const char*>(pixels.data()), pixels.size() * sizeof(float));
  return req;
}

absl::StatusOr<oip::ModelInferResponse> Infer(oip::GRPCInferenceService::Stub& stub, const oip::ModelInferRequest& req,
                                              const std::string& token = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(30)));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  oip::ModelInferResponse resp;
  absl::Status s = FromGrpc(stub.ModelInfer(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::PredictResponse> Predict(InferProcess& server, const v1::PredictRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(30)));
  v1::PredictResponse resp;
  absl::Status s = FromGrpc(server.inference().Predict(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

// Output `index` of `resp` as floats, from raw_output_contents or typed contents.
std::vector<float> OutputValues(const oip::ModelInferResponse& resp, int index) {
  if (resp.raw_output_contents_size() > 0) {
    const std::string& raw = resp.raw_output_contents(index);
    std::vector<float> v(raw.size() / sizeof(float));
    std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
    return v;
  }
  const auto& c = resp.outputs(index).contents().fp32_contents();
  return {c.begin(), c.end()};
}

TEST(OpenInferenceTest, ModelInferAnswersWhatDtrainPredictAnswersOnTheSameImages) {
  InferProcess server({"--model-prefix", ServedPrefix()});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  constexpr int kCount = 16;
  auto predicted = Predict(server, T10kRequest(kCount, /*top_k=*/10));
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  auto stub = OipStub(server);

  oip::ModelInferRequest as_floats = T10kInfer(kCount);
  as_floats.set_id("compare-1");
  // The same images as UINT8 typed contents, asking for the probabilities only.
  const v1::PredictRequest bytes = T10kRequest(kCount);
  oip::ModelInferRequest as_bytes;
  as_bytes.set_model_name("m");
  as_bytes.set_model_version("1");
  auto* in = as_bytes.add_inputs();
  in->set_name("images");
  in->set_datatype("UINT8");
  for (int64_t d : {int64_t{kCount}, int64_t{28}, int64_t{28}}) in->add_shape(d);
  for (char c : bytes.data()) in->mutable_contents()->add_uint_contents(static_cast<uint8_t>(c));
  as_bytes.add_outputs()->set_name("probabilities");

  auto raw = Infer(*stub, as_floats);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->model_name(), "m");
  EXPECT_EQ(raw->model_version(), "1");
  EXPECT_EQ(raw->id(), "compare-1");
  ASSERT_EQ(raw->outputs_size(), 2);
  EXPECT_EQ(raw->outputs(0).name(), "logits");
  EXPECT_EQ(raw->outputs(1).name(), "probabilities");
  for (const auto& o : raw->outputs()) {
    EXPECT_EQ(o.datatype(), "FP32");
    EXPECT_EQ(std::vector<int64_t>(o.shape().begin(), o.shape().end()), (std::vector<int64_t>{kCount, 10}));
  }
  const std::vector<float> logits = OutputValues(*raw, 0), probs = OutputValues(*raw, 1);
  ASSERT_EQ(logits.size(), static_cast<size_t>(kCount * 10));
  ASSERT_EQ(probs.size(), static_cast<size_t>(kCount * 10));

  auto typed = Infer(*stub, as_bytes);
  ASSERT_TRUE(typed.ok()) << typed.status();
  ASSERT_EQ(typed->outputs_size(), 1);
  EXPECT_EQ(typed->raw_output_contents_size(), 0);  // typed in, typed out
  const std::vector<float> typed_probs = OutputValues(*typed, 0);
  ASSERT_EQ(typed_probs.size(), probs.size());

  for (int i = 0; i < kCount; ++i) {
    const v1::Prediction& p = predicted->predictions(i);
    const float* l = &logits[static_cast<size_t>(i) * 10];
    const int argmax = static_cast<int>(std::max_element(l, l + 10) - l);
    EXPECT_EQ(argmax, p.top(0).class_id()) << "image " << i;
    double sum = 0;
    for (int c = 0; c < 10; ++c) sum += std::exp(static_cast<double>(l[c] - l[argmax]));
    for (const v1::ClassScore& s : p.top()) {
      const size_t at = static_cast<size_t>(i * 10 + s.class_id());
      EXPECT_NEAR(probs[at], s.probability(), 1e-5) << "image " << i << " class " << s.class_id();
      EXPECT_NEAR(typed_probs[at], s.probability(), 1e-5) << "image " << i;
      // The logits are the probabilities' source: softmax(logits) gives them back.
      EXPECT_NEAR(std::exp(static_cast<double>(l[s.class_id()] - l[argmax])) / sum, s.probability(), 1e-5);
    }
  }
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

TEST(OpenInferenceTest, LivenessReadinessAndMetadataNameTheModelAndItsTensors) {
  const std::string prefix = ScratchDir() + "/m";  // nothing there yet
  InferProcess server(
      {"--model-prefix", prefix, "--wait-for-model", "60", "--watch-interval", "0.2", "--model-name", "fashion"});
  ASSERT_TRUE(server.started());
  auto stub = OipStub(server);
  auto live = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    oip::ServerLiveResponse resp;
    EXPECT_TRUE(stub->ServerLive(&ctx, oip::ServerLiveRequest(), &resp).ok());
    return resp.live();
  };
  auto ready = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    oip::ServerReadyResponse resp;
    EXPECT_TRUE(stub->ServerReady(&ctx, oip::ServerReadyRequest(), &resp).ok());
    return resp.ready();
  };
  auto model_ready = [&](const std::string& name, const std::string& version, bool* is_ready) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    oip::ModelReadyRequest req;
    req.set_name(name);
    req.set_version(version);
    oip::ModelReadyResponse resp;
    grpc::Status s = stub->ModelReady(&ctx, req, &resp);
    *is_ready = resp.ready();
    return s;
  };
  auto metadata = [&](const std::string& name, const std::string& version, oip::ModelMetadataResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    oip::ModelMetadataRequest req;
    req.set_name(name);
    req.set_version(version);
    return stub->ModelMetadata(&ctx, req, resp);
  };

  // No model yet: live, not ready; inference is UNAVAILABLE, a retryable code.
  bool is_ready = true;
  EXPECT_TRUE(live());
  EXPECT_FALSE(ready());
  EXPECT_TRUE(model_ready("fashion", "", &is_ready).ok());
  EXPECT_FALSE(is_ready);
  EXPECT_EQ(server.Health("inference.GRPCInferenceService"), HealthCheckResponse::NOT_SERVING);
  oip::ModelInferRequest early = T10kInfer(1);
  early.set_model_name("fashion");
  auto not_yet = Infer(*stub, early);
  EXPECT_EQ(not_yet.status().code(), absl::StatusCode::kUnavailable) << not_yet.status();
  EXPECT_TRUE(absl::StrContains(not_yet.status().message(), "model 'fashion' is not loaded yet")) << not_yet.status();

  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 2), checkpoint::ParamsPath(prefix, 2));
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(20))) << server.process().output();
  EXPECT_EQ(server.Health("inference.GRPCInferenceService"), HealthCheckResponse::SERVING);
  EXPECT_TRUE(ready());
  EXPECT_TRUE(model_ready("fashion", "", &is_ready).ok());
  EXPECT_TRUE(is_ready);
  EXPECT_TRUE(model_ready("fashion", "2", &is_ready).ok());
  EXPECT_TRUE(is_ready);
  grpc::Status s = model_ready("fashion", "1", &is_ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "version '1' is not loaded: the serving version is 2"))
      << s.error_message();
  s = model_ready("m", "", &is_ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "unknown model 'm': this server serves 'fashion'"))
      << s.error_message();

  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    oip::ServerMetadataResponse resp;
    ASSERT_TRUE(stub->ServerMetadata(&ctx, oip::ServerMetadataRequest(), &resp).ok());
    EXPECT_EQ(resp.name(), "dtrain-infer");
    EXPECT_TRUE(absl::StartsWith(resp.version(), "0.")) << resp.version();
  }
  oip::ModelMetadataResponse md;
  ASSERT_TRUE(metadata("fashion", "", &md).ok());
  EXPECT_EQ(md.name(), "fashion");
  ASSERT_EQ(md.versions_size(), 1);
  EXPECT_EQ(md.versions(0), "2");
  EXPECT_EQ(md.platform(), "pytorch_libtorch");
  ASSERT_EQ(md.inputs_size(), 1);
  EXPECT_EQ(md.inputs(0).name(), "images");
  EXPECT_EQ(md.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(md.inputs(0).shape().begin(), md.inputs(0).shape().end()),
            (std::vector<int64_t>{-1, 1, 28, 28}));
  ASSERT_EQ(md.outputs_size(), 2);
  EXPECT_EQ(md.outputs(0).name(), "logits");
  EXPECT_EQ(md.outputs(1).name(), "probabilities");
  for (const auto& o : md.outputs()) {
    EXPECT_EQ(o.datatype(), "FP32");
    EXPECT_EQ(std::vector<int64_t>(o.shape().begin(), o.shape().end()), (std::vector<int64_t>{-1, 10}));
  }
  oip::ModelMetadataResponse unknown;
  EXPECT_EQ(metadata("nope", "", &unknown).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(metadata("fashion", "7", &unknown).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

TEST(OpenInferenceTest, BadRequestsGetTheirCodeAndAClearMessage) {
  InferProcess server({"--model-prefix", ServedPrefix(), "--max-batch", "32"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  auto stub = OipStub(server);
  struct Case {
    const char* what;
    std::function<void(oip::ModelInferRequest&)> spoil;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"unknown model", [](auto& r) { r.set_model_name("resnet"); }, absl::StatusCode::kNotFound,
       "unknown model 'resnet': this server serves 'm'"},
      {"unknown version", [](auto& r) { r.set_model_version("9"); }, absl::StatusCode::kNotFound,
       "model 'm' version '9' is not loaded: the serving version is 1"},
      {"wrong input name", [](auto& r) { r.mutable_inputs(0)->set_name("input__0"); },
       absl::StatusCode::kInvalidArgument, "unknown input 'input__0': the model takes 'images' FP32 [-1,1,28,28]"},
      {"wrong shape", [](auto& r) { r.mutable_inputs(0)->set_shape(3, 32); }, absl::StatusCode::kInvalidArgument,
       "input 'images' has shape [2,1,28,32]; the model takes 'images' FP32 [-1,1,28,28]"},
      {"wrong datatype", [](auto& r) { r.mutable_inputs(0)->set_datatype("FP16"); }, absl::StatusCode::kInvalidArgument,
       "datatype 'FP16'; the model takes FP32"},
      {"wrong byte size", [](auto& r) { r.mutable_raw_input_contents(0)->resize(1000); },
       absl::StatusCode::kInvalidArgument,
       "raw_input_contents[0] has 1000 bytes; input 'images' FP32 [2,1,28,28] needs 6272"},
      {"batch claimed huge, bytes small", [](auto& r) { r.mutable_inputs(0)->set_shape(0, int64_t{1} << 40); },
       absl::StatusCode::kInvalidArgument, "over the limit of 32 (--max-batch)"},
      {"unknown output", [](auto& r) { r.add_outputs()->set_name("embedding"); }, absl::StatusCode::kInvalidArgument,
       "unknown output 'embedding'"},
  };
  for (const Case& c : cases) {
    oip::ModelInferRequest req = T10kInfer(2);
    c.spoil(req);
    auto resp = Infer(*stub, req);
    EXPECT_EQ(resp.status().code(), c.code) << c.what << ": " << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), c.message)) << c.what << ": " << resp.status();
  }
  // The server is unharmed.
  EXPECT_TRUE(Infer(*stub, T10kInfer(2)).ok());
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

TEST(OpenInferenceTest, ReflectionV1AndV1alphaListBothProtocols) {
  InferProcess server({"--model-prefix", ServedPrefix()});
  ASSERT_TRUE(server.started());
  auto channel = server.Connect();
  const std::vector<std::string> want = {"dtrain.v1.Inference", "inference.GRPCInferenceService",
                                         "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                         "grpc.reflection.v1alpha.ServerReflection"};
  {
    auto stub = grpc::reflection::v1::ServerReflection::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    auto stream = stub->ServerReflectionInfo(&ctx);
    grpc::reflection::v1::ServerReflectionRequest req;
    req.set_list_services("");
    ASSERT_TRUE(stream->Write(req));
    grpc::reflection::v1::ServerReflectionResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    std::vector<std::string> names;
    for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
    for (const std::string& w : want) EXPECT_NE(std::find(names.begin(), names.end(), w), names.end()) << w;

    // The file defining the Open Inference service, under its proto path.
    req.set_file_containing_symbol("inference.GRPCInferenceService");
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_GE(resp.file_descriptor_response().file_descriptor_proto_size(), 1) << resp.DebugString();
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(resp.file_descriptor_response().file_descriptor_proto(0)));
    EXPECT_EQ(file.name(), "kserve/v2/grpc_predict_v2.proto");
    EXPECT_EQ(file.package(), "inference");
    ASSERT_EQ(file.service_size(), 1);
    EXPECT_EQ(file.service(0).method_size(), 6);

    // An unknown symbol is an error answer; the stream goes on.
    req.set_file_containing_symbol("no.such.Service");
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
    req.set_file_by_filename("dtrain/v1/inference.proto");
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.file_descriptor_response().file_descriptor_proto_size(), 1);
    ASSERT_TRUE(stream->WritesDone());
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    auto stream = stub->ServerReflectionInfo(&ctx);
    grpc::reflection::v1alpha::ServerReflectionRequest req;
    req.set_list_services("");
    ASSERT_TRUE(stream->Write(req));
    grpc::reflection::v1alpha::ServerReflectionResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    std::vector<std::string> names;
    for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
    for (const std::string& w : want) EXPECT_NE(std::find(names.begin(), names.end(), w), names.end()) << w;
  }
}

TEST(OpenInferenceTest, TokensGuardModelCallsAndProbesStayOpen) {
  constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/tokens", std::string(kToken) + "\n", 0600).ok());
  InferProcess server({"--model-prefix", ServedPrefix(), "--host", "127.0.0.1", "--auth-token-file", dir + "/tokens"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  auto stub = OipStub(server);
  auto none = Infer(*stub, T10kInfer(1));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(), "bearer token")) << none.status();
  EXPECT_EQ(Infer(*stub, T10kInfer(1), "wrong-token-wrong-token").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Infer(*stub, T10kInfer(1), kToken).ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  oip::ModelMetadataRequest req;
  req.set_name("m");
  oip::ModelMetadataResponse md;
  EXPECT_EQ(stub->ModelMetadata(&ctx, req, &md).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext live_ctx;
  live_ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  oip::ServerLiveResponse live;
  EXPECT_TRUE(stub->ServerLive(&live_ctx, oip::ServerLiveRequest(), &live).ok());
  EXPECT_TRUE(live.live());
}

TEST(OpenInferenceTest, ConcurrentCallersOfBothProtocolsShareBatchesAndGetTheirOwnAnswers) {
  // A long delay and 8 images per batch: the 8 callers below are batched together.
  InferProcess server(
      {"--model-prefix", ServedPrefix(), "--max-batch-size", "8", "--max-batch-delay-us", "20000", "--threads", "1"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  constexpr int kCallers = 8, kRounds = 5;
  auto reference = Predict(server, T10kRequest(kCallers, /*top_k=*/10));
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto expected = [&](int image, int cls) {
    for (const auto& s : reference->predictions(image).top()) {
      if (s.class_id() == cls) return s.probability();
    }
    return -1.0f;
  };
  std::vector<std::thread> callers;
  std::vector<std::string> failures(kCallers);
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      auto stub = OipStub(server);
      for (int r = 0; r < kRounds; ++r) {
        if (c % 2 == 0) {  // the Open Inference Protocol: image c alone
          auto resp = Infer(*stub, T10kInfer(1, /*first=*/c));
          if (!resp.ok()) {
            failures[c] = resp.status().ToString();
            return;
          }
          const std::vector<float> probs = OutputValues(*resp, 1);
          for (int k = 0; k < 10; ++k) {
            if (std::abs(probs[static_cast<size_t>(k)] - expected(c, k)) > 1e-5) failures[c] = "probabilities differ";
          }
        } else {  // dtrain.v1: image c alone
          v1::PredictRequest req;
          req.set_pixel_type(v1::PIXEL_TYPE_UINT8);
          for (int64_t d : {1, 28, 28}) req.add_shape(d);
          req.set_data(T10kRequest(c + 1).data().substr(static_cast<size_t>(c) * 784));
          req.set_top_k(10);
          auto resp = Predict(server, req);
          if (!resp.ok()) {
            failures[c] = resp.status().ToString();
            return;
          }
          for (const auto& s : resp->predictions(0).top()) {
            if (std::abs(s.probability() - expected(c, s.class_id())) > 1e-5) failures[c] = "probabilities differ";
          }
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(failures[c], "") << "caller " << c;
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

}  // namespace
}  // namespace dtrain::testing
