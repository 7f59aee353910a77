#include "agent/records/job_records.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/records/atomic_file.h"
#include "agent/records/trusted_path.h"
#include "hvd/error.hpp"

namespace hvd::agent::records {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeader = "hvd-job-record 1";
constexpr const char* kSuffix = ".rec";

// The job id as one printable line (ids come from requests; a newline must not forge a field).
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 256)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

std::optional<JobRecord> parse(const std::string& path) {
  // A record another user could have written names a group to kill: not used (trusted_path.h).
  if (!untrustedFile(path, 64 << 10).empty()) return std::nullopt;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return std::nullopt;
  JobRecord r;
  int fields = 0;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
    const bool numeric = errno == 0 && end != value.c_str() && *end == '\0';
    if (key == "job") {
      r.jobId = value;
    } else if (key == "tag") {
      r.tag = value;
    } else if (key == "pgid" && numeric && n > 1) {
      r.pgid = static_cast<pid_t>(n), ++fields;
    } else if (key == "leader_start" && numeric) {
      r.leaderStartTime = n, ++fields;
    } else if (key == "agent_pid" && numeric) {
      r.agentPid = static_cast<pid_t>(n), ++fields;
    } else if (key == "agent_start" && numeric) {
      r.agentStartTime = n, ++fields;
    }
  }
  if (fields != 4) return std::nullopt;
  return r;
}

// The fields of /proc/<pid>/stat from field 3 (state) on: what follows the last ')', since the
// command name in between may hold spaces and parentheses.
std::vector<std::string> statFields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::vector<std::string> fields;
  if (!std::getline(in, stat)) return fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(stat.substr(close + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

// See the header: the leader with its start time, or a member with the job's tag.
bool stillTheJobs(const JobRecord& record) {
  if (record.leaderStartTime != 0 && processStartTime(record.pgid) == record.leaderStartTime) {
    return true;
  }
  if (record.tag.empty()) return false;
  const std::string entry = std::string(kJobTagEnv) + "=" + record.tag;
  for (pid_t member : processGroupMembers(record.pgid)) {
    if (environContains(member, entry)) return true;
  }
  return false;
}

}  // namespace

std::vector<pid_t> processGroupMembers(pid_t pgid) {
  std::vector<pid_t> members;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    const std::vector<std::string> fields = statFields(pid);
    // fields[0] is field 3 (state), so field 5 (pgrp) is fields[2]. Zombies are gone already.
    if (fields.size() > 2 && fields[0] != "Z" && fields[2] == std::to_string(pgid)) {
      members.push_back(pid);
    }
  }
  return members;
}

bool environContains(pid_t pid, const std::string& entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string item; std::getline(in, item, '\0');) {
    if (item == entry) return true;
  }
  return false;
}

std::optional<uint64_t> processStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const std::vector<std::string> fields = statFields(pid);
  if (fields.size() < 20) return std::nullopt;
  const std::string& field = fields[19];  // field 22
  char* end = nullptr;
  const unsigned long long value = std::strtoull(field.c_str(), &end, 10);
  if (end == field.c_str() || *end != '\0') return std::nullopt;
  return value;
}

bool processAlive(pid_t pid, uint64_t startTime) {
  if (pid <= 0) return false;
  const std::vector<std::string> fields = statFields(pid);
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return false;
  return fields[19] == std::to_string(startTime);
}

std::string defaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/hvdagent";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state == '/') {
    return std::string(state) + "/hvdagent";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::string(home) + "/.local/state/hvdagent";
  }
  // Never a shared place such as /tmp: another user could create the directory first.
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr && found->pw_dir != nullptr && found->pw_dir[0] == '/' &&
      std::string(found->pw_dir) != "/") {
    return std::string(found->pw_dir) + "/.local/state/hvdagent";
  }
  return {};
}

JobRecords::JobRecords(std::string dir)
    : dir_(std::move(dir)),
      selfPid_(::getpid()),
      selfStartTime_(processStartTime(::getpid()).value_or(0)) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) {
      throw InvalidArgumentError("cannot create the state directory " + dir_ + ": " + ec.message());
    }
    ::chmod(dir_.c_str(), 0700);
  }
  if (!fs::is_directory(dir_, ec)) {
    throw InvalidArgumentError("the state directory " + dir_ + " is not a directory");
  }
  if (const std::string why = untrustedDirectory(dir_); !why.empty()) {
    throw InvalidArgumentError(why);
  }
}

std::string JobRecords::pathFor(const std::string& jobId, pid_t agentPid) const {
  return dir_ + "/job-" + auth::sha256Hex(jobId).substr(0, 16) + "-" + std::to_string(agentPid) +
         kSuffix;
}

bool JobRecords::add(const std::string& jobId, pid_t pgid, const std::string& tag) {
  // A leader that has exited already (a rank that ends at once) has no start time left; the
  // group's other processes are still told by the tag.
  const uint64_t start = processStartTime(pgid).value_or(0);
  if (start == 0 && tag.empty()) {
    errno = ESRCH;
    return false;
  }
  return write({jobId, pgid, start, selfPid_, selfStartTime_, tag});
}

bool JobRecords::write(const JobRecord& record) {
  std::ostringstream text;
  text << kHeader << "\njob " << printable(record.jobId) << "\npgid " << record.pgid
       << "\nleader_start " << record.leaderStartTime << "\nagent_pid " << record.agentPid
       << "\nagent_start " << record.agentStartTime << "\ntag " << printable(record.tag) << "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  return writeFileAtomically(pathFor(record.jobId, record.agentPid), text.str());
}

void JobRecords::remove(const std::string& jobId) {
  std::lock_guard<std::mutex> lock(mutex_);
  ::unlink(pathFor(jobId, selfPid_).c_str());
}

std::vector<JobRecord> JobRecords::list() const {
  std::vector<JobRecord> records;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != kSuffix) continue;
    if (std::optional<JobRecord> r = parse(e.path().string())) records.push_back(std::move(*r));
  }
  return records;
}

CleanupReport JobRecords::cleanupLeftovers() {
  CleanupReport report;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    // Not "*.tmp": a write in progress (another agent's), or one interrupted by a crash, whose
    // job then has no record; the next write of that name truncates it.
    if (e.path().extension() == kSuffix) files.push_back(e.path());
  }
  for (const fs::path& file : files) {
    const std::optional<JobRecord> record = parse(file.string());
    if (!record) {
      ++report.skipped;
      ::unlink(file.c_str());
      continue;
    }
    const bool ownerAlive =
        record->agentPid != selfPid_ && processAlive(record->agentPid, record->agentStartTime);
    if (ownerAlive) {
      ++report.kept;
      continue;
    }
    if (stillTheJobs(*record) && ::kill(-record->pgid, SIGKILL) == 0) {
      ++report.killed;
    } else {
      ++report.skipped;
    }
    ::unlink(file.c_str());
  }
  return report;
}

}  // namespace hvd::agent::records
