// gRPC byte buffers as strings and back, for the wire-format tests.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "gtest/gtest.h"

namespace dtrain::kv::testing {

// Every byte of `b`, across its slices.
inline std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `s` as a one-slice buffer.
inline grpc::ByteBuffer FromString(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace dtrain::kv::testing
