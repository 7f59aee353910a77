#include "engine/in_flight_names.h"

namespace hvd::engine {

const std::string* InFlightNames::take(const std::vector<const std::string*>& names) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names_.count(*names[i]) > 0) return names[i];
    for (size_t j = 0; j < i; ++j) {
      if (*names[j] == *names[i]) return names[i];
    }
  }
  for (const std::string* name : names) names_.insert(*name);
  return nullptr;
}

void InFlightNames::giveBack(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& name : names) names_.erase(name);
}

void NameLease::release() {
  std::shared_ptr<InFlightNames> owner;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    owner = std::move(owner_);
    owner_.reset();
  }
  if (owner) owner->giveBack(names_);
}

}  // namespace hvd::engine
