#include "common/metrics/metrics_flags.h"

#include "absl/strings/str_cat.h"

namespace dtrain::metrics {

void AddMetricsFlags(FlagSet& flags, MetricsFlags* out) {
  flags.AddInt("metrics-port", &out->port,
               "serve Prometheus metrics on http://HOST:PORT/metrics; -1: off, 0: any free port",
               {"DTRAIN_METRICS_PORT"});
  flags.AddString("metrics-host", &out->host, "address the metrics endpoint listens on", {"DTRAIN_METRICS_HOST"});
  flags.AddString("metrics-port-file", &out->port_file, "write the metrics endpoint's port to this file",
                  {"DTRAIN_METRICS_PORT_FILE"});
}

absl::Status CheckMetricsFlags(const MetricsFlags& flags) {
  if (flags.port < -1 || flags.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-port must be -1 (off), 0 (any free port) or 1..65535, got ", flags.port));
  }
  if (flags.enabled() && flags.host.empty()) {
    return absl::InvalidArgumentError("--metrics-host must not be empty");
  }
  if (!flags.enabled() && !flags.port_file.empty()) {
    return absl::InvalidArgumentError("--metrics-port-file needs --metrics-port (0 for any free port)");
  }
  return absl::OkStatus();
}

}  // namespace dtrain::metrics
