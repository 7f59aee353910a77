// A small deterministic random number generator for the trainer: the same seed gives the same
// data set, initial parameters and epoch order on every rank, every machine and every standard
// library (std::normal_distribution and friends are implementation-defined, so not used).
#pragma once

#include <cmath>
#include <cstdint>

namespace hvd_train {

// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state word, full period, good mixing.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0 (multiply-shift; the bias is below 2^-32 for our sizes).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  // Standard normal (Box-Muller, one value per call).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// Derives an independent stream's seed from a base seed and a tag (e.g. "data", an epoch).
inline uint64_t mixSeed(uint64_t seed, uint64_t tag) {
  Rng rng(seed ^ (tag * 0xD1B54A32D192ED03ull));
  rng.next();
  return rng.next();
}

}  // namespace hvd_train
