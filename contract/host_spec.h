// Host specifications: the `-H host[:slots],...` list and `--hostfile` files of hvdrun, parsed
// into an ordered list of hosts. Order matters: ranks are assigned in host order, and the first
// host's agent leads the job. Slot counts stay optional here because a host without one gets its
// GPU count (or 1), which only its agent knows.
//
// Every malformed input is an hvd::InvalidArgumentError whose message quotes the offending token
// and says what was expected; hostfile errors also name the file and the line number. The
// launcher turns these into exit code 2 (usage error). A host must be one a resolver accepts: a
// host name, an IPv4 address or a bracketed IPv6 address (contract/names.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hvd::contract {

// One host as the user wrote it. `host` is a hostname or an address, with the brackets of an IPv6
// address removed ("[::1]:2" -> "::1").
struct HostSlots {
  std::string host;
  std::optional<int> slots;  // nullopt: decide later from the host's GPUs (or 1 without GPUs)

  bool operator==(const HostSlots& o) const { return host == o.host && slots == o.slots; }
};

// Far above any real node; a larger number is a typo, and refusing it keeps slot sums in range.
constexpr int kMaxSlotsPerHost = 1000000;

// Parses a `-H` value: comma-separated HOST or HOST:SLOTS tokens, IPv6 as [ADDR] or [ADDR]:SLOTS.
// Each host may appear once.
std::vector<HostSlots> parseHostList(const std::string& spec);

// Parses hostfile contents (mpirun/Horovod style): one host per line as `HOST`, `HOST:N` or
// `HOST slots=N`; `#` starts a comment; blank lines are ignored. `name` (usually the path) is
// used in error messages.
std::vector<HostSlots> parseHostfileText(const std::string& text, const std::string& name);

// Reads and parses the hostfile at `path`; a file that cannot be read is an error naming the path
// and the reason.
std::vector<HostSlots> parseHostfile(const std::string& path);

}  // namespace hvd::contract
