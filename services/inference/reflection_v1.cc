#include "services/inference/reflection_v1.h"

#include <memory>
#include <unordered_set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>

#include "absl/strings/str_cat.h"

namespace dtrain::inference {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

void SetError(grpc::StatusCode code, const std::string& message, rv1::ServerReflectionResponse* resp) {
  resp->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  resp->mutable_error_response()->set_error_message(message);
}

// `file` and every file it imports, transitively, each once, `file` first (clients
// build their pool from this answer without asking again).
void AddFileAndImports(const FileDescriptor* file, std::unordered_set<std::string>* sent,
                       rv1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFileAndImports(file->dependency(i), sent, out);
}

void AnswerFile(const FileDescriptor* file, const std::string& what, rv1::ServerReflectionResponse* resp) {
  if (file == nullptr) {
    SetError(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " is not known to this server"), resp);
    return;
  }
  std::unordered_set<std::string> sent;
  AddFileAndImports(file, &sent, resp->mutable_file_descriptor_response());
}

void Answer(const rv1::ServerReflectionRequest& req, const std::vector<std::string>* services,
            rv1::ServerReflectionResponse* resp) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  resp->set_valid_host(req.host());
  *resp->mutable_original_request() = req;
  switch (req.message_request_case()) {
    case rv1::ServerReflectionRequest::kFileByFilename:
      AnswerFile(pool->FindFileByName(req.file_by_filename()), absl::StrCat("file ", req.file_by_filename()), resp);
      return;
    case rv1::ServerReflectionRequest::kFileContainingSymbol:
      AnswerFile(pool->FindFileContainingSymbol(req.file_containing_symbol()),
                 absl::StrCat("symbol ", req.file_containing_symbol()), resp);
      return;
    case rv1::ServerReflectionRequest::kFileContainingExtension: {
      const rv1::ExtensionRequest& ext = req.file_containing_extension();
      const Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      const FieldDescriptor* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
      AnswerFile(field == nullptr ? nullptr : field->file(),
                 absl::StrCat("extension ", ext.extension_number(), " of ", ext.containing_type()), resp);
      return;
    }
    case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const Descriptor* type = pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("message type ", req.all_extension_numbers_of_type(), " is not known to this server"),
                 resp);
        return;
      }
      std::vector<const FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      rv1::ExtensionNumberResponse* numbers = resp->mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const FieldDescriptor* f : extensions) numbers->add_extension_number(f->number());
      return;
    }
    case rv1::ServerReflectionRequest::kListServices: {
      rv1::ListServiceResponse* list = resp->mutable_list_services_response();
      if (services != nullptr) {
        for (const std::string& name : *services) list->add_service()->set_name(name);
      }
      return;
    }
    case rv1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET: break;
  }
  SetError(grpc::StatusCode::INVALID_ARGUMENT,
           "the request names nothing: set file_by_filename, file_containing_symbol, file_containing_extension, "
           "all_extension_numbers_of_type or list_services",
           resp);
}

// Registers the service while the server is built and gives it the server's service
// list (which the server keeps up to date) once built.
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "dtrain_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override { si->RegisterService(service_); }
  void Finish(grpc::ServerInitializer* si) override { service_->SetServiceList(si->GetServiceList()); }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}
  bool has_sync_methods() const override { return true; }

 private:
  std::shared_ptr<ReflectionV1Service> service_ = std::make_shared<ReflectionV1Service>();
};

class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>* stream) {
  rv1::ServerReflectionRequest req;
  while (!ctx->IsCancelled() && stream->Read(&req)) {
    rv1::ServerReflectionResponse resp;
    Answer(req, services_.load(), &resp);
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

void AddReflectionV1(grpc::ServerBuilder& builder) { builder.SetOption(std::make_unique<ReflectionV1Option>()); }

}  // namespace dtrain::inference
