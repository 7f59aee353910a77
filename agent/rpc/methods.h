// Full gRPC method names of hvd.v1.Agent: what requests sign (request_signer.h) and what the
// server checks them against. A unit test compares them with the service descriptor, so a
// renamed RPC cannot silently sign under a stale name.
#pragma once

#include <string_view>

namespace hvd::agent::rpc {

inline constexpr std::string_view kDescribeMethod = "/hvd.v1.Agent/Describe";
inline constexpr std::string_view kLaunchMethod = "/hvd.v1.Agent/Launch";
inline constexpr std::string_view kStopMethod = "/hvd.v1.Agent/Stop";
inline constexpr std::string_view kReserveMethod = "/hvd.v1.Agent/Reserve";
inline constexpr std::string_view kUnreserveMethod = "/hvd.v1.Agent/Unreserve";
inline constexpr std::string_view kSubmitJobMethod = "/hvd.v1.Agent/SubmitJob";
inline constexpr std::string_view kCancelJobMethod = "/hvd.v1.Agent/CancelJob";
inline constexpr std::string_view kListJobsMethod = "/hvd.v1.Agent/ListJobs";
inline constexpr std::string_view kGetJobMethod = "/hvd.v1.Agent/GetJob";
inline constexpr std::string_view kJobLogsMethod = "/hvd.v1.Agent/JobLogs";

// JobLogs' initial metadata when the request asked to follow from the end: the agent has marked
// where "from now" is, so the client may say it is attached. An error answer carries no such key.
inline constexpr char kFollowingFromEndKey[] = "hvd-following-from-end";

}  // namespace hvd::agent::rpc
