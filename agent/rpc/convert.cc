#include "agent/rpc/convert.h"

#include <algorithm>
#include <csignal>
#include <set>

#include "agent/node/node_facts.h"
#include "hvd/error.hpp"

namespace hvd::agent::rpc {

v1::DescribeResponse toProto(const coordinator::NodeDescription& node) {
  v1::DescribeResponse r;
  r.set_hostname(node.hostname);
  for (const std::string& a : node.addresses) r.add_addresses(a);
  r.set_cpus(node.cpus);
  for (const node::GpuInfo& g : node.gpus) {
    v1::Gpu* gpu = r.add_gpus();
    gpu->set_index(g.index);
    gpu->set_uuid(g.uuid);
    gpu->set_name(g.name);
    gpu->set_memory_bytes(g.memoryBytes);
    gpu->set_pci_bus_id(g.pciBusId);
  }
  r.set_version(node.version);
  return r;
}

coordinator::NodeDescription fromProto(const v1::DescribeResponse& r) {
  coordinator::NodeDescription node;
  node.hostname = r.hostname();
  node.addresses.assign(r.addresses().begin(), r.addresses().end());
  node.cpus = r.cpus();
  for (const v1::Gpu& g : r.gpus()) {
    node::GpuInfo gpu;
    gpu.index = g.index();
    gpu.uuid = g.uuid();
    gpu.name = g.name();
    gpu.memoryBytes = g.memory_bytes();
    gpu.pciBusId = g.pci_bus_id();
    node.gpus.push_back(gpu);
  }
  node.version = r.version();
  return node;
}

v1::OutputStream toProto(process::Stream stream) {
  return stream == process::Stream::kStderr ? v1::STDERR : v1::STDOUT;
}

process::Stream fromProto(v1::OutputStream stream) {
  return stream == v1::STDERR ? process::Stream::kStderr : process::Stream::kStdout;
}

v1::RankPlacement toProto(const contract::RankPlacement& p) {
  v1::RankPlacement r;
  r.set_host_index(p.hostIndex);
  r.set_local_rank(p.localRank);
  r.set_local_size(p.localSize);
  r.set_cross_rank(p.crossRank);
  r.set_cross_size(p.crossSize);
  return r;
}

contract::RankPlacement fromProto(const v1::RankPlacement& r, int rank) {
  contract::RankPlacement p;
  p.rank = rank;
  p.hostIndex = r.host_index();
  p.localRank = r.local_rank();
  p.localSize = r.local_size();
  p.crossRank = r.cross_rank();
  p.crossSize = r.cross_size();
  return p;
}

v1::WorkerEnvironment toProto(const node::WorkerEnvInput& in) {
  v1::WorkerEnvironment r;
  for (const std::string& e : in.forwarded) r.add_forwarded(e);
  r.set_size(in.size);
  r.set_group_rank(in.groupRank);
  r.set_host_name(in.hostName);
  r.set_job_id(in.jobId);
  r.set_store_addr(in.storeAddr);
  r.set_store_token(in.storeToken);
  r.set_master_addr(in.masterAddr);
  r.set_master_port(in.masterPort);
  for (int g : in.hostGpus) r.add_host_gpus(g);
  r.set_gpus_per_rank(in.gpusPerRank);
  r.set_gpu_bind_visible(in.gpuBind == node::GpuBind::kVisible);
  r.set_oversubscribe(in.oversubscribe);
  r.set_restart_count(in.restartCount);
  r.set_max_restarts(in.maxRestarts);
  return r;
}

node::WorkerEnvInput fromProto(const v1::WorkerEnvironment& r) {
  node::WorkerEnvInput in;
  in.forwarded.assign(r.forwarded().begin(), r.forwarded().end());
  in.size = r.size();
  in.groupRank = r.group_rank();
  in.hostName = r.host_name();
  in.jobId = r.job_id();
  in.storeAddr = r.store_addr();
  in.storeToken = r.store_token();
  in.masterAddr = r.master_addr();
  in.masterPort = r.master_port();
  in.hostGpus.assign(r.host_gpus().begin(), r.host_gpus().end());
  in.gpusPerRank = r.gpus_per_rank();
  in.gpuBind = r.gpu_bind_visible() ? node::GpuBind::kVisible : node::GpuBind::kNone;
  in.oversubscribe = r.oversubscribe();
  in.restartCount = r.restart_count();
  in.maxRestarts = r.max_restarts();
  return in;
}

v1::LaunchRequest toProto(const coordinator::LaunchRequest& request) {
  v1::LaunchRequest r;
  r.set_job_id(request.jobId);
  r.set_stop_signal(request.stopSignal);
  r.set_grace_ms(request.grace.count());
  r.set_reserved(request.reserved);
  r.set_drainable(request.drainable);
  // The template: the entries every rank has (by exact "K=V"), and the command when every rank
  // runs the same one. Each rank keeps the rest of its entries, in its own order.
  std::set<std::string> common;
  bool sameCommand = !request.ranks.empty();
  if (!request.ranks.empty()) {
    const process::SpawnSpec& first = request.ranks.front().spec;
    common.insert(first.env.begin(), first.env.end());
    for (const coordinator::RankLaunch& rank : request.ranks) {
      const std::set<std::string> mine(rank.spec.env.begin(), rank.spec.env.end());
      for (auto it = common.begin(); it != common.end();) {
        it = mine.count(*it) != 0 ? std::next(it) : common.erase(it);
      }
      sameCommand = sameCommand && rank.spec.argv == first.argv && rank.spec.cwd == first.cwd;
    }
    // Kept in the first rank's order, so a merge gives back each rank's entries as they were.
    for (const std::string& e : first.env) {
      if (common.count(e) != 0) r.add_common_env(e);
    }
    if (sameCommand) {
      for (const std::string& a : first.argv) r.add_common_argv(a);
      r.set_common_cwd(first.cwd);
    }
  }
  if (request.environment) *r.mutable_environment() = toProto(*request.environment);
  for (const coordinator::RankLaunch& rank : request.ranks) {
    v1::RankSpec* spec = r.add_ranks();
    spec->set_rank(rank.rank);
    if (rank.placement) *spec->mutable_placement() = toProto(*rank.placement);
    for (const std::string& e : rank.spec.env) {
      if (common.count(e) == 0) spec->add_env(e);
    }
    if (!sameCommand) {
      for (const std::string& a : rank.spec.argv) spec->add_argv(a);
      spec->set_cwd(rank.spec.cwd);
    }
  }
  return r;
}

coordinator::LaunchRequest fromProto(const v1::LaunchRequest& r) {
  coordinator::LaunchRequest request;
  request.jobId = r.job_id();
  if (r.stop_signal() > 0 && r.stop_signal() < NSIG) request.stopSignal = r.stop_signal();
  if (r.grace_ms() >= 0) request.grace = std::chrono::milliseconds(r.grace_ms());
  request.reserved = r.reserved();
  request.drainable = r.drainable();
  for (const v1::RankSpec& spec : r.ranks()) {
    coordinator::RankLaunch rank;
    rank.rank = spec.rank();
    if (spec.argv_size() > 0) {
      rank.spec.argv.assign(spec.argv().begin(), spec.argv().end());
    } else {
      rank.spec.argv.assign(r.common_argv().begin(), r.common_argv().end());
    }
    rank.spec.env.assign(r.common_env().begin(), r.common_env().end());
    rank.spec.env.insert(rank.spec.env.end(), spec.env().begin(), spec.env().end());
    rank.spec.cwd = spec.argv_size() > 0 ? spec.cwd() : r.common_cwd();
    if (spec.has_placement()) rank.placement = fromProto(spec.placement(), spec.rank());
    request.ranks.push_back(std::move(rank));
  }
  if (r.has_environment()) request.environment = fromProto(r.environment());
  return request;
}

v1::Relay toProto(const std::vector<relay::Target>& hosts, int width,
                  std::chrono::milliseconds callTimeout) {
  v1::Relay r;
  for (const relay::Target& t : hosts) {
    v1::HostEntry* entry = r.add_hosts();
    entry->set_host(t.host);
    entry->set_agent_address(t.address);
  }
  r.set_width(width);
  r.set_call_timeout_ms(callTimeout.count());
  return r;
}

std::vector<relay::Target> fromProto(const v1::Relay& relay) {
  std::vector<relay::Target> hosts;
  for (const v1::HostEntry& entry : relay.hosts()) {
    if (entry.host().empty() || entry.agent_address().empty()) {
      throw InvalidArgumentError("a relayed host needs a name and its agent's address");
    }
    hosts.push_back({entry.host(), entry.agent_address()});
  }
  if (!hosts.empty() && relay.width() < 1) {
    throw InvalidArgumentError("a relayed call needs a tree width of at least 1");
  }
  if (relay.call_timeout_ms() < 0) throw InvalidArgumentError("negative relay call timeout");
  return hosts;
}

v1::AgentFailure toProto(const coordinator::AgentError& error) {
  v1::AgentFailure f;
  f.set_host(error.host);
  f.set_address(error.address);
  f.set_reason(error.reason);
  f.set_authentication_failed(error.authenticationFailed);
  return f;
}

coordinator::AgentError fromProto(const v1::AgentFailure& f) {
  coordinator::AgentError error;
  error.host = f.host();
  error.address = f.address();
  error.reason = f.reason();
  error.authenticationFailed = f.authentication_failed();
  return error;
}

v1::LaunchResult toProto(const coordinator::LaunchStatus& status) {
  v1::LaunchResult r;
  r.set_error(status.error);
  for (const auto& [rank, pid] : status.pids) {
    v1::RankPid* p = r.add_pids();
    p->set_rank(rank);
    p->set_pid(pid);
  }
  return r;
}

coordinator::LaunchStatus fromProto(const v1::LaunchResult& r) {
  coordinator::LaunchStatus status;
  status.error = r.error();
  for (const v1::RankPid& p : r.pids()) status.pids.emplace_back(p.rank(), p.pid());
  return status;
}

v1::JobOutcome toProto(coordinator::JobOutcome o) {
  switch (o) {
    case coordinator::JobOutcome::kSucceeded:
      return v1::SUCCEEDED;
    case coordinator::JobOutcome::kRankFailed:
      return v1::RANK_FAILED;
    case coordinator::JobOutcome::kAgentLost:
      return v1::AGENT_LOST;
    case coordinator::JobOutcome::kAgentUnreachable:
      return v1::AGENT_UNREACHABLE;
    case coordinator::JobOutcome::kLaunchFailed:
      return v1::LAUNCH_FAILED;
    case coordinator::JobOutcome::kInvalidJob:
      return v1::INVALID_JOB;
    case coordinator::JobOutcome::kTimedOut:
      return v1::TIMED_OUT;
    case coordinator::JobOutcome::kCancelled:
      return v1::CANCELLED;
    case coordinator::JobOutcome::kResourcesBusy:
      return v1::RESOURCES_BUSY;
  }
  return v1::RANK_FAILED;
}

coordinator::JobOutcome fromProto(v1::JobOutcome o) {
  switch (o) {
    case v1::SUCCEEDED:
      return coordinator::JobOutcome::kSucceeded;
    case v1::RANK_FAILED:
      return coordinator::JobOutcome::kRankFailed;
    case v1::AGENT_LOST:
      return coordinator::JobOutcome::kAgentLost;
    case v1::AGENT_UNREACHABLE:
      return coordinator::JobOutcome::kAgentUnreachable;
    case v1::LAUNCH_FAILED:
      return coordinator::JobOutcome::kLaunchFailed;
    case v1::INVALID_JOB:
      return coordinator::JobOutcome::kInvalidJob;
    case v1::CANCELLED:
      return coordinator::JobOutcome::kCancelled;
    case v1::TIMED_OUT:
      return coordinator::JobOutcome::kTimedOut;
    case v1::RESOURCES_BUSY:
      return coordinator::JobOutcome::kResourcesBusy;
    default:
      return coordinator::JobOutcome::kRankFailed;
  }
}

v1::JobEnd toProto(const coordinator::JobResult& result) {
  v1::JobEnd e;
  e.set_job_id(result.jobId);
  e.set_outcome(toProto(result.outcome));
  e.set_exit_code(result.exitCode);
  e.set_summary(result.summary);
  e.set_rank(result.rank);
  e.set_host(result.host);
  e.set_has_status(result.status.has_value());
  if (result.status) {
    e.set_status_exit_code(result.status->exitCode);
    e.set_status_signal(result.status->signal);
  }
  e.set_reason(result.reason);
  for (const std::string& line : result.stderrTail) e.add_stderr_tail(line);
  for (int rank : result.unreportedRanks) e.add_unreported_ranks(rank);
  e.set_uptime_ms(result.uptime.count());
  return e;
}

coordinator::JobResult fromProto(const v1::JobEnd& e) {
  coordinator::JobResult result;
  result.jobId = e.job_id();
  result.outcome = fromProto(e.outcome());
  result.exitCode = e.exit_code();
  result.summary = e.summary();
  result.rank = e.rank();
  result.host = e.host();
  if (e.has_status()) {
    process::ExitStatus status;
    status.exitCode = e.status_exit_code();
    status.signal = e.status_signal();
    result.status = status;
  }
  result.reason = e.reason();
  result.stderrTail.assign(e.stderr_tail().begin(), e.stderr_tail().end());
  result.unreportedRanks.assign(e.unreported_ranks().begin(), e.unreported_ranks().end());
  result.uptime = std::chrono::milliseconds(e.uptime_ms());
  return result;
}

v1::SubmitJobRequest toProto(const coordinator::JobSpec& spec,
                             const std::vector<std::string>& agentAddresses) {
  v1::SubmitJobRequest r;
  for (const std::string& a : spec.argv) r.add_argv(a);
  for (const std::string& e : spec.env) r.add_env(e);
  r.set_cwd(spec.cwd);
  r.set_np(spec.np);
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    v1::HostEntry* h = r.add_hosts();
    h->set_host(spec.hosts[i].host);
    h->set_slots(spec.hosts[i].slots.value_or(0));
    if (i < agentAddresses.size()) {
      h->set_agent_address(agentAddresses[i]);
    } else if (const auto it = spec.agentAddresses.find(spec.hosts[i].host);
               it != spec.agentAddresses.end()) {
      h->set_agent_address(it->second);
    }
  }
  r.set_oversubscribe(spec.oversubscribe);
  r.set_gpu_bind(spec.gpuBind == node::GpuBind::kVisible ? v1::GPU_BIND_VISIBLE
                                                         : v1::GPU_BIND_NONE);
  r.set_stop_signal(spec.stopSignal);
  r.set_grace_ms(spec.grace.count());
  r.set_job_name(spec.name.empty() ? spec.jobId : spec.name);
  r.set_detach(spec.detach);
  r.set_tree_width(spec.treeWidth);
  r.set_connect_timeout_ms(spec.connectTimeout.count());
  r.set_gpus_per_rank(spec.gpusPerRank);
  r.set_time_limit_ms(spec.timeLimit.count());
  r.set_max_restarts(spec.restart.maxRestarts);
  r.set_restart_min_uptime_ms(spec.restart.minUptime.count());
  for (int code : spec.restart.noRestartOnExit) r.add_no_restart_on_exit(code);
  r.set_no_queue(!spec.queue);
  if (spec.elastic.enabled) {
    const coordinator::ElasticSpec& e = spec.elastic;
    v1::ElasticOptions* o = r.mutable_elastic();
    o->set_min_np(e.minNp);
    o->set_max_np(e.maxNp);
    o->set_discovery_script(e.discoveryScript);
    o->set_slots_per_host(e.slotsPerHost);
    o->set_discovery_interval_ms(e.discoveryInterval.count());
    o->set_timeout_ms(e.timeout.count());
    o->set_has_reset_limit(e.resetLimit.has_value());
    o->set_reset_limit(e.resetLimit.value_or(0));
    o->set_has_cooldown(e.cooldownSeconds.has_value());
    if (e.cooldownSeconds) {
      o->set_cooldown_min_seconds(e.cooldownSeconds->first);
      o->set_cooldown_max_seconds(e.cooldownSeconds->second);
    }
    o->set_agent_port(e.agentPort);
  }
  return r;
}

namespace {

coordinator::ElasticSpec fromProto(const v1::ElasticOptions& o, int np) {
  coordinator::ElasticSpec e;
  e.enabled = true;
  if (o.min_np() < 1 || o.min_np() > np) {
    throw InvalidArgumentError("--min-np " + std::to_string(o.min_np()) + " is not in 1.." +
                               std::to_string(np) + " (-np)");
  }
  if (o.max_np() < 0 || (o.max_np() > 0 && o.max_np() < np)) {
    throw InvalidArgumentError("--max-np " + std::to_string(o.max_np()) + " is less than -np " +
                               std::to_string(np));
  }
  if (o.slots_per_host() < 0 || o.slots_per_host() > contract::kMaxSlotsPerHost) {
    throw InvalidArgumentError("--slots-per-host " + std::to_string(o.slots_per_host()) +
                               " is not in 0.." + std::to_string(contract::kMaxSlotsPerHost));
  }
  if (o.discovery_interval_ms() <= 0 || o.timeout_ms() <= 0) {
    throw InvalidArgumentError("the discovery interval and the elastic timeout must be positive");
  }
  if (o.has_reset_limit() && o.reset_limit() < 0) {
    throw InvalidArgumentError("--reset-limit must not be negative");
  }
  if (o.has_cooldown() &&
      (o.cooldown_min_seconds() < 0 || o.cooldown_max_seconds() < o.cooldown_min_seconds())) {
    throw InvalidArgumentError("--blacklist-cooldown-range needs 0 <= MIN <= MAX");
  }
  if (o.agent_port() < 0 || o.agent_port() > 65535) {
    throw InvalidArgumentError("agent port " + std::to_string(o.agent_port()) +
                               " is not in 0..65535");
  }
  e.minNp = o.min_np();
  e.maxNp = o.max_np();
  e.discoveryScript = o.discovery_script();
  e.slotsPerHost = o.slots_per_host();
  e.discoveryInterval = std::chrono::milliseconds(o.discovery_interval_ms());
  e.timeout = std::chrono::milliseconds(o.timeout_ms());
  if (o.has_reset_limit()) e.resetLimit = o.reset_limit();
  if (o.has_cooldown()) {
    e.cooldownSeconds = std::make_pair(o.cooldown_min_seconds(), o.cooldown_max_seconds());
  }
  e.agentPort = o.agent_port();
  return e;
}

}  // namespace

coordinator::JobSpec fromProto(const v1::SubmitJobRequest& r) {
  if (r.argv().empty() || r.argv(0).empty()) {
    throw InvalidArgumentError("the job has no program to run");
  }
  if (r.np() < 1)
    throw InvalidArgumentError("-np must be at least 1, got " + std::to_string(r.np()));
  if (r.hosts().empty()) throw InvalidArgumentError("the job lists no hosts");
  if (r.grace_ms() < 0) throw InvalidArgumentError("the grace period must not be negative");
  if (r.stop_signal() < 1 || r.stop_signal() >= NSIG) {
    throw InvalidArgumentError("stop signal " + std::to_string(r.stop_signal()) +
                               " is not a signal number");
  }
  coordinator::JobSpec spec;
  spec.argv.assign(r.argv().begin(), r.argv().end());
  spec.env.assign(r.env().begin(), r.env().end());
  spec.cwd = r.cwd();
  spec.np = r.np();
  for (const v1::HostEntry& h : r.hosts()) {
    if (h.host().empty()) throw InvalidArgumentError("the job lists a host with no name");
    if (h.slots() < 0 || h.slots() > contract::kMaxSlotsPerHost) {
      throw InvalidArgumentError("host '" + h.host() + "' has " + std::to_string(h.slots()) +
                                 " slots");
    }
    contract::HostSlots slots;
    slots.host = h.host();
    if (h.slots() > 0) slots.slots = h.slots();
    spec.hosts.push_back(slots);
    if (!h.agent_address().empty()) spec.agentAddresses[h.host()] = h.agent_address();
  }
  spec.treeWidth = r.tree_width();
  spec.connectTimeout = std::chrono::milliseconds(std::max<int64_t>(r.connect_timeout_ms(), 0));
  spec.name = r.job_name();
  spec.detach = r.detach();
  spec.oversubscribe = r.oversubscribe();
  spec.gpuBind =
      r.gpu_bind() == v1::GPU_BIND_VISIBLE ? node::GpuBind::kVisible : node::GpuBind::kNone;
  spec.stopSignal = r.stop_signal();
  spec.grace = std::chrono::milliseconds(r.grace_ms());
  if (r.gpus_per_rank() < 0 || r.gpus_per_rank() > 1024) {
    throw InvalidArgumentError(std::to_string(r.gpus_per_rank()) +
                               " GPUs per rank is not in 1..1024");
  }
  spec.gpusPerRank = r.gpus_per_rank() > 0 ? r.gpus_per_rank() : 1;
  if (r.time_limit_ms() < 0) throw InvalidArgumentError("the time limit must not be negative");
  spec.timeLimit = std::chrono::milliseconds(r.time_limit_ms());
  if (r.max_restarts() < 0 || r.max_restarts() > kMaxRestarts) {
    throw InvalidArgumentError("--max-restarts " + std::to_string(r.max_restarts()) +
                               " is not in 0.." + std::to_string(kMaxRestarts));
  }
  spec.restart.maxRestarts = r.max_restarts();
  if (r.restart_min_uptime_ms() < 0) {
    throw InvalidArgumentError("the minimum uptime must not be negative");
  }
  spec.restart.minUptime = std::chrono::milliseconds(r.restart_min_uptime_ms());
  for (int code : r.no_restart_on_exit()) {
    if (code < 0 || code > 255) {
      throw InvalidArgumentError("exit code " + std::to_string(code) + " is not in 0..255");
    }
    spec.restart.noRestartOnExit.push_back(code);
  }
  spec.queue = !r.no_queue();
  if (r.has_elastic()) spec.elastic = fromProto(r.elastic(), spec.np);
  return spec;
}

v1::ReserveRequest toProto(const ledger::Request& request) {
  v1::ReserveRequest r;
  r.set_job_id(request.key);
  r.set_job(request.job);
  r.set_ranks(request.ranks);
  r.set_gpus_per_rank(request.gpusPerRank);
  r.set_share(request.share);
  for (int g : request.preferredGpus) r.add_preferred_gpus(g);
  r.set_lease_ms(request.lease.count());
  return r;
}

ledger::Request fromProto(const v1::ReserveRequest& r) {
  if (r.job_id().empty()) throw InvalidArgumentError("the reservation names no job");
  if (r.ranks() < 1 || r.ranks() > contract::kMaxSlotsPerHost) {
    throw InvalidArgumentError("a reservation of " + std::to_string(r.ranks()) + " ranks");
  }
  if (r.lease_ms() < 0 || r.lease_ms() > kMaxLeaseMs) {
    throw InvalidArgumentError("a lease of " + std::to_string(r.lease_ms()) + " ms");
  }
  ledger::Request request;
  request.key = r.job_id();
  request.job = r.job().empty() ? r.job_id() : r.job();
  request.ranks = r.ranks();
  request.gpusPerRank = r.gpus_per_rank() > 0 ? r.gpus_per_rank() : 1;
  request.share = r.share();
  request.preferredGpus.assign(r.preferred_gpus().begin(), r.preferred_gpus().end());
  request.lease = std::chrono::milliseconds(r.lease_ms());
  return request;
}

v1::ReserveResponse toProto(const ledger::Grant& grant) {
  v1::ReserveResponse r;
  switch (grant.verdict) {
    case ledger::Verdict::kGranted:
      r.set_verdict(v1::RESERVE_GRANTED);
      break;
    case ledger::Verdict::kBusy:
      r.set_verdict(v1::RESERVE_BUSY);
      break;
    case ledger::Verdict::kNeverFits:
      r.set_verdict(v1::RESERVE_NEVER_FITS);
      break;
  }
  for (int g : grant.gpus) r.add_gpus(g);
  r.set_reason(grant.reason);
  return r;
}

ledger::Grant fromProto(const v1::ReserveResponse& r) {
  ledger::Grant grant;
  switch (r.verdict()) {
    case v1::RESERVE_BUSY:
      grant.verdict = ledger::Verdict::kBusy;
      break;
    case v1::RESERVE_NEVER_FITS:
      grant.verdict = ledger::Verdict::kNeverFits;
      break;
    default:
      grant.verdict = ledger::Verdict::kGranted;
  }
  grant.gpus.assign(r.gpus().begin(), r.gpus().end());
  grant.reason = r.reason();
  return grant;
}

v1::RankInfo toProto(const coordinator::RankSnapshot& rank) {
  v1::RankInfo out;
  out.set_rank(rank.rank);
  out.set_host(rank.host);
  out.set_pid(rank.pid);
  switch (rank.state) {
    case coordinator::RankState::kRunning:
      out.set_state(v1::RANK_RUNNING);
      break;
    case coordinator::RankState::kExited:
      out.set_state(v1::RANK_EXITED);
      break;
    case coordinator::RankState::kLost:
      out.set_state(v1::RANK_LOST);
      break;
    case coordinator::RankState::kNotStarted:
      out.set_state(v1::RANK_PENDING);
      break;
  }
  if (rank.exit) {
    out.set_exit_code(rank.exit->exitCode);
    out.set_signal(rank.exit->signal);
  }
  return out;
}

v1::HostResources toProto(const coordinator::HostResources& resources) {
  v1::HostResources out;
  out.set_host(resources.host);
  out.set_slots(resources.slots);
  for (int g : resources.gpus) out.add_gpus(g);
  for (const std::string& u : resources.gpuUuids) out.add_gpu_uuids(u);
  return out;
}

v1::JobState toProto(coordinator::JobState state) {
  switch (state) {
    case coordinator::JobState::kPending:
      return v1::JOB_PENDING;
    case coordinator::JobState::kQueued:
      return v1::JOB_QUEUED;
    case coordinator::JobState::kRunning:
      return v1::JOB_RUNNING;
    case coordinator::JobState::kCompleted:
      return v1::JOB_COMPLETED;
    case coordinator::JobState::kFailed:
      return v1::JOB_FAILED;
    case coordinator::JobState::kCancelled:
      return v1::JOB_CANCELLED;
    case coordinator::JobState::kTimedOut:
      return v1::JOB_TIMEOUT;
    case coordinator::JobState::kLost:
      return v1::JOB_LOST;
    case coordinator::JobState::kUnspecified:
      break;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

coordinator::JobState fromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_PENDING:
      return coordinator::JobState::kPending;
    case v1::JOB_QUEUED:
      return coordinator::JobState::kQueued;
    case v1::JOB_RUNNING:
      return coordinator::JobState::kRunning;
    case v1::JOB_COMPLETED:
      return coordinator::JobState::kCompleted;
    case v1::JOB_FAILED:
      return coordinator::JobState::kFailed;
    case v1::JOB_CANCELLED:
      return coordinator::JobState::kCancelled;
    case v1::JOB_TIMEOUT:
      return coordinator::JobState::kTimedOut;
    case v1::JOB_LOST:
      return coordinator::JobState::kLost;
    default:
      return coordinator::JobState::kUnspecified;
  }
}

bool isFinalState(v1::JobState state) {
  switch (state) {
    case v1::JOB_COMPLETED:
    case v1::JOB_FAILED:
    case v1::JOB_CANCELLED:
    case v1::JOB_TIMEOUT:
    case v1::JOB_LOST:
      return true;
    default:
      return false;
  }
}

std::string jobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_PENDING:
      return "PENDING";
    case v1::JOB_RUNNING:
      return "RUNNING";
    case v1::JOB_COMPLETED:
      return "COMPLETED";
    case v1::JOB_FAILED:
      return "FAILED";
    case v1::JOB_CANCELLED:
      return "CANCELLED";
    case v1::JOB_TIMEOUT:
      return "TIMEOUT";
    case v1::JOB_LOST:
      return "LOST";
    case v1::JOB_QUEUED:
      return "QUEUED";
    default:
      return "UNKNOWN";
  }
}

// Describe's answer: the node's description plus the facts only operators read.
v1::DescribeResponse toProto(const node::NodeFacts& facts) {
  v1::DescribeResponse response = toProto(facts.node);
  for (const transport::InterfaceAddresses& i : facts.interfaces) {
    v1::NetworkInterface* entry = response.add_interfaces();
    entry->set_name(i.name);
    for (const std::string& a : i.addresses) entry->add_addresses(a);
  }
  for (const std::string& f : facts.features) response.add_features(f);
  return response;
}

}  // namespace hvd::agent::rpc
