#include "agent/records/job_history.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "agent/auth/cluster_key.h"
#include "agent/records/atomic_file.h"
#include "agent/records/job_records.h"
#include "agent/records/trusted_path.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "hvd_support/unix_time.h"

namespace hvd::agent::records {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRecordFile = "record.json";
constexpr const char* kLogFile = "output.log";
constexpr const char* kRequestFile = "request.pb";

// Job ids become directory names: only what makeJobId produces is accepted from disk.
bool safeJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// A record is small; a request carries the job's environment.
constexpr uint64_t kMaxRecordBytes = 16 << 20;
constexpr uint64_t kMaxRequestBytes = 64 << 20;

std::optional<v1::JobInfo> readRecord(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  v1::JobInfo info;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer agent's record
  if (!google::protobuf::util::JsonStringToMessage(text.str(), &info, options).ok()) {
    return std::nullopt;
  }
  if (!safeJobId(info.job_id())) return std::nullopt;
  return info;
}

void markLost(v1::JobInfo* info, int deadPid) {
  const std::string why = "its leader agent (pid " + std::to_string(deadPid) +
                          ") stopped while the job was running; the restarted agent found the "
                          "record and cleaned up the job's processes";
  info->set_state(v1::JOB_LOST);
  info->set_ended_unix_ms(nowUnixMs());
  v1::JobEnd* end = info->mutable_end();
  end->set_job_id(info->job_id());
  end->set_outcome(v1::AGENT_LOST);
  end->set_exit_code(contract::kExitAgentLost);
  end->set_summary("hvdrun: job " + info->job_id() + " was lost: " + why);
  end->set_reason(why);
  end->set_rank(-1);
  for (v1::RankInfo& rank : *info->mutable_ranks()) {
    if (rank.state() == v1::RANK_RUNNING || rank.state() == v1::RANK_PENDING) {
      rank.set_state(v1::RANK_LOST);
    }
  }
}

}  // namespace

JobHistory::JobHistory(const std::string& stateDir, size_t keepJobs, StateSpaceOptions space)
    : dir_(stateDir + "/jobs"),
      keepJobs_(keepJobs),
      selfPid_(static_cast<int>(::getpid())),
      selfStart_(processStartTime(::getpid()).value_or(0)) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) {
      throw InvalidArgumentError("cannot create the job directory " + dir_ + ": " + ec.message());
    }
    ::chmod(dir_.c_str(), 0700);
    ::chmod(stateDir.c_str(), 0700);
  }
  for (const std::string& dir : {stateDir, dir_}) {
    if (const std::string why = untrustedDirectory(dir); !why.empty()) {
      throw InvalidArgumentError(why);
    }
  }
  space_ = std::make_unique<StateSpace>(stateDir, std::move(space));
  load();
  loadReport_.pruned = prune();
}

void JobHistory::load() {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory(ec)) continue;
    // What another user could have written is not a job of this agent's (trusted_path.h).
    std::string why = untrustedDirectory(e.path().string());
    if (why.empty() && fs::exists(e.path() / kRecordFile, ec)) {
      why = untrustedFile((e.path() / kRecordFile).string(), kMaxRecordBytes);
    }
    if (why.empty() && fs::exists(e.path() / kRequestFile, ec)) {
      why = untrustedFile((e.path() / kRequestFile).string(), kMaxRequestBytes);
    }
    if (!why.empty()) {
      hvd::logging::program("records")->warn("job directory ignored: {}", why);
      ++loadReport_.untrusted;
      continue;
    }
    std::optional<v1::JobInfo> info = readRecord(e.path() / kRecordFile);
    if (!info || info->job_id() != e.path().filename().string()) {
      ++loadReport_.unreadable;
      continue;
    }
    const bool mine = info->leader_pid() == selfPid_ && info->leader_start_ticks() == selfStart_;
    const bool leaderAlive = !mine && processAlive(info->leader_pid(), info->leader_start_ticks());
    if (leaderAlive) {
      ++loadReport_.otherAgents;
      continue;
    }
    std::error_code exists;
    const bool waiting = info->state() == v1::JOB_QUEUED && info->detached() &&
                         fs::exists(e.path() / kRequestFile, exists);
    if (waiting) {
      // A submitted job that had not started: nothing of it ran, so it keeps its place in the
      // queue of the agent that takes over (LedJobs::resumeQueued).
      ++loadReport_.requeued;
    } else if (!isFinalState(info->state())) {
      markLost(&*info, info->leader_pid());
      ++loadReport_.markedLost;
      fs::remove(e.path() / kRequestFile, exists);
    }
    info->set_leader_pid(selfPid_);
    info->set_leader_start_ticks(selfStart_);
    persist(*info);
    ++loadReport_.loaded;
    lastSequence_ = std::max(lastSequence_, info->submit_sequence());
    jobs_[info->job_id()] = std::move(*info);
  }
}

std::string JobHistory::jobDir(const std::string& jobId) const { return dir_ + "/" + jobId; }

bool JobHistory::writeRecord(const v1::JobInfo& info) const {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(info, &json, options).ok()) return false;
  return writeFileAtomically(jobDir(info.job_id()) + "/" + kRecordFile, json);
}

void JobHistory::persist(const v1::JobInfo& info) {
  const std::string& id = info.job_id();
  if (space_->writeUsingReserve([&] { return writeRecord(info); })) {
    unwritten_.erase(id);
    return;
  }
  // Once per job until it is written again: a full disk fails every update of every job.
  if (unwritten_.insert(id).second) {
    hvd::logging::program("records")->warn(
        "job {}: cannot write its record under {}: {} ({}); the agent keeps trying, "
        "and the job's state is right in hvdrun ps and status meanwhile",
        id, dir_, std::strerror(errno), space_->describe());
  }
}

size_t JobHistory::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = unwritten_.begin(); it != unwritten_.end();) {
    auto job = jobs_.find(*it);
    if (job == jobs_.end() || space_->writeUsingReserve([&] { return writeRecord(job->second); })) {
      if (job != jobs_.end()) {
        hvd::logging::program("records")->info("job {}: its record is written again", *it);
      }
      it = unwritten_.erase(it);
    } else {
      ++it;
    }
  }
  if (unwritten_.empty()) space_->restoreReserve();
  return unwritten_.size();
}

std::string JobHistory::newJobId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    std::string id = "hvd-" + auth::randomHex(3);
    std::error_code ec;
    if (jobs_.count(id) == 0 && !fs::exists(jobDir(id), ec)) return id;
  }
}

void JobHistory::create(v1::JobInfo info) {
  if (!safeJobId(info.job_id())) {
    throw InvalidArgumentError("'" + info.job_id() + "' is not a job id");
  }
  info.set_leader_pid(selfPid_);
  info.set_leader_start_ticks(selfStart_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    info.set_submit_sequence(++lastSequence_);
  }
  const std::string dir = jobDir(info.job_id());
  const auto refuse = [&](const std::string& what) {
    const int error = errno;
    throw StateWriteError("cannot record the job: " + what + ": " + std::strerror(error) + " (" +
                              space_->describe() +
                              "); free space there, or restart hvdagent with another "
                              "--state-dir",
                          error);
  };
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) refuse("creating " + dir);
  if (!writeRecord(info)) {
    const int error = errno;
    std::error_code ec;
    fs::remove_all(dir, ec);
    errno = error;
    refuse("writing " + dir + "/" + kRecordFile);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_[info.job_id()] = std::move(info);
}

void JobHistory::discard(const std::string& jobId) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.erase(jobId) == 0) return;
    unwritten_.erase(jobId);
  }
  std::error_code ec;
  fs::remove_all(jobDir(jobId), ec);
}

bool JobHistory::update(const std::string& jobId, const std::function<void(v1::JobInfo*)>& change) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = jobs_.find(jobId);
  if (it == jobs_.end()) return false;
  change(&it->second);
  persist(it->second);
  return true;
}

std::optional<v1::JobInfo> JobHistory::get(const std::string& jobId) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = jobs_.find(jobId);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::map<v1::JobState, size_t> JobHistory::stateCounts() const {
  std::map<v1::JobState, size_t> counts;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, info] : jobs_) ++counts[info.state()];
  return counts;
}

std::vector<v1::JobInfo> JobHistory::list() const {
  std::vector<v1::JobInfo> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, info] : jobs_) out.push_back(info);
  }
  // Submission order: the sequence (records of agents before it had one first, by time).
  const auto order = [](const v1::JobInfo& i) {
    return std::make_tuple(i.submit_sequence() != 0, i.submit_sequence(), i.submitted_unix_ms());
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const v1::JobInfo& a, const v1::JobInfo& b) { return order(a) < order(b); });
  return out;
}

std::optional<std::string> JobHistory::logPath(const std::string& jobId) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (jobs_.count(jobId) == 0) return std::nullopt;
  return jobDir(jobId) + "/" + kLogFile;
}

bool JobHistory::saveRequest(const std::string& jobId, const v1::SubmitJobRequest& request) {
  std::string bytes;
  if (!request.SerializeToString(&bytes)) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(jobId) == 0) return false;
  }
  // Mode 0600 inside a 0700 directory: the request holds the job's environment.
  return writeFileAtomically(jobDir(jobId) + "/" + kRequestFile, bytes, 0600);
}

std::optional<v1::SubmitJobRequest> JobHistory::savedRequest(const std::string& jobId) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(jobId) == 0) return std::nullopt;
  }
  const std::string path = jobDir(jobId) + "/" + kRequestFile;
  if (const std::string why = untrustedFile(path, kMaxRequestBytes); !why.empty()) {
    hvd::logging::program("records")->warn("job {}: request not used: {}", jobId, why);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  v1::SubmitJobRequest request;
  if (!request.ParseFromString(bytes)) return std::nullopt;
  return request;
}

void JobHistory::dropRequest(const std::string& jobId) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(jobId) == 0) return;
  }
  std::error_code ec;
  fs::remove(jobDir(jobId) + "/" + kRequestFile, ec);
}

int JobHistory::prune() {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<int64_t, std::string>> finished;
    for (const auto& [id, info] : jobs_) {
      if (isFinalState(info.state())) finished.emplace_back(info.submitted_unix_ms(), id);
    }
    if (finished.size() <= keepJobs_) return 0;
    std::sort(finished.begin(), finished.end());
    for (size_t i = 0; i + keepJobs_ < finished.size(); ++i) {
      doomed.push_back(finished[i].second);
      jobs_.erase(finished[i].second);
    }
  }
  for (const std::string& id : doomed) {
    std::error_code ec;
    fs::remove_all(jobDir(id), ec);
    if (ec)
      hvd::logging::program("records")->warn("cannot remove {}: {}", jobDir(id), ec.message());
  }
  return static_cast<int>(doomed.size());
}

}  // namespace hvd::agent::records
