// A deadline for each wait on a server stream, not for the stream: `hvdrun logs` of a log of
// any size, read through a pipe as slowly as its reader likes, must finish, while an agent that
// stops answering is still reported within the timeout. gRPC's deadlines bound a whole call, so
// the watch times each Read() itself: a wait for the next message (connecting included) longer
// than `limit` cancels the call, and expired() tells the caller why it ended. Time spent between
// reads (writing the lines out to a paused pipe) is never counted.
#pragma once

#include <grpcpp/client_context.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace hvd::launcher {

class StreamWatch {
 public:
  StreamWatch(grpc::ClientContext* context, std::chrono::milliseconds limit);
  ~StreamWatch();
  StreamWatch(const StreamWatch&) = delete;
  StreamWatch& operator=(const StreamWatch&) = delete;

  // Around each Read(): the wait in between is what `limit` bounds.
  void waiting();
  void received();
  // True when a wait passed `limit` and the call was cancelled for it.
  bool expired() const;

 private:
  void watch();

  grpc::ClientContext* context_;
  const std::chrono::milliseconds limit_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool waiting_ = false;
  std::chrono::steady_clock::time_point since_;
  bool expired_ = false;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace hvd::launcher
