// KVStoreMode on the wire: v1::KvStoreMode, and the mode name older workers sent in
// ConfigureRequest.kv_store, accepted where the enum is unspecified.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kvstore_mode.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain {

v1::KvStoreMode ToProto(KVStoreMode mode);
// KV_STORE_MODE_UNSPECIFIED and numbers this build does not know are INVALID_ARGUMENT.
absl::StatusOr<KVStoreMode> KVStoreModeFromProto(v1::KvStoreMode mode);

// The mode a request names: `mode` when it is set, else the name `legacy_name`
// (ParseKVStoreMode); both set and naming different modes, or neither set, is
// INVALID_ARGUMENT saying so.
absl::StatusOr<KVStoreMode> KVStoreModeOf(v1::KvStoreMode mode, absl::string_view legacy_name);

}  // namespace dtrain
