// The networks, shaped as MXNet's example/image-classification symbols and as the
// PyTorch reference (tests/bench/torch_reference.py) builds them.
//   mlp:      flatten -> fc 128 relu -> fc 64 relu -> fc classes (MXNet's widths; any others
//             through NetworkSpec::hidden, e.g. 2048,2048: layers fc1 .. fcN+1)
//   lenet:    conv 20 5x5 tanh -> maxpool 2 -> conv 50 5x5 tanh -> maxpool 2 -> flatten
//             -> fc 500 tanh -> fc classes
//   resnet:   CIFAR-style ResNet-(6n+2) of He et al. 2016 (resnet.h): 3 stages of n basic
//             blocks, 16/32/64 channels, batch norm, 1x1 projection shortcuts
//   resnet18: ResNet-18 (torchvision's names), its stem fitted to the input size
// Input: float32 [N, C, H, W] in [0, 1], the shape the network was built for (the data's:
// 1x28x28 for Fashion-MNIST, 3x32x32 for CIFAR-10). Output: logits [N, classes].
// Only C++-frontend APIs present in both LibTorch 1.13 and 2.x are used.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "common/models/network_spec.h"

namespace dtrain::models {

class Network : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  virtual const std::string& name() const = 0;
  // Networks that normalise their input per channel, (x - mean) / std (the resnets), hold
  // mean and std as buffers ("input_mean", "input_std": saved with the weights, so
  // inference normalises as training did). `mean` and `std` are float [C]. The others
  // take the [0, 1] pixels as they are and ignore this (MXNet's mlp and lenet do).
  virtual void SetInputNormalization(const torch::Tensor& mean, const torch::Tensor& std) {}

  // Overlap of the pulls with the next forward (--overlap): forward calls the
  // gate with each submodule that holds parameters just before it first uses them, in
  // the order it uses them, so a worker can start a step while later layers' weights are
  // still arriving from the servers and wait for each layer only as it reaches it. Every
  // parameter is covered by some gated module before its first use (models_test checks
  // it by handing each module its weights only in the gate). Unset: nothing is called.
  using ParamGate = std::function<void(const torch::nn::Module&)>;
  void SetParamGate(ParamGate gate) { gate_ = std::move(gate); }

 protected:
  void Gate(const torch::nn::Module& m) const {
    if (gate_) gate_(m);
  }
  // seq's forward, each of its modules gated just before it runs.
  torch::Tensor ForwardGated(torch::nn::SequentialImpl& seq, torch::Tensor x) const;

 private:
  ParamGate gate_;
};

// The input shape of the data sets we train on by default: Fashion-MNIST's 1x28x28.
std::vector<int64_t> DefaultInputShape();

// INVALID_ARGUMENT for an unknown name (listing the known ones), a spec the network does
// not take or that is out of range (ResolveNetworkSpec), or an input shape that is not
// [C, H, W] with C in [1, 64] and H, W in [1, 4096], or too small for the network
// (lenet needs 16x16).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const NetworkSpec& spec, int num_classes = 10,
                                                       const std::vector<int64_t>& input_shape = DefaultInputShape());
// The network with its default shape (the mlp: MXNet's 128,64; the resnet: 20 layers).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes = 10);

}  // namespace dtrain::models
