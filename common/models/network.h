// The base of every network dtrain trains: a LibTorch module with a name, optional
// per-channel input normalisation, and the parameter gate that lets a worker overlap
// the pulls of later layers' weights with the forward of earlier ones. The networks
// themselves are in mlp.h, lenet.h and resnet.h; models.h builds one by name.
// Only C++-frontend APIs present in both LibTorch 1.13 and 2.x are used.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <torch/torch.h>

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

}  // namespace dtrain::models
