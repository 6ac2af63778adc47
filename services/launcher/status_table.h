// The table `dtrain status` prints: every node's role, rank, address, state, step,
// speed and when the scheduler last heard from it, then the workers' spread.
#pragma once

#include <string>

#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::launcher {

//   job at 127.0.0.1:9091: dist_sync, 2 workers, 1 server
//   ROLE    RANK  ADDRESS          STATE      STEP  SAMPLES/S  LAST HEARD
//   server     0  127.0.0.1:40123  ALIVE         -          -  0.4 s ago
//   worker     0  127.0.0.1        ALIVE       812     1203.5  0.2 s ago
//   workers: steps 805..812 (lag 7), 2390.5 samples/s in all
std::string FormatStatus(const v1::GetStatusResponse& status, const std::string& scheduler);

}  // namespace dtrain::launcher
