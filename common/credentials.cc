#include "common/credentials.h"

namespace dtrain {

std::shared_ptr<grpc::ServerCredentials> ServerCredentials() { return grpc::InsecureServerCredentials(); }

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() { return grpc::InsecureChannelCredentials(); }

}  // namespace dtrain
