// A multi-layer perceptron with its own forward and backward pass: fully connected layers with
// ReLU between them and a softmax cross-entropy loss on the last, in plain loops over
// contiguous row-major buffers. Templated on the element type: the trainer uses float, the
// gradient test checks the backward pass in double against finite differences.
//
// Layer l (0-based; named "fc<l+1>") maps widths[l] inputs to widths[l+1] outputs with
//   weight  [widths[l], widths[l+1]]  (tensor 2l,   "fc<l+1>.weight")
//   bias    [widths[l+1]]             (tensor 2l+1, "fc<l+1>.bias")
// and computes out = in * weight + bias, then the activation (ReLU or tanh) except on the last
// layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hvd_train {

// The hidden layers' nonlinearity. ReLU's derivative jumps at 0, so two runs whose
// pre-activations differ by a rounding error can take different branches there; tanh is smooth.
enum class Activation { kRelu, kTanh };
const char* activationName(Activation a);
// "relu" or "tanh"; throws std::invalid_argument otherwise.
Activation parseActivation(const std::string& text);

template <typename T>
class Mlp {
 public:
  // widths: inputs, hidden widths..., classes; at least two entries, all positive.
  explicit Mlp(std::vector<int> widths, Activation activation = Activation::kRelu);

  const std::vector<int>& widths() const { return widths_; }
  int numLayers() const { return static_cast<int>(widths_.size()) - 1; }
  int inputs() const { return widths_.front(); }
  int classes() const { return widths_.back(); }
  Activation activation() const { return activation_; }

  // Parameter tensors, in the order above.
  size_t numTensors() const { return params_.size(); }
  const std::string& tensorName(size_t t) const { return names_.at(t); }
  std::vector<int64_t> tensorShape(size_t t) const;
  std::vector<T>& param(size_t t) { return params_.at(t); }
  const std::vector<T>& param(size_t t) const { return params_.at(t); }
  std::vector<T>& grad(size_t t) { return grads_.at(t); }
  const std::vector<T>& grad(size_t t) const { return grads_.at(t); }
  size_t numParameters() const;

  // Uniform weights (He for ReLU: bound sqrt(6 / fan_in); Glorot for tanh: sqrt(6 / (fan_in +
  // fan_out))), zero biases; deterministic in `seed`.
  void init(uint64_t seed);

  // Mean softmax cross-entropy of the `rows` samples x [rows, inputs()] with labels y, keeping
  // the activations for backward(). `correct` (optional) receives how many rows the model
  // classifies right (argmax of the logits).
  double forward(const T* x, const int32_t* y, int rows, int* correct = nullptr);

  // Gradients of the last forward()'s mean loss with respect to every parameter, into grad().
  // Layers are processed from the last to the first; as soon as layer l's weight and bias
  // gradients are complete, ready(l) is called — where a data-parallel trainer submits them
  // for allreduce while the rest of the backward pass runs. Reads only the parameters and
  // the saved activations, never a gradient it has already handed to ready().
  void backward(const std::function<void(int layer)>& ready = {});

  // Class predictions (argmax of the logits) for rows x [rows, inputs()]; no state kept.
  std::vector<int32_t> predict(const T* x, int rows) const;

 private:
  // out [rows, widths[l+1]] = in [rows, widths[l]] * weight + bias.
  void affine(int layer, const T* in, int rows, T* out) const;

  // The activation in place over n values.
  void activate(T* v, size_t n) const;

  std::vector<int> widths_;
  Activation activation_;
  std::vector<std::string> names_;
  std::vector<std::vector<T>> params_;
  std::vector<std::vector<T>> grads_;
  // Saved by forward(): acts_[0] is the input, acts_[l + 1] the output of layer l (after the
  // activation for hidden layers, softmax probabilities for the last one).
  int rows_ = 0;
  std::vector<int32_t> labels_;
  std::vector<std::vector<T>> acts_;
  std::vector<T> delta_;
  std::vector<T> deltaPrev_;
};

extern template class Mlp<float>;
extern template class Mlp<double>;

// Stochastic gradient descent with (heavy-ball) momentum, as torch.optim.SGD:
//   v = momentum * v + grad;  param -= lr * v.
template <typename T>
class Sgd {
 public:
  Sgd(double lr, double momentum) : lr_(static_cast<T>(lr)), momentum_(static_cast<T>(momentum)) {}
  void step(Mlp<T>& model);

 private:
  T lr_;
  T momentum_;
  std::vector<std::vector<T>> velocity_;
};

extern template class Sgd<float>;
extern template class Sgd<double>;

// Every parameter tensor of `model`, in tensor order, as raw native-endian float32 values.
void saveParameters(const Mlp<float>& model, const std::string& path);
// Reads a file written by saveParameters (any length); throws std::runtime_error naming it.
std::vector<float> loadParameters(const std::string& path);

}  // namespace hvd_train
