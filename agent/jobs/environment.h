// The environment of the processes hvdagent starts (explicit env). A rank's environment is the
// agent's own base environment, overlaid by the job's entries (the worker contract from
// node::buildWorkerEnvironment plus what the user forwarded with -x): the job wins. The base is the
// agent's environment at start-up minus what must never leak into a job: another launcher's rank
// variables (HVD_*, HOROVOD_*, OMPI_*, PMI*, SLURM_*: a worker that sees a stale SLURM_PROCID would
// take the wrong rank), and anything that looks like a secret of the agent's own (tokens,
// passwords, keys, its ssh-agent or systemd sockets).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hvd::agent::jobs {

// True for names the base environment drops (see above). Case-sensitive prefixes; the secret
// check is case-insensitive ("github_token" is a secret too).
bool isExcludedFromBase(std::string_view name);

// `environ`-style entries ("K=V"; null-terminated array) minus excluded names and malformed
// entries (no '=' or an empty name), in order.
std::vector<std::string> baseEnvironment(char** envp);

// `base` with `overlay` applied: a name in both keeps its position in `base` and takes the
// overlay's value; overlay names not in `base` follow in overlay order. A name given twice in
// the overlay keeps its last value. Throws hvd::InvalidArgumentError naming the entry (not its
// value) when an overlay entry has no '=' or an empty name.
std::vector<std::string> mergeEnvironment(const std::vector<std::string>& base,
                                          const std::vector<std::string>& overlay);

}  // namespace hvd::agent::jobs
