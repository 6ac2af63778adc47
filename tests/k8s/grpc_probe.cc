// What the kubelet does for a native gRPC probe (`grpc: {port, service}`): one call to
// grpc.health.v1.Health/Check with a 1 s deadline; healthy only if the answer is SERVING.
//
//   dtrain-k8s-grpc-probe HOST:PORT [SERVICE]     exit 0: SERVING; 1: anything else
//
// Uses the generic stub and encodes the two tiny messages by hand, so it needs no
// generated code: HealthCheckRequest{string service = 1}, HealthCheckResponse{enum status = 1}.
#include <chrono>
#include <cstdio>
#include <future>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s HOST:PORT [SERVICE]\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1];
  const std::string service = argc == 3 ? argv[2] : "";
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);  // field 1, length-delimited
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  // Plaintext like the kubelet's own probe, which cannot speak TLS: not
  // common/credentials.h, whatever the cluster's services use.
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    std::printf("%s %s: rpc error %d: %s\n", target.c_str(), service.c_str(), status.error_code(),
                status.error_message().c_str());
    return 1;
  }
  std::vector<grpc::Slice> slices;
  (void)resp.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  const int code = bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;  // absent: UNKNOWN
  static const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  std::printf("%s %s: %s\n", target.c_str(), service.c_str(), code >= 0 && code <= 3 ? kNames[code] : "?");
  return code == 1 ? 0 : 1;
}
