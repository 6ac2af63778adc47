// Watches a checkpoint prefix and keeps the ModelHolder on the newest epoch that loads.
//
// Training writes PREFIX-NNNN.params by temp file + rename, so a file under a .params
// name is either whole or absent; what can still go wrong is a corrupt copy, a network
// change or diverged (NaN) weights. Such a checkpoint is refused once, logged, recorded
// as the holder's reload error and not read again until the file changes, while the
// model already serving keeps serving.
#pragma once

#include <functional>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/inference/model_holder.h"

namespace dtrain::inference {

struct WatcherOptions {
  std::string prefix;    // PREFIX as in PREFIX-symbol.json
  int pinned_epoch = 0;  // > 0: load exactly this epoch, never another
  // Called (on the polling thread) after each switch to a newly loaded epoch.
  std::function<void(int epoch)> on_loaded;
};

class CheckpointWatcher {
 public:
  CheckpointWatcher(WatcherOptions options, std::shared_ptr<ModelHolder> holder);
  ~CheckpointWatcher();  // Stop with a short deadline
  CheckpointWatcher(const CheckpointWatcher&) = delete;
  CheckpointWatcher& operator=(const CheckpointWatcher&) = delete;

  // One look at the prefix's directory: loads the newest epoch newer than the serving
  // one that loads cleanly (trying older ones when the newest is refused). Returns
  // whether the serving model changed. Before any model is serving, an error says what
  // is missing ("no checkpoint m-NNNN.params in DIR yet", the refused file's error).
  absl::StatusOr<bool> Poll();

  // Polls every `interval` on a background thread until Stop.
  void Start(absl::Duration interval);

  // Stops the thread, waiting at most `timeout` for a load in progress to finish; past
  // that the thread is detached (it owns everything it touches) and false returned.
  bool Stop(absl::Duration timeout);

 private:
  struct Core;  // the state Poll uses, shared with the thread
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace dtrain::inference
