#include "core/elastic_session.h"

#include <utility>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/tcp_store_client.h"

namespace hvd::core {

std::string storeJobOf(const Config& config) {
  return config.elastic ? contract::elasticStoreJob(config.jobId, config.elasticRound)
                        : config.jobId;
}

ElasticSession::ElasticSession(const Config& first) : current_(first) {
  if (current_.storeAddress.empty()) {
    throw InvalidArgumentError(
        "HVD_ELASTIC=1 needs the job's TCP store (HVD_STORE_ADDR and HVD_STORE_TOKEN): the "
        "leader hands out each round's places there; start elastic jobs with hvdrun --min-np "
        "or --host-discovery-script");
  }
}

ElasticSession::~ElasticSession() = default;

int ElasticSession::round() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_.elasticRound;
}

bool ElasticSession::removed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return removed_;
}

store::Store& ElasticSession::store() {
  if (!store_) {
    store_ = std::make_unique<store::TcpStore>(current_.storeAddress, storeJobOf(current_),
                                               current_.storeToken, current_.startTimeout);
  }
  return *store_;
}

Config ElasticSession::next(Config config) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_) {
    throw InvalidArgumentError("this worker was removed from the elastic job in round " +
                               std::to_string(current_.elasticRound));
  }
  if (joined_) {
    // Ready for the next round: the leader answers once every worker of this round is ready or
    // gone (or it gives up on them after its own timeout).
    auto log = logging::get("init");
    const int worker = current_.workerId;
    log->info("elastic: worker {} ready after round {}; waiting for its next place", worker,
              current_.elasticRound);
    store().set(contract::readyKey(worker), "reset");
    store().add(contract::kReadyCountKey, 1);
    const std::string text = store().get(contract::assignKey(worker), current_.elasticTimeout);
    const contract::ElasticAssignment a = contract::parseAssignment(text);
    if (a.removed) {
      removed_ = true;
      throw InvalidArgumentError("this worker was removed from the elastic job after round " +
                                 std::to_string(current_.elasticRound) + ": " + a.reason);
    }
    if (a.round <= current_.elasticRound) {
      throw InternalError("elastic: the leader assigned round " + std::to_string(a.round) +
                          " after round " + std::to_string(current_.elasticRound));
    }
    current_.elasticRound = a.round;
    current_.storeToken = a.token;
    current_.rank = a.rank;
    current_.size = a.size;
    current_.localRank = a.localRank;
    current_.localSize = a.localSize;
    current_.crossRank = a.crossRank;
    current_.crossSize = a.crossSize;
    store_.reset();  // the next round's namespace, with its token, on first use
    log->info("elastic: worker {} is rank {} of {} in round {}", worker, a.rank, a.size, a.round);
  }
  joined_ = true;
  config.elastic = true;
  config.elasticRound = current_.elasticRound;
  config.workerId = current_.workerId;
  config.storeAddress = current_.storeAddress;
  config.storeToken = current_.storeToken;
  config.rank = current_.rank;
  config.size = current_.size;
  config.localRank = current_.localRank;
  config.localSize = current_.localSize;
  config.crossRank = current_.crossRank;
  config.crossSize = current_.crossSize;
  config.crossFromRendezvous = false;
  return config;
}

std::optional<contract::ElasticNotice> ElasticSession::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_) return std::nullopt;
  store::Store& s = store();
  if (!s.check({contract::kNoticeKey})) return std::nullopt;
  const std::optional<contract::ElasticNotice> notice =
      contract::parseNotice(s.get(contract::kNoticeKey, std::chrono::milliseconds(5000)));
  if (!notice || notice->round <= current_.elasticRound) return std::nullopt;
  return notice;
}

}  // namespace hvd::core
