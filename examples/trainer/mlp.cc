#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "rng.h"

namespace hvd_train {

const char* activationName(Activation a) { return a == Activation::kTanh ? "tanh" : "relu"; }

Activation parseActivation(const std::string& text) {
  if (text == "relu") return Activation::kRelu;
  if (text == "tanh") return Activation::kTanh;
  throw std::invalid_argument("unknown activation '" + text + "' (relu or tanh)");
}

template <typename T>
Mlp<T>::Mlp(std::vector<int> widths, Activation activation)
    : widths_(std::move(widths)), activation_(activation) {
  if (widths_.size() < 2) throw std::invalid_argument("Mlp: needs at least inputs and classes");
  for (int w : widths_) {
    if (w <= 0) throw std::invalid_argument("Mlp: every width must be positive");
  }
  for (int l = 0; l < numLayers(); ++l) {
    const std::string layer = "fc" + std::to_string(l + 1);
    names_.push_back(layer + ".weight");
    names_.push_back(layer + ".bias");
    params_.emplace_back(static_cast<size_t>(widths_[l]) * widths_[l + 1], T(0));
    params_.emplace_back(static_cast<size_t>(widths_[l + 1]), T(0));
  }
  for (const auto& p : params_) grads_.emplace_back(p.size(), T(0));
  acts_.resize(widths_.size());
}

template <typename T>
std::vector<int64_t> Mlp<T>::tensorShape(size_t t) const {
  const size_t l = t / 2;
  if (t % 2 == 0) return {widths_.at(l), widths_.at(l + 1)};
  return {widths_.at(l + 1)};
}

template <typename T>
size_t Mlp<T>::numParameters() const {
  size_t n = 0;
  for (const auto& p : params_) n += p.size();
  return n;
}

template <typename T>
void Mlp<T>::init(uint64_t seed) {
  Rng rng(mixSeed(seed, 3));
  for (int l = 0; l < numLayers(); ++l) {
    const double fanIn = widths_[l];
    const double fanOut = widths_[l + 1];
    const double bound = activation_ == Activation::kTanh ? std::sqrt(6.0 / (fanIn + fanOut))
                                                          : std::sqrt(6.0 / fanIn);
    for (T& w : params_[2 * l]) w = static_cast<T>(bound * (2.0 * rng.uniform() - 1.0));
    std::fill(params_[2 * l + 1].begin(), params_[2 * l + 1].end(), T(0));
  }
}

template <typename T>
void Mlp<T>::activate(T* v, size_t n) const {
  if (activation_ == Activation::kTanh) {
    for (size_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
  } else {
    for (size_t i = 0; i < n; ++i) v[i] = v[i] > T(0) ? v[i] : T(0);
  }
}

template <typename T>
void Mlp<T>::affine(int layer, const T* in, int rows, T* out) const {
  const int nIn = widths_[layer];
  const int nOut = widths_[layer + 1];
  const T* w = params_[2 * layer].data();
  const T* b = params_[2 * layer + 1].data();
  for (int i = 0; i < rows; ++i) {
    const T* x = in + static_cast<size_t>(i) * nIn;
    T* o = out + static_cast<size_t>(i) * nOut;
    for (int j = 0; j < nOut; ++j) o[j] = b[j];
    for (int k = 0; k < nIn; ++k) {
      const T a = x[k];
      if (a == T(0)) continue;  // inactive ReLU units: nothing to add
      const T* wk = w + static_cast<size_t>(k) * nOut;
      for (int j = 0; j < nOut; ++j) o[j] += a * wk[j];
    }
  }
}

template <typename T>
double Mlp<T>::forward(const T* x, const int32_t* y, int rows, int* correct) {
  if (rows <= 0) throw std::invalid_argument("Mlp::forward: rows must be positive");
  rows_ = rows;
  labels_.assign(y, y + rows);
  acts_[0].assign(x, x + static_cast<size_t>(rows) * inputs());
  for (int l = 0; l < numLayers(); ++l) {
    std::vector<T>& out = acts_[l + 1];
    out.resize(static_cast<size_t>(rows) * widths_[l + 1]);
    affine(l, acts_[l].data(), rows, out.data());
    if (l + 1 < numLayers()) activate(out.data(), out.size());
  }
  // Softmax in place over the logits, cross-entropy from the stable log-sum-exp.
  const int n = classes();
  double lossSum = 0;
  int hits = 0;
  for (int i = 0; i < rows; ++i) {
    T* z = acts_.back().data() + static_cast<size_t>(i) * n;
    const int label = labels_[i];
    if (label < 0 || label >= n) throw std::out_of_range("Mlp::forward: label out of range");
    const int best = static_cast<int>(std::max_element(z, z + n) - z);
    if (best == label) ++hits;
    const T zmax = z[best];
    const T zLabel = z[label];
    T sum = 0;
    for (int j = 0; j < n; ++j) {
      z[j] = std::exp(z[j] - zmax);
      sum += z[j];
    }
    for (int j = 0; j < n; ++j) z[j] /= sum;
    lossSum += static_cast<double>(std::log(sum) - (zLabel - zmax));
  }
  if (correct != nullptr) *correct = hits;
  return lossSum / rows;
}

template <typename T>
void Mlp<T>::backward(const std::function<void(int layer)>& ready) {
  if (rows_ == 0) throw std::logic_error("Mlp::backward without forward");
  const int rows = rows_;
  // d(mean loss)/d(logits) = (softmax - onehot) / rows.
  const int n = classes();
  const T scale = T(1) / static_cast<T>(rows);
  delta_.assign(acts_.back().begin(), acts_.back().end());
  for (int i = 0; i < rows; ++i) {
    T* d = delta_.data() + static_cast<size_t>(i) * n;
    d[labels_[i]] -= T(1);
    for (int j = 0; j < n; ++j) d[j] *= scale;
  }
  for (int l = numLayers() - 1; l >= 0; --l) {
    const int nIn = widths_[l];
    const int nOut = widths_[l + 1];
    const T* in = acts_[l].data();
    T* gw = grads_[2 * l].data();
    T* gb = grads_[2 * l + 1].data();
    std::fill(gw, gw + static_cast<size_t>(nIn) * nOut, T(0));
    std::fill(gb, gb + nOut, T(0));
    for (int i = 0; i < rows; ++i) {
      const T* d = delta_.data() + static_cast<size_t>(i) * nOut;
      const T* x = in + static_cast<size_t>(i) * nIn;
      for (int j = 0; j < nOut; ++j) gb[j] += d[j];
      for (int k = 0; k < nIn; ++k) {
        const T a = x[k];
        if (a == T(0)) continue;
        T* gk = gw + static_cast<size_t>(k) * nOut;
        for (int j = 0; j < nOut; ++j) gk[j] += a * d[j];
      }
    }
    if (ready) ready(l);
    if (l == 0) break;
    // Through the weight and the previous layer's activation, whose derivative follows from
    // its output: ReLU 1 where the output is positive (else 0), tanh 1 - out^2.
    const bool smooth = activation_ == Activation::kTanh;
    const T* w = params_[2 * l].data();
    deltaPrev_.resize(static_cast<size_t>(rows) * nIn);
    for (int i = 0; i < rows; ++i) {
      const T* d = delta_.data() + static_cast<size_t>(i) * nOut;
      const T* x = in + static_cast<size_t>(i) * nIn;
      T* p = deltaPrev_.data() + static_cast<size_t>(i) * nIn;
      for (int k = 0; k < nIn; ++k) {
        if (!smooth && x[k] <= T(0)) {
          p[k] = T(0);
          continue;
        }
        const T* wk = w + static_cast<size_t>(k) * nOut;
        T s = 0;
        for (int j = 0; j < nOut; ++j) s += d[j] * wk[j];
        p[k] = smooth ? s * (T(1) - x[k] * x[k]) : s;
      }
    }
    delta_.swap(deltaPrev_);
  }
}

template <typename T>
std::vector<int32_t> Mlp<T>::predict(const T* x, int rows) const {
  std::vector<T> cur(x, x + static_cast<size_t>(rows) * inputs());
  std::vector<T> next;
  for (int l = 0; l < numLayers(); ++l) {
    next.resize(static_cast<size_t>(rows) * widths_[l + 1]);
    affine(l, cur.data(), rows, next.data());
    if (l + 1 < numLayers()) activate(next.data(), next.size());
    cur.swap(next);
  }
  std::vector<int32_t> labels(rows);
  const int n = classes();
  for (int i = 0; i < rows; ++i) {
    const T* z = cur.data() + static_cast<size_t>(i) * n;
    labels[i] = static_cast<int32_t>(std::max_element(z, z + n) - z);
  }
  return labels;
}

template <typename T>
void Sgd<T>::step(Mlp<T>& model) {
  if (velocity_.empty()) {
    for (size_t t = 0; t < model.numTensors(); ++t) velocity_.emplace_back(model.param(t).size());
  }
  for (size_t t = 0; t < model.numTensors(); ++t) {
    T* p = model.param(t).data();
    const T* g = model.grad(t).data();
    T* v = velocity_[t].data();
    const size_t n = velocity_[t].size();
    for (size_t i = 0; i < n; ++i) {
      v[i] = momentum_ * v[i] + g[i];
      p[i] -= lr_ * v[i];
    }
  }
}

template class Mlp<float>;
template class Mlp<double>;
template class Sgd<float>;
template class Sgd<double>;

void saveParameters(const Mlp<float>& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (size_t t = 0; t < model.numTensors() && out; ++t) {
    const auto& p = model.param(t);
    out.write(reinterpret_cast<const char*>(p.data()),
              static_cast<std::streamsize>(p.size() * sizeof(float)));
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write parameters to '" + path + "'");
}

std::vector<float> loadParameters(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open parameter file '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() % sizeof(float) != 0) {
    throw std::runtime_error("parameter file '" + path + "' is not a whole number of float32s");
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(values.data()));
  return values;
}

}  // namespace hvd_train
