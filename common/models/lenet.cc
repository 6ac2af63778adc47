#include "common/models/lenet.h"

namespace dtrain::models {

int64_t LeNetSide(int64_t side) { return ((side - 4) / 2 - 4) / 2; }

LeNet::LeNet(int64_t channels, int64_t height, int64_t width, int num_classes)
    : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 20, 5)))),
      conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(20, 50, 5)))),
      fc1_(register_module("fc1", torch::nn::Linear(50 * LeNetSide(height) * LeNetSide(width), 500))),
      fc2_(register_module("fc2", torch::nn::Linear(500, num_classes))) {}

torch::Tensor LeNet::forward(torch::Tensor x) {
  // Computed as tanh(pool(conv)) on channels-last activations, which is MXNet's
  // pool(tanh(conv)) value for value: tanh is increasing, so the window's largest input
  // gives its largest output. tanh then runs on a quarter of the values, and LibTorch's
  // max_pool2d is vectorised only for channels-last (its NCHW loop took 18% of a step);
  // conv2 keeps the layout its input has. The weights stay contiguous (NCHW), as the
  // parameter servers and checkpoints hold them. A step takes a third less CPU.
  Gate(*conv1_);
  x = torch::tanh(torch::max_pool2d(conv1_->forward(x).contiguous(at::MemoryFormat::ChannelsLast),
                                    /*kernel_size=*/2, /*stride=*/2));
  Gate(*conv2_);
  x = torch::tanh(torch::max_pool2d(conv2_->forward(x).contiguous(at::MemoryFormat::ChannelsLast),
                                    /*kernel_size=*/2, /*stride=*/2));
  Gate(*fc1_);
  x = torch::tanh(fc1_->forward(x.flatten(1)));
  Gate(*fc2_);
  return fc2_->forward(x);
}

}  // namespace dtrain::models
