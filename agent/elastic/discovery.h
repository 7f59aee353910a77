// Which hosts an elastic job may use now (docs/elastic.md; Horovod's HostDiscovery). The leader
// asks a HostDiscovery every ElasticSpec::discoveryInterval and plans the next round from the
// answer (rounds.h), less the hosts the blacklist holds back (blacklist.h).
//
// Hosts are compared case-insensitively everywhere in this module (hostKey), as DNS compares
// names and as contract/host_spec.cc does for -H: "Node1" and "node1" are one machine, and
// treating them as two would put two sets of local ranks starting at 0 on it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hvd::agent::elastic {

struct DiscoveredHost {
  std::string host;  // as discovered; an IPv6 address without its brackets
  int slots = 0;

  bool operator==(const DiscoveredHost& o) const { return host == o.host && slots == o.slots; }
};

// The form under which two spellings of a host compare equal (lower case).
std::string hostKey(std::string_view host);

// Parses a discovery script's stdout: one HOST, HOST:SLOTS, [IPV6] or [IPV6]:SLOTS per line,
// surrounding whitespace stripped, blank lines skipped. A line without slots gets `defaultSlots`
// (>= 1; ElasticSpec's 0 means 1 and is resolved by the caller). The result keeps the order of
// the lines, so that new hosts join in the order the script names them.
//
// As in Horovod, which reads the lines into a set: a line repeated exactly (or a host repeated
// with the same slot count) counts once, and a host with 0 slots is as good as absent (Horovod
// places nothing on it), so it is left out. Empty output is valid: no host is available now.
//
// Throws hvd::InvalidArgumentError naming the line number, its text and what was expected, for
// an empty host name, a name no resolver accepts (contract/names.h), a slot count that is not a
// whole number in 0..contract::kMaxSlotsPerHost, or a host given two different slot counts.
std::vector<DiscoveredHost> parseDiscoveryOutput(const std::string& text, int defaultSlots);

// A source of the hosts available now. discover() throws an hvd::Error when it cannot tell
// (the leader fails the job if that happens the first time, and retries later, as Horovod does).
class HostDiscovery {
 public:
  virtual ~HostDiscovery() = default;
  // The available hosts with their slots, each host once, in the order the source gives them.
  virtual std::vector<DiscoveredHost> discover() = 0;
};

// A fixed list (hvdrun -H or a hostfile with --min-np/--max-np but no discovery script): the
// hosts never change, but a failed one can still be blacklisted.
class FixedHosts : public HostDiscovery {
 public:
  // Throws hvd::InvalidArgumentError for a host listed twice or with fewer than 1 slot.
  explicit FixedHosts(std::vector<DiscoveredHost> hosts);
  std::vector<DiscoveredHost> discover() override { return hosts_; }

 private:
  std::vector<DiscoveredHost> hosts_;
};

}  // namespace hvd::agent::elastic
