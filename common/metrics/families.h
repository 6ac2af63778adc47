// For the metrics of each role (services/*/*_metrics.cc): shorthands that register one series of a family.
// Families of the same name are merged by prometheus-cpp, so a labelled family is
// built by calling these once per label value.
#pragma once

#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace dtrain::metrics::internal {

inline prometheus::Counter& AddCounter(prometheus::Registry& r, const std::string& name, const std::string& help,
                                       const prometheus::Labels& labels = {}) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
}

inline prometheus::Gauge& AddGauge(prometheus::Registry& r, const std::string& name, const std::string& help,
                                   const prometheus::Labels& labels = {}) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}

inline prometheus::Histogram& AddHistogram(prometheus::Registry& r, const std::string& name, const std::string& help,
                                           const std::vector<double>& buckets, const prometheus::Labels& labels = {}) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets);
}

// Durations from 0.5 ms to 10 s: a step's phases, a sync wait, a request.
inline const std::vector<double>& SecondsBuckets() {
  static const std::vector<double> b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return b;
}

}  // namespace dtrain::metrics::internal
