// The flags every dtrain process takes for its Prometheus endpoint:
//
//   --metrics-port N       DTRAIN_METRICS_PORT       -1 (default): no endpoint, no metrics kept;
//                                                     0: any free port (logged, and written to
//                                                     --metrics-port-file); N: that port
//   --metrics-host ADDR    DTRAIN_METRICS_HOST       address to listen on (default 0.0.0.0, so a
//                                                     pod's IP can be scraped)
//   --metrics-port-file P  DTRAIN_METRICS_PORT_FILE  write the bound port here (atomically), for
//                                                     launchers that asked for port 0
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/flags.h"

namespace dtrain::metrics {

struct MetricsFlags {
  int64_t port = -1;
  std::string host = "0.0.0.0";
  std::string port_file;

  bool enabled() const { return port >= 0; }
};

void AddMetricsFlags(FlagSet& flags, MetricsFlags* out);

// Range checks after parsing: INVALID_ARGUMENT naming the flag.
absl::Status CheckMetricsFlags(const MetricsFlags& flags);

}  // namespace dtrain::metrics
