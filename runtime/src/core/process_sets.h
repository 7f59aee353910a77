// Process sets (Horovod's hvd.ProcessSet): ordered subsets of the job's ranks, each with an id
// that every rank agrees on, on which collectives run as on the whole job. Set 0 is the global
// set of every rank. A set's ranks are job ranks in ascending order (Horovod sorts them); a
// rank's place in the set is its index there.
//
// This table is the bookkeeping alone: which ids exist and which ranks they hold. Every rank
// keeps the same table, because sets are fixed at init from the same list (HVD_PROCESS_SETS or
// hvd.init(process_sets=...)) or added and removed collectively, in the same order on every
// rank (core/runtime.h). Ids are never reused within one init: a removed set's id, and its mesh
// channel, stay retired, so nothing of a removed set can reach a later one.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hvd::core {

constexpr int kGlobalProcessSet = 0;

class ProcessSetTable {
 public:
  explicit ProcessSetTable(int jobSize);

  int jobSize() const { return jobSize_; }
  // `ranks` sorted, each checked: an empty set, a rank outside 0..size-1 or a rank given twice
  // throws InvalidArgumentError naming it; `what` starts the message ("add_process_set").
  std::vector<int> normalize(const std::vector<int>& ranks, const std::string& what) const;
  // The id of the set holding exactly `ranks` (normalised), or -1.
  int find(const std::vector<int>& ranks) const;
  // Registers `ranks` (normalised) under the next id and returns it; a set that exists already
  // throws InvalidArgumentError naming it.
  int add(const std::vector<int>& ranks, const std::string& what);
  // False for the global set and for ids that do not exist.
  bool remove(int id);
  bool contains(int id) const { return sets_.count(id) > 0; }
  // Throws InvalidArgumentError for an id that does not exist (removed, or never added).
  const std::vector<int>& ranks(int id) const;
  std::vector<int> ids() const;
  // "process set 1 (ranks 0,1)"; "the global process set" for 0.
  std::string describe(int id) const;

 private:
  int jobSize_;
  std::map<int, std::vector<int>> sets_;
  int nextId_ = 1;
};

// "0,1;2,3" -> {{0,1},{2,3}} (HVD_PROCESS_SETS: sets separated by ';', ranks by ','; spaces
// allowed). Throws InvalidArgumentError naming `name` and the token that is not a rank.
std::vector<std::vector<int>> parseProcessSets(const std::string& text, const char* name);

// "0,1,3".
std::string rankList(const std::vector<int>& ranks);

}  // namespace hvd::core
