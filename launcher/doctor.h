// `hvdrun doctor`: a health check of a cluster's agents before a job, with no job launched.
// Every agent of -H / --hostfile (else $HVD_AGENT_HOSTS, else this machine's, as the job
// commands pick them: job_commands.h) is asked to Describe itself, all at once, each within
// --start-timeout; the answers become a report (doctor_report.h) printed as a table or JSON
// (doctor_render.h).
//
// What it does not check yet: the links between the hosts (a later change runs a small
// measurement job over the agents that passed, and adds its findings to the same report), and
// the GPUs' driver, CUDA and NCCL versions (the agents do not report them).
#pragma once

#include <chrono>
#include <vector>

#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "launcher/doctor_report.h"
#include "launcher/job_commands.h"
#include "launcher/options.h"

namespace hvd::launcher {

// Describes every target at once and waits for every answer (each call has `timeout` as its
// deadline, so this returns within about that); the probes are in the order of `targets`.
// `signer` signs every call.
std::vector<AgentProbe> probeAgents(const std::vector<AgentTarget>& targets,
                                    agent::rpc::CallSigner* signer,
                                    const agent::rpc::TlsOptions& tls,
                                    std::chrono::milliseconds timeout);

// Runs `hvdrun doctor` (options.action == kDoctor) and prints its report on stdout. Returns 0
// when every agent is fine, 1 when a problem was found; a missing or unsafe key file or a bad
// host list throws hvd::InvalidArgumentError (exit 2).
int runDoctor(const Options& options);

}  // namespace hvd::launcher
