// Elastic mode's contract between the leader (agent/jobs/elastic_job.h) and the workers
// (runtime/src/core/elastic_session.h): the store namespaces of rounds, the keys each side
// writes there, and the text of an assignment. docs/elastic.md walks through one round change.
//
// A job in elastic mode lives through rounds 0, 1, 2, ...; the leader owns the number. Round N
// has its own store namespace, elasticStoreJob(job, N), with its own token, so a worker that was
// never told round N's token cannot write there. In round N's namespace:
//   * kNoticeKey: the leader announces that round N is to end (hosts were added, removed or
//     drained): formatNotice(next round, what changed). Workers read it at commit();
//   * readyKey(worker): a worker of round N shut down and waits for its next assignment (after
//     an error, or after the notice); the value says why; kReadyCountKey counts them;
//   * assignKey(worker): the leader's answer, once every worker of round N is ready or gone:
//     the worker's place in round N+k (formatAssignment), or that it was removed.
// Workers spawned for a round get their place from their environment (HVD_RANK, ...,
// HVD_ELASTIC_ROUND, the round's HVD_STORE_TOKEN) and read nothing here before joining.
#pragma once

#include <optional>
#include <string>

namespace hvd::contract {

// The store namespace of round `round` of job `jobId`.
std::string elasticStoreJob(const std::string& jobId, int round);

inline constexpr const char* kNoticeKey = "elastic/notice";
// How many workers of the round asked for their next place (each adds 1 after writing its
// readyKey): one key the leader reads to see that a round must end although nothing it saw
// changed (a worker's op timed out, a worker reset on its own).
inline constexpr const char* kReadyCountKey = "elastic/ready-count";
std::string readyKey(int worker);
std::string assignKey(int worker);

// What changed between two rounds, as Horovod's HostUpdateResult counts it (bits: 1 removed,
// 2 added; 3 both).
enum class HostChange { kNone = 0, kRemoved = 1, kAdded = 2, kMixed = 3 };

struct ElasticNotice {
  int round = 0;  // the round that will follow
  HostChange change = HostChange::kNone;
};
std::string formatNotice(const ElasticNotice& notice);
// nullopt for text that is not a notice.
std::optional<ElasticNotice> parseNotice(const std::string& text);

// A worker's place in a round, or its removal.
struct ElasticAssignment {
  int round = 0;
  std::string token;  // the round's store token
  bool removed = false;
  std::string reason;  // removed: why, for the worker's error
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  int crossSize = 1;
  std::string host;  // the host as the job lists it (HOROVOD_HOSTNAME)

  bool operator==(const ElasticAssignment& o) const {
    return round == o.round && token == o.token && removed == o.removed && reason == o.reason &&
           rank == o.rank && size == o.size && localRank == o.localRank &&
           localSize == o.localSize && crossRank == o.crossRank && crossSize == o.crossSize &&
           host == o.host;
  }
};
// "key=value" lines; the token is a value like the others (the store's own data, never logged).
std::string formatAssignment(const ElasticAssignment& assignment);
// Throws hvd::InvalidArgumentError naming the line that is not part of an assignment.
ElasticAssignment parseAssignment(const std::string& text);

// Horovod's words, which scripts and tests match.
inline constexpr const char* kWorkersFailedMessage =
    "Horovod detected that one or more processes exited with non-zero status";
std::string resetLimitMessage(int limit);

}  // namespace hvd::contract
