// A worker's life through the rounds of an elastic job (contract/elastic.h), kept by the process
// across hvd::shutdown() and hvd::init(): which round it joins next, under which token and at
// which place.
//
// The first init joins the round the worker was started for, at the place its environment
// gives. Every later init first tells the leader, in the namespace of the round joined last,
// that this worker is ready for the next round, then waits (up to HVD_ELASTIC_TIMEOUT) for the
// leader's assignment there: a place in a later round, or the news that it was removed. A failed
// init does not repeat a round: the next init asks again, and the leader, seeing the round's
// workers ready again, forms another.
//
// The session has a store connection of its own, to the round joined last: it outlives the
// Runtime of each round, and a round of one rank has no Runtime store at all.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "contract/elastic.h"
#include "core/config.h"
#include "store/store.h"

namespace hvd::core {

class ElasticSession {
 public:
  // `first`: the configuration of the worker's first init (HVD_ELASTIC set).
  explicit ElasticSession(const Config& first);
  ~ElasticSession();

  // The configuration of the next init: `fromEnvironment` (this init's parsed environment and
  // arguments) at this worker's place in the round it joins now. Throws hvd::InvalidArgumentError
  // when the leader removed the worker (removed() is true from then on), hvd::TimeoutError when
  // no assignment came within HVD_ELASTIC_TIMEOUT, what the store throws when it is gone.
  Config next(Config fromEnvironment);

  // The round handed out last (the one joined, or being joined).
  int round() const;
  // The leader's notice in that round, when it announced a later one (one store round trip).
  std::optional<contract::ElasticNotice> pending();
  bool removed() const;

 private:
  // The connection to the current round's namespace, made on first use.
  store::Store& store();

  mutable std::mutex mutex_;
  Config current_;       // the round's store address, token and the place handed out last
  bool joined_ = false;  // next() handed out current_'s place already
  bool removed_ = false;
  std::unique_ptr<store::Store> store_;
};

// The store namespace of a configuration: the job's id, or its round's in elastic mode.
std::string storeJobOf(const Config& config);

}  // namespace hvd::core
