// What one forward pass answers for a run of images, in plain vectors: the network's
// logits and their softmax, row-major [images, classes]. Both protocols read their
// answers from it (dtrain.v1 the top-k classes, the Open Inference Protocol the tensors),
// and the batcher hands each caller the rows of its own images.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::inference {

struct ClassOutputs {
  int64_t images = 0;
  int num_classes = 0;
  std::vector<float> logits;         // images * num_classes, the network's output
  std::vector<float> probabilities;  // the same, softmax over each row

  // Rows [first, first + count) as outputs of their own. The caller keeps the range
  // inside [0, images).
  ClassOutputs Rows(int64_t first, int64_t count) const;
};

struct ClassScore {
  int class_id = 0;
  float probability = 0;
};

// Per image, the top classes, most probable first.
using Predictions = std::vector<std::vector<ClassScore>>;

// The `top_k` most probable classes of every image (top_k clamped to [1, classes]);
// equal probabilities keep the lower class first.
Predictions TopClasses(const ClassOutputs& outputs, int top_k);

}  // namespace dtrain::inference
