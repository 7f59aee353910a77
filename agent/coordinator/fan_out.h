// One call to many hosts at once: the leader sends every host its request before it waits for
// any answer, so a round over N hosts costs one round trip rather than N, and needs no thread
// per host (the answers arrive on whatever thread the transport completes them on).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "agent/coordinator/call_batch.h"

namespace hvd::agent::coordinator {

// Calls start(i, done) for each i in [0, n); each start sends one request whose answer must
// reach done(result) exactly once, on any thread, possibly before start returns (every
// NodeAgent call has its own deadline, so it always does). Returns the n results, in index
// order, once all have answered. The requests are one held round of `batch` (when given),
// flushed before the wait.
template <typename Result, typename Start>
std::vector<Result> fanOut(size_t n, Start start, CallBatch* batch = nullptr) {
  struct State {
    std::mutex mutex;
    std::condition_variable answered;
    std::vector<Result> results;
    size_t pending = 0;
  };
  // Shared with every callback: an answer that lands as the wait ends still has its slot.
  auto state = std::make_shared<State>();
  state->results.resize(n);
  state->pending = n;
  HeldRound round(batch);
  for (size_t i = 0; i < n; ++i) {
    start(i, std::function<void(Result)>([state, i](Result result) {
            std::lock_guard<std::mutex> lock(state->mutex);
            state->results[i] = std::move(result);
            if (--state->pending == 0) state->answered.notify_all();
          }));
  }
  round.flush();
  std::unique_lock<std::mutex> lock(state->mutex);
  state->answered.wait(lock, [&] { return state->pending == 0; });
  return std::move(state->results);
}

}  // namespace hvd::agent::coordinator
