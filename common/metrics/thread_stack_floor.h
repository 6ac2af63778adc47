// civetweb, the HTTP server under prometheus-cpp's Exposer, creates its threads with
// 100 KB stacks (its compile-time USE_STACK_SIZE). glibc refuses a thread whose stack
// cannot hold the process's static thread-local storage, and OpenBLAS's thread-safe
// builds (libblas.so.3 here; deploy/install-deps.sh) bring 60 KB of it, which with
// LibTorch's and the rest leaves too little: pthread_create fails with EINVAL and the
// metrics endpoint does not start. So every dtrain binary that serves metrics defines
// pthread_attr_setstacksize itself (thread_stack_floor.cc) and raises requests below
// kThreadStackFloor to it before calling glibc's; larger requests pass unchanged.
#pragma once

#include <cstddef>

namespace dtrain::metrics {

inline constexpr size_t kThreadStackFloor = size_t{1} << 20;  // 1 MiB; glibc's default is 8

// How many stack-size requests were raised so far (0 until civetweb starts): for the
// test that checks the floor is in force.
size_t RaisedStackRequests();

}  // namespace dtrain::metrics
