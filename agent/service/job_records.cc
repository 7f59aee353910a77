#include "agent/service/job_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/auth/cluster_key.h"
#include "hvd/error.hpp"

namespace hvd::agent::service {
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

}  // namespace

std::optional<uint64_t> processStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last
  // ')'. The field after it is field 3 (state); field 22 is 19 further on.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long long value = std::strtoull(field.c_str(), &end, 10);
  if (end == field.c_str() || *end != '\0') return std::nullopt;
  return value;
}

std::string defaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/hvdagent";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state == '/') {
    return std::string(state) + "/hvdagent";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/hvdagent";
  }
  return "/tmp/hvdagent-" + std::to_string(::geteuid());
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
}

std::string JobRecords::pathFor(const std::string& jobId, pid_t agentPid) const {
  return dir_ + "/job-" + auth::sha256Hex(jobId).substr(0, 16) + "-" + std::to_string(agentPid) +
         kSuffix;
}

bool JobRecords::add(const std::string& jobId, pid_t pgid) {
  const std::optional<uint64_t> start = processStartTime(pgid);
  if (!start) return false;
  return write({jobId, pgid, *start, selfPid_, selfStartTime_});
}

bool JobRecords::write(const JobRecord& record) {
  std::ostringstream text;
  text << kHeader << "\njob " << printable(record.jobId) << "\npgid " << record.pgid
       << "\nleader_start " << record.leaderStartTime << "\nagent_pid " << record.agentPid
       << "\nagent_start " << record.agentStartTime << "\n";
  const std::string data = text.str();
  const std::string path = pathFor(record.jobId, record.agentPid);
  const std::string tmp = path + ".tmp";
  std::lock_guard<std::mutex> lock(mutex_);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
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
    const bool ownerAlive = record->agentPid != selfPid_ &&
                            processStartTime(record->agentPid) == record->agentStartTime;
    if (ownerAlive) {
      ++report.kept;
      continue;
    }
    if (processStartTime(record->pgid) == record->leaderStartTime &&
        ::kill(-record->pgid, SIGKILL) == 0) {
      ++report.killed;
    } else {
      ++report.skipped;
    }
    ::unlink(file.c_str());
  }
  return report;
}

}  // namespace hvd::agent::service
