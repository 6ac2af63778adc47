#include "common/metrics/thread_stack_floor.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

namespace dtrain::metrics {
namespace {
std::atomic<size_t> g_raised{0};
}  // namespace

size_t RaisedStackRequests() { return g_raised.load(); }

}  // namespace dtrain::metrics

// Exported from the executable (CMake: --export-dynamic-symbol), so that shared libraries
// (libcivetweb) bind to it instead of glibc's; glibc's is found with RTLD_NEXT.
extern "C" __attribute__((visibility("default"))) int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static const Fn glibc = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (glibc == nullptr) return ENOSYS;  // cannot happen where glibc is loaded
  if (size < dtrain::metrics::kThreadStackFloor) {
    dtrain::metrics::g_raised.fetch_add(1);
    size = dtrain::metrics::kThreadStackFloor;
  }
  return glibc(attr, size);
}
