#include "services/worker/leave_on_signal.h"

#include <string>

#include "common/log.h"

namespace dtrain::worker {
namespace {
// What the destructor asks the signal for, so that the thread's wait ends.
constexpr char kDone[] = "the worker is done";
}  // namespace

LeaveOnSignal::LeaveOnSignal(ShutdownSignal& signal, ClusterElastic& cluster)
    : signal_(signal), cluster_(cluster), thread_([this] { Run(); }) {}

LeaveOnSignal::~LeaveOnSignal() {
  done_.store(true);
  signal_.Request(kDone);
  thread_.join();
}

void LeaveOnSignal::Run() {
  const std::string why = signal_.Wait();
  if (done_.load()) return;
  const absl::Status s = cluster_.AnnounceLeave(why);
  if (s.ok()) {
    leaving_.store(true);
    DTRAIN_LOG(WARNING) << why << ": leaving the elastic job; stepping on until the membership without this "
                        << "worker is committed";
    return;
  }
  DTRAIN_LOG(WARNING) << why << ": the scheduler refused to let this worker leave the job (" << s.message()
                      << "); training goes on";
}

}  // namespace dtrain::worker
