// The gnuplot program behind `dtrain plot`: three panels against epoch, from the rows
// of PREFIX-metrics.csv (common/metrics/metrics_csv.h) written to a plain data file.
#pragma once

#include <string>
#include <vector>

#include "common/metrics/metrics_csv.h"

namespace dtrain::launcher {

enum class ImageFormat { kPng, kSvg };

struct PlotSpec {
  std::string data_path;    // written by PlotData
  std::string output_path;  // the image
  ImageFormat format = ImageFormat::kPng;
  std::string terminal;  // gnuplot terminal: "pngcairo", "png" or "svg"
  int width = 1200;
  int height = 900;
  std::string title;
};

// One line per epoch: epoch,train_loss,train_accuracy,validation_accuracy,samples_per_sec.
std::string PlotData(const std::vector<metrics::EpochFigures>& rows);

// Panels: training cross-entropy; training and validation accuracy; worker 0's
// samples/s. `rows` (non-empty) sets the epoch axis' range.
std::string PlotScript(const PlotSpec& spec, const std::vector<metrics::EpochFigures>& rows);

}  // namespace dtrain::launcher
