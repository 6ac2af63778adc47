// The table `dtrain status` prints: every node's role, rank, address, state,
// incarnation and restarts, step, speed and when the scheduler last heard from it (or
// since when and why it is dead), then the workers' spread.
#pragma once

#include <string>

#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::launcher {

//  job at 127.0.0.1:9091: dist_sync, 2 workers, 1 server
//  workers: 3 (elastic 2:4, generation 2 from step 180)    <- --elastic jobs only
//  ROLE    RANK  ADDRESS          STATE      INC RESTARTS     STEP  SAMPLES/S  LAST HEARD
//  server     0  127.0.0.1:40123  ALIVE        1        0        -          -  0.4 s ago
//  worker     0  127.0.0.1        ALIVE        1        0      812     1203.5  0.2 s ago
//  worker     1  127.0.0.1        DEAD         2        1      790      980.0  dead for 12 s (heartbeat stream broke)
//  workers: steps 812..812 (lag 0), 1203.5 samples/s in all
// INC is the process's incarnation of its rank, RESTARTS how many new processes took
// the rank after the job started (docs/recovery.md); a REJOINING rank is catching up.
// With --replication R > 1, a section follows with each home server's chain:
//  key ranges (--replication 2): chain of each home server, * = serves the weights
//    range 0: server 0 (dead) server 1*
//    range 1: server 1* server 2 (restarted)
// Times are measured on the scheduler's clock (status.now_unix_ms), else this machine's.
std::string FormatStatus(const v1::GetStatusResponse& status, const std::string& scheduler);

}  // namespace dtrain::launcher
