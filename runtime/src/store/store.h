// The rendezvous store: a small key-value service through which the ranks of one job find each
// other (data-plane addresses, host identities, later NCCL unique ids).
//
// Contract, shared by every implementation (memory, file, TCP):
//  * Keys are strings, values are byte strings. A key once set may be overwritten by `set`.
//  * `get` and `wait` block until the keys exist or the timeout passes; a timeout throws
//    hvd::TimeoutError whose message names the keys still missing and how many of the waited-for
//    keys had arrived ("2 of 4 keys present; missing: addr/1, addr/3").
//  * `getMany` is `get` of several keys in one request: it blocks until every key exists and
//    returns their values in the order of `keys` (a rendezvous fetches the records it needs
//    at once instead of one round trip per key).
//  * `add` treats the value as a signed 64-bit decimal counter (absent = 0) and returns the
//    new value atomically across all clients.
//  * `compareSet` sets `key` to `desired` only if its current value equals `expected`
//    (an empty `expected` also matches an absent key) and returns the value now stored.
//  * Every implementation is safe to call from several threads at once.
//  * Keys are namespaced by job by the implementation (the TCP store by the token's job);
//    callers use plain names such as "addr/3".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hvd::store {

using Bytes = std::string;  // values are arbitrary bytes; std::string is a convenient owner
using Timeout = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key, Timeout timeout) = 0;
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  virtual void wait(const std::vector<std::string>& keys, Timeout timeout) = 0;
  // Every key's value once all exist. The default waits, then gets each key: right for the
  // stores that live in this process or on a shared file system; the TCP store sends one
  // request.
  virtual std::vector<Bytes> getMany(const std::vector<std::string>& keys, Timeout timeout);
  // Non-blocking existence check.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual void erase(const std::string& key) = 0;
};

// Builds the standard timeout message: "timed out after 30000 ms waiting for keys: 2 of 4
// present; missing: addr/1, addr/3" (at most the first 16 missing keys are listed).
std::string timeoutMessage(const std::vector<std::string>& keys,
                           const std::vector<std::string>& missing, Timeout timeout);

// The steady-clock instant `timeout` from now, saturated so that a huge timeout (for example
// Timeout::max() meaning "wait forever") cannot overflow the clock's representation.
std::chrono::steady_clock::time_point deadlineAfter(Timeout timeout);

// The arithmetic of `add`, shared by every implementation: parses `current` (nullptr = absent
// = 0) as a signed 64-bit decimal and returns it plus `delta`; throws hvd::InvalidArgumentError
// naming `key` when the value is not such a number or the sum would overflow.
int64_t addToCounter(const std::string& key, const Bytes* current, int64_t delta);

}  // namespace hvd::store
