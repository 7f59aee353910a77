// Cross-rank agreement of one named op: before an op runs, every rank's request for its name
// must agree on op type, data type, shape, reduce op, root, scale factors, compression, device
// and grouping. A disagreement becomes an error on every rank whose message names the op, the
// tensor, the field and the ranks, grouping ranks by value (the smallest groups first: the odd
// ones out), e.g.
//   allreduce 'fc1.weight': shape [17,18] on rank 1, [17,17] on ranks 0,2
//   'x': broadcast on rank 2, allreduce on ranks 0,1
// Pure logic: every rank computes the same message from its replicated table.
#pragma once

#include <string>
#include <vector>

#include "engine/request.h"

namespace hvd::engine {

// perRank[r] is rank r's request, or null where rank r takes no part (it has joined).
// Returns "" when the requests agree, else the error message. `jobRanks`: the job rank the
// message names for each r (a process set's members); empty: r itself.
std::string checkAgreement(const std::vector<const Request*>& perRank,
                           const std::vector<int>& jobRanks = {});

// "rank 1" / "ranks 0,2".
std::string describeRanks(const std::vector<int>& ranks);

}  // namespace hvd::engine
