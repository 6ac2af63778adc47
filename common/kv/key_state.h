// One key's state: the unit that InitKeys restores, GetState returns, a .states file
// holds and (later) a server snapshot or a replica copies. One type for all of them,
// so that "a key's saved state" means the same thing on every path. The wire form is
// proto dtrain.v1.KeyState; a .states file leaves `shape` and `values` empty (the
// weights are in the .params file).
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::kv {

struct KeyState {
  uint64_t key = 0;
  std::vector<int64_t> shape;
  int64_t version = 0;                 // updates applied so far
  std::vector<float> values;           // the weights (empty where only the state matters)
  std::vector<float> optimizer_state;  // Optimizer::StateSlots() * numel
};

// Where a key stands, without its weights: what a rejoining worker asks for to find
// the step to redo (docs/recovery.md; wire form dtrain.v1.KeyVersion).
struct KeyVersion {
  uint64_t key = 0;
  int64_t version = 0;          // updates applied so far
  int64_t last_push_step = -1;  // the asking worker's last accepted push; -1: none
};

}  // namespace dtrain::kv
