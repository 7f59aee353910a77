#include "agent/coordinator/rank_environments.h"

#include "hvd/error.hpp"

namespace hvd::agent::coordinator {

void buildRankEnvironments(LaunchRequest* request) {
  for (RankLaunch& rank : request->ranks) {
    if (!rank.placement) continue;
    if (!request->environment) {
      throw InvalidArgumentError("rank " + std::to_string(rank.rank) + " of job " + request->jobId +
                                 " has a placement but the launch has no environment template");
    }
    node::WorkerEnvInput input = *request->environment;
    input.placement = *rank.placement;
    rank.spec.env = node::buildWorkerEnvironment(input);
  }
}

}  // namespace hvd::agent::coordinator
