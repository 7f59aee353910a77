#include "core/process_sets.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "hvd/error.hpp"

namespace hvd::core {

std::string rankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  return out.str();
}

ProcessSetTable::ProcessSetTable(int jobSize) : jobSize_(jobSize) {
  std::vector<int> all(jobSize);
  for (int r = 0; r < jobSize; ++r) all[r] = r;
  sets_[kGlobalProcessSet] = std::move(all);
}

std::vector<int> ProcessSetTable::normalize(const std::vector<int>& ranks,
                                            const std::string& what) const {
  if (ranks.empty()) throw InvalidArgumentError(what + ": a process set needs at least one rank");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= jobSize_) {
      throw InvalidArgumentError(what + ": rank " + std::to_string(sorted[i]) +
                                 " is not a rank of this job (0.." + std::to_string(jobSize_ - 1) +
                                 ")");
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      throw InvalidArgumentError(what + ": rank " + std::to_string(sorted[i]) +
                                 " is given twice in [" + rankList(ranks) + "]");
    }
  }
  return sorted;
}

int ProcessSetTable::find(const std::vector<int>& ranks) const {
  for (const auto& [id, members] : sets_) {
    if (members == ranks) return id;
  }
  return -1;
}

int ProcessSetTable::add(const std::vector<int>& ranks, const std::string& what) {
  if (const int existing = find(ranks); existing >= 0) {
    throw InvalidArgumentError(what + ": a process set with ranks [" + rankList(ranks) +
                               "] exists already: " + describe(existing));
  }
  const int id = nextId_++;
  sets_[id] = ranks;
  return id;
}

bool ProcessSetTable::remove(int id) {
  if (id == kGlobalProcessSet) return false;
  return sets_.erase(id) > 0;
}

const std::vector<int>& ProcessSetTable::ranks(int id) const {
  auto found = sets_.find(id);
  if (found == sets_.end()) {
    throw InvalidArgumentError("there is no process set " + std::to_string(id) +
                               " (it was removed, or never added; sets: " + rankList(ids()) + ")");
  }
  return found->second;
}

std::vector<int> ProcessSetTable::ids() const {
  std::vector<int> out;
  for (const auto& entry : sets_) out.push_back(entry.first);
  return out;
}

std::string ProcessSetTable::describe(int id) const {
  if (id == kGlobalProcessSet) return "the global process set";
  return "process set " + std::to_string(id) + " (ranks " + rankList(ranks(id)) + ")";
}

std::vector<std::vector<int>> parseProcessSets(const std::string& text, const char* name) {
  std::vector<std::vector<int>> sets;
  std::stringstream all(text);
  std::string setText;
  while (std::getline(all, setText, ';')) {
    std::vector<int> ranks;
    std::stringstream one(setText);
    std::string token;
    while (std::getline(one, token, ',')) {
      const auto first = token.find_first_not_of(" \t");
      const auto last = token.find_last_not_of(" \t");
      const std::string trimmed =
          first == std::string::npos ? "" : token.substr(first, last - first + 1);
      const bool digits = !trimmed.empty() && trimmed.size() <= 9 &&
                          std::all_of(trimmed.begin(), trimmed.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
      if (!digits) {
        throw InvalidArgumentError(std::string(name) + "='" + text + "': '" + trimmed +
                                   "' is not a rank (expected sets of ranks like '0,1;2,3')");
      }
      ranks.push_back(std::stoi(trimmed));
    }
    if (ranks.empty()) {
      throw InvalidArgumentError(std::string(name) + "='" + text +
                                 "': an empty process set (expected sets of ranks like '0,1;2,3')");
    }
    sets.push_back(std::move(ranks));
  }
  return sets;
}

}  // namespace hvd::core
