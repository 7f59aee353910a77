// What a name on hvdrun's command line must look like before it is handed on: an environment
// variable's name (-x) and a host (-H, hostfiles). A name that breaks these rules cannot mean
// anything downstream (no resolver finds such a host; the ranks' environment cannot hold such a
// variable, or holds one no program reads), so it is a usage error here, naming the token,
// rather than a resolver failure or a silently lost variable later.
#pragma once

#include <string>
#include <string_view>

namespace hvd::contract {

// POSIX's portable environment-variable name: [A-Za-z_][A-Za-z0-9_]*.
bool isEnvName(std::string_view name);

// Whether an environment variable's name says it holds a secret: a password (*PASSWORD*,
// *PASSWD*, *_PASS, *_PWD such as MYSQL_PWD, but not PWD), a token, a key, a credential or
// private material, an auth config (DOCKER_AUTH_CONFIG), a Kerberos ticket cache (KRB5CCNAME).
// Case-insensitive. The agent's own such variables never reach a job's ranks, and such values
// never reach a log: one list, so that the two cannot drift apart.
bool isSecretEnvName(std::string_view name);

// "" when `host` is a host name (RFC 1123: dot-separated labels of letters, digits and '-', no
// label starting or ending with '-', each at most 63 characters, at most 253 in all, one
// trailing dot allowed), an IPv4 address in dotted-quad form, or — with `bracketed` (it was
// written as [ADDR]) — an IPv6 address, optionally with a zone id (fe80::1%eth0). Otherwise what
// is wrong, in words that complete "'<token>' ...", e.g. "has a label 'a-' that ends with '-'"
// (no parenthesis: the caller adds what it expected).
//
// '_' is accepted inside labels: not RFC 1123, but DNS, /etc/hosts and getaddrinfo all take it,
// and cluster node names sometimes have one. A name whose last label is all digits must be an
// IPv4 address: resolvers read "10.0.0" or "999.1.1.1" as (broken) numbers, not names.
std::string hostNameProblem(std::string_view host, bool bracketed);

}  // namespace hvd::contract
