// The links of a process set's context: its ranks are the members' indexes (0..members-1), its
// links are a channel of the job's mesh between members only. Members are job ranks, so each
// link still names its peer by job rank in every message ("rank 3 ... lost"), and the mesh's
// rule that the higher job rank connects holds unchanged.
#pragma once

#include <memory>
#include <vector>

#include "transport/link_source.h"

namespace hvd::transport {

class MemberLinks final : public LinkSource {
 public:
  // `channel`: the set's channel of the mesh (indexed by job rank, `jobSize` ranks);
  // `members`: ascending job ranks.
  MemberLinks(std::unique_ptr<LinkSource> channel, std::vector<int> members, int jobSize);

  // The job's kinds: every member reaches the same answer, as every rank of the job does.
  LinkKinds kinds() const override { return channel_->kinds(); }
  // `peers` and `links` by member index.
  void open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
            std::chrono::milliseconds timeout, const char* what) override;

 private:
  std::unique_ptr<LinkSource> channel_;
  std::vector<int> members_;
  int jobSize_;
};

}  // namespace hvd::transport
