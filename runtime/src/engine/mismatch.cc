#include "engine/mismatch.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace hvd::engine {
namespace {

struct ValueGroup {
  std::string value;
  std::vector<int> ranks;
};

// Groups the present ranks by key(request); returns "" when all keys agree, else
// "<field> <v1> on rank a, <v2> on ranks b,c" with the smallest groups first.
std::string compare(const std::vector<const Request*>& perRank, const std::vector<int>& jobRanks,
                    const std::string& field,
                    const std::function<std::string(const Request&)>& key) {
  std::vector<ValueGroup> groups;
  for (size_t r = 0; r < perRank.size(); ++r) {
    if (perRank[r] == nullptr) continue;
    const std::string value = key(*perRank[r]);
    const int named = jobRanks.empty() ? static_cast<int>(r) : jobRanks[r];
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const ValueGroup& g) { return g.value == value; });
    if (it == groups.end()) {
      groups.push_back({value, {named}});
    } else {
      it->ranks.push_back(named);
    }
  }
  if (groups.size() <= 1) return "";
  std::stable_sort(groups.begin(), groups.end(), [](const ValueGroup& a, const ValueGroup& b) {
    return a.ranks.size() < b.ranks.size();
  });
  std::ostringstream out;
  out << field << (field.empty() ? "" : " ");
  for (size_t i = 0; i < groups.size(); ++i) {
    out << (i ? ", " : "") << groups[i].value << " on " << describeRanks(groups[i].ranks);
  }
  return out.str();
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string trailingShape(const Request& r) {
  // allgather/alltoall: dimension 0 may differ; the rest must agree.
  if (r.shape.empty()) return "[] (a scalar)";
  Shape rest(r.shape.begin() + 1, r.shape.end());
  std::string s = formatShape(rest);
  return "[*" + std::string(rest.empty() ? "" : ",") + s.substr(1);
}

}  // namespace

std::string describeRanks(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  return out.str();
}

std::string checkAgreement(const std::vector<const Request*>& perRank,
                           const std::vector<int>& jobRanks) {
  const Request* first = nullptr;
  for (const Request* r : perRank) {
    if (r != nullptr) {
      first = r;
      break;
    }
  }
  if (first == nullptr) return "";
  const std::string quoted = "'" + first->name + "'";
  if (std::string d =
          compare(perRank, jobRanks, "", [](const Request& r) { return opTypeName(r.type); });
      !d.empty()) {
    return quoted + ": " + d;
  }
  const OpType type = first->type;
  const std::string prefix = std::string(opTypeName(type)) + " " + quoted + ": ";
  using Key = std::function<std::string(const Request&)>;
  std::vector<std::pair<std::string, Key>> fields;
  if (type == OpType::kBarrier || type == OpType::kJoin) return "";
  fields.push_back({"dtype", [](const Request& r) { return dataTypeName(r.dtype); }});
  if (type == OpType::kAllgather || type == OpType::kAlltoall) {
    fields.push_back({"shape", trailingShape});
  } else {
    fields.push_back({"shape", [](const Request& r) { return formatShape(r.shape); }});
  }
  if (type == OpType::kAllreduce || type == OpType::kReducescatter) {
    fields.push_back({"op", [](const Request& r) { return reduceOpName(r.reduceOp); }});
    fields.push_back({"prescale factor", [](const Request& r) { return number(r.prescale); }});
    fields.push_back({"postscale factor", [](const Request& r) { return number(r.postscale); }});
  }
  if (type == OpType::kAllreduce) {
    fields.push_back({"fp16 compression", [](const Request& r) { return r.fp16 ? "on" : "off"; }});
    fields.push_back({"grouping", [](const Request& r) {
                        if (r.groupSize == 0) return std::string("not grouped");
                        std::ostringstream out;
                        out << "a group of " << r.groupSize << " (id " << std::hex << r.groupId
                            << ")";
                        return out.str();
                      }});
  }
  if (type == OpType::kBroadcast) {
    fields.push_back({"root", [](const Request& r) { return std::to_string(r.root); }});
  }
  fields.push_back({"device", [](const Request& r) {
                      return r.device < 0 ? std::string("cpu") : "gpu " + std::to_string(r.device);
                    }});
  for (const auto& [field, key] : fields) {
    if (std::string d = compare(perRank, jobRanks, field, key); !d.empty()) return prefix + d;
  }
  // alltoall splits are per rank by design: what a rank receives comes from the senders'
  // requests, so there is nothing more to agree on.
  return "";
}

}  // namespace hvd::engine
