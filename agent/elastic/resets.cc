#include "agent/elastic/resets.h"

#include "contract/elastic.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {

ResetCounter::ResetCounter(std::optional<int> limit) : limit_(limit) {
  if (limit_ && *limit_ < 0) {
    throw InvalidArgumentError("--reset-limit " + std::to_string(*limit_) +
                               ": expected a count of 0 or more");
  }
}

std::string ResetCounter::message() const {
  return limit_ ? contract::resetLimitMessage(*limit_) : std::string();
}

}  // namespace hvd::agent::elastic
