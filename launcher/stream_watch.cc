#include "launcher/stream_watch.h"

namespace hvd::launcher {

StreamWatch::StreamWatch(grpc::ClientContext* context, std::chrono::milliseconds limit)
    : context_(context), limit_(limit), thread_([this] { watch(); }) {}

StreamWatch::~StreamWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StreamWatch::waiting() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_ = true;
    since_ = std::chrono::steady_clock::now();
  }
  changed_.notify_all();
}

void StreamWatch::received() {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_ = false;
}

bool StreamWatch::expired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return expired_;
}

void StreamWatch::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!done_ && !expired_) {
    if (!waiting_) {
      changed_.wait(lock);
      continue;
    }
    const auto due = since_ + limit_;
    if (std::chrono::steady_clock::now() < due) {
      // Woken early by a new wait (since_ moved) or by the end; either way look again.
      changed_.wait_until(lock, due);
      continue;
    }
    expired_ = true;
    lock.unlock();
    context_->TryCancel();  // Read() returns false, Finish() says CANCELLED
    return;
  }
}

}  // namespace hvd::launcher
