// A loopback TCP port for tests that must name one up front (a hand launch's
// DMLC_PS_ROOT_PORT, a Prometheus to scrape). Prefer --port 0 with a port file where a
// binary offers it: a port found free here can be taken by someone else before use.
#pragma once

namespace dtrain::testing {

// A port nothing listens on right now (bound to 0 on 127.0.0.1 and released); 0 if
// the socket calls fail.
int FreePort();

}  // namespace dtrain::testing
