#include "transport/member_links.h"

#include "hvd/error.hpp"

namespace hvd::transport {

MemberLinks::MemberLinks(std::unique_ptr<LinkSource> channel, std::vector<int> members, int jobSize)
    : channel_(std::move(channel)), members_(std::move(members)), jobSize_(jobSize) {}

void MemberLinks::open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
                       std::chrono::milliseconds timeout, const char* what) {
  std::vector<int> jobPeers;
  jobPeers.reserve(peers.size());
  for (int p : peers) {
    if (p < 0 || p >= static_cast<int>(members_.size())) {
      throw InternalError(std::string(what) + ": process set member " + std::to_string(p) +
                          " out of range");
    }
    jobPeers.push_back(members_[p]);
  }
  // The channel fills its links by job rank: a vector of the job's size, per batch (a batch is
  // rare: at init, then once per peer first used beyond the full mesh).
  std::vector<std::unique_ptr<Link>> byJobRank(jobSize_);
  channel_->open(jobPeers, byJobRank, timeout, what);
  for (size_t i = 0; i < peers.size(); ++i) links[peers[i]] = std::move(byJobRank[jobPeers[i]]);
}

}  // namespace hvd::transport
