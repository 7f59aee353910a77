// A job formed by some of the launched ranks: Horovod's hvd.init(comm=[ranks]), which builds its
// communicator from those ranks of MPI_COMM_WORLD, in the list's order. Here the launcher's
// placement plays MPI_COMM_WORLD: rank i of the new job is launched rank members[i], its size is
// the list's length, and every query, collective and process set counts the members alone.
//
// Only the members take part, each giving the same list; a launched rank outside it is simply
// not in that job (it may form a job of its own with another list, side by side: each list has
// its own store namespace). The members' local and cross placement come from their hosts at
// rendezvous (each rank's host key, as under mpirun), since which launched ranks share a host
// with which is not something one rank's environment says.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace hvd::core {

// Makes `config` (a launched rank's, as parsed from its environment) the configuration of its
// place in the job of `members`. An empty list, or every launched rank in launch order, leaves
// it as it is. Throws InvalidArgumentError, before anything connects, naming what is wrong: a
// rank outside the launched job or listed twice, this rank not in the list, and the modes whose
// rendezvous takes every launched rank (elastic mode, MPI's rendezvous and HVD_CPU_BACKEND=mpi).
void restrictToMembers(Config& config, const std::vector<int>& members);

// The store namespace of a restricted job ("m<digest of the list>/"), "" for the whole job.
std::string membersNamespace(const std::vector<int>& members);

struct HostPlacement {
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  int crossSize = 1;
};

// The local and cross placement of `rank` given every rank's host key: local ranks in rank
// order within a host, nodes numbered by their lowest rank (as hvdrun numbers hosts).
HostPlacement placementFromHostKeys(const std::vector<std::string>& hostKeys, int rank);

}  // namespace hvd::core
