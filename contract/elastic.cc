#include "contract/elastic.h"

#include <sstream>
#include <string>

#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

int parseInt(const std::string& key, const std::string& value) {
  size_t used = 0;
  int parsed = 0;
  try {
    parsed = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    throw InvalidArgumentError("elastic assignment: '" + key + "' is not a whole number: '" +
                               value + "'");
  }
  return parsed;
}

}  // namespace

std::string elasticStoreJob(const std::string& jobId, int round) {
  return jobId + "/round-" + std::to_string(round);
}

std::string readyKey(int worker) { return "elastic/ready/" + std::to_string(worker); }
std::string assignKey(int worker) { return "elastic/assign/" + std::to_string(worker); }

std::string formatNotice(const ElasticNotice& notice) {
  return std::to_string(notice.round) + " " + std::to_string(static_cast<int>(notice.change));
}

std::optional<ElasticNotice> parseNotice(const std::string& text) {
  std::istringstream in(text);
  ElasticNotice notice;
  int change = 0;
  if (!(in >> notice.round >> change) || change < 0 || change > 3 || notice.round < 1) {
    return std::nullopt;
  }
  notice.change = static_cast<HostChange>(change);
  return notice;
}

std::string formatAssignment(const ElasticAssignment& a) {
  std::string out = "round=" + std::to_string(a.round) + "\n";
  if (a.removed) return out + "removed=" + a.reason + "\n";
  out += "token=" + a.token + "\n";
  out += "rank=" + std::to_string(a.rank) + "\nsize=" + std::to_string(a.size) + "\n";
  out += "local_rank=" + std::to_string(a.localRank) +
         "\nlocal_size=" + std::to_string(a.localSize) + "\n";
  out += "cross_rank=" + std::to_string(a.crossRank) +
         "\ncross_size=" + std::to_string(a.crossSize) + "\n";
  out += "host=" + a.host + "\n";
  return out;
}

ElasticAssignment parseAssignment(const std::string& text) {
  ElasticAssignment a;
  bool haveRound = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      throw InvalidArgumentError("elastic assignment: line '" + line + "' has no '='");
    }
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "round") {
      a.round = parseInt(key, value);
      haveRound = true;
    } else if (key == "removed") {
      a.removed = true;
      a.reason = value;
    } else if (key == "token") {
      a.token = value;
    } else if (key == "rank") {
      a.rank = parseInt(key, value);
    } else if (key == "size") {
      a.size = parseInt(key, value);
    } else if (key == "local_rank") {
      a.localRank = parseInt(key, value);
    } else if (key == "local_size") {
      a.localSize = parseInt(key, value);
    } else if (key == "cross_rank") {
      a.crossRank = parseInt(key, value);
    } else if (key == "cross_size") {
      a.crossSize = parseInt(key, value);
    } else if (key == "host") {
      a.host = value;
    } else {
      throw InvalidArgumentError("elastic assignment: unknown key '" + key + "'");
    }
  }
  if (!haveRound) throw InvalidArgumentError("elastic assignment: no round in '" + text + "'");
  if (!a.removed && (a.size < 1 || a.rank < 0 || a.rank >= a.size || a.token.empty())) {
    throw InvalidArgumentError("elastic assignment: rank " + std::to_string(a.rank) + " of " +
                               std::to_string(a.size) + " (token " +
                               (a.token.empty() ? "missing" : "given") + ") is not a place");
  }
  return a;
}

std::string resetLimitMessage(int limit) {
  return "Horovod was shutdown because number of resets during elastic job exceeded limit: " +
         std::to_string(limit);
}

}  // namespace hvd::contract
