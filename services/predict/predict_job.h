// `dtrain predict`: sends images to a dtrain-infer server and reports what it says.
//
// Inputs are IDX files (optionally with labels), CIFAR-10 binary batches (*.bin, with
// their labels) or PNG files, converted to the model's input shape as the server's
// ModelInfo gives it (its symbol file's): channels (gray repeated, colour to luma) and
// size; for a one-channel model PNGs with a light background are inverted to look like
// Fashion-MNIST's light-on-black.
// Prints one line per image and, with labels, the accuracy; --render draws a grid.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dtrain::predict {

struct PredictOptions {
  std::string server;             // host:port of dtrain-infer
  std::string images;             // IDX images ([N, H, W] uint8), raw or .gz; or a CIFAR-10 batch (.bin)
  std::string labels;             // IDX labels ([N] uint8), optional
  int64_t limit = 0;              // first N images only (0 = all)
  std::vector<std::string> pngs;  // PNG files, instead of --images
  std::string invert = "auto";    // PNGs: auto | yes | no
  std::string render;             // write the grid picture here (optional)
  int64_t render_limit = 100;     // images in the picture
  int64_t batch = 256;            // images per Predict (capped at the server's max)
  int64_t top_k = 1;              // classes shown per image
  double timeout_s = 30;          // per Predict call
  double wait_s = 30;             // for the server to have a model
  std::string auth_token_file;    // its first token is sent as a bearer token (optional)
};

// INVALID_ARGUMENT for inconsistent options (both or neither of images / PNGs, labels
// without images, unknown --invert), before anything is read or sent.
absl::Status CheckOptions(const PredictOptions& options);

// Runs it all, printing to `out`. Errors name the file or the server.
absl::Status RunPredict(const PredictOptions& options, std::FILE* out);

}  // namespace dtrain::predict
