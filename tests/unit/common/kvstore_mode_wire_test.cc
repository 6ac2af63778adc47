// The kvstore mode on the wire: the enum both ways, and ConfigureRequest's older
// string field where the enum is unspecified.
#include "common/kvstore_mode_wire.h"

#include "gtest/gtest.h"

namespace dtrain {
namespace {

constexpr KVStoreMode kAll[] = {KVStoreMode::kLocal,          KVStoreMode::kDevice,    KVStoreMode::kDistSync,
                                KVStoreMode::kDistDeviceSync, KVStoreMode::kDistAsync, KVStoreMode::kDistSsp};

TEST(KVStoreModeWireTest, EveryModeRoundTripsThroughTheEnumAndItsName) {
  for (KVStoreMode m : kAll) {
    EXPECT_NE(ToProto(m), v1::KV_STORE_MODE_UNSPECIFIED) << KVStoreModeName(m);
    EXPECT_EQ(KVStoreModeFromProto(ToProto(m)).value(), m) << KVStoreModeName(m);
    EXPECT_EQ(ParseKVStoreMode(KVStoreModeName(m)).value(), m);
    // A request carrying the enum, the name, or both (agreeing) names the same mode.
    EXPECT_EQ(KVStoreModeOf(ToProto(m), "").value(), m);
    EXPECT_EQ(KVStoreModeOf(v1::KV_STORE_MODE_UNSPECIFIED, KVStoreModeName(m)).value(), m);
    EXPECT_EQ(KVStoreModeOf(ToProto(m), KVStoreModeName(m)).value(), m);
  }
  EXPECT_EQ(ToProto(KVStoreMode::kDistSync), v1::KV_STORE_MODE_DIST_SYNC);
  EXPECT_EQ(ToProto(KVStoreMode::kDistSsp), v1::KV_STORE_MODE_DIST_SSP);
}

TEST(KVStoreModeWireTest, UnknownConflictingOrMissingModesAreRefused) {
  EXPECT_EQ(KVStoreModeFromProto(v1::KV_STORE_MODE_UNSPECIFIED).status().message(),
            "unknown kv-store mode 0 (unspecified)");
  EXPECT_EQ(KVStoreModeFromProto(static_cast<v1::KvStoreMode>(42)).status().message(), "unknown kv-store mode 42");
  EXPECT_EQ(KVStoreModeOf(v1::KV_STORE_MODE_DIST_SYNC, "dist_async").status().message(),
            "mode dist_sync and kv_store \"dist_async\" name different kv-store modes");
  EXPECT_EQ(KVStoreModeOf(v1::KV_STORE_MODE_UNSPECIFIED, "").status().message(),
            "no kv-store mode: neither mode nor kv_store is set");
  EXPECT_EQ(KVStoreModeOf(v1::KV_STORE_MODE_UNSPECIFIED, "bogus").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dtrain
