// Every push and pull allocates megabyte-sized buffers (protobuf bytes, gRPC slices).
// glibc serves those with fresh mmap()s and returns them at free(), so each message
// pays page faults on first touch. Keeping them in the heap instead makes the next
// message reuse warm pages: a large share of a loopback push/pull's cost.
#pragma once

namespace dtrain {

// Call once at the start of main(), before threads start.
void TuneMallocForBulkTransfers();

}  // namespace dtrain
