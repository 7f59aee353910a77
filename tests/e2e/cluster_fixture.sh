#!/usr/bin/env bash
# ctest fixture of the e2e tests: brings the shared 2-host netns cluster up before them and
# tears every cluster of this build down after them (also the ones a crashed test left).
#
# usage: cluster_fixture.sh up STATE_ROOT PREFIX BIN_DIR
#        cluster_fixture.sh down STATE_ROOT
# Exits 77 (ctest SKIP_RETURN_CODE) when not root or `ip netns` is unavailable.
set -euo pipefail

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/netns-cluster.sh"
cmd="${1:?usage: cluster_fixture.sh up|down STATE_ROOT [PREFIX BIN_DIR]}"
export HVD_NETNS_STATE_ROOT="${2:?missing STATE_ROOT}"

if [[ $EUID -ne 0 ]]; then
  echo "e2e: skipped: needs root for network namespaces"
  exit 77
fi
if ! ip netns list > /dev/null 2>&1; then
  echo "e2e: skipped: 'ip netns' is not available here"
  exit 77
fi

case "$cmd" in
  up)
    prefix="${3:?missing PREFIX}"
    bin="${4:?missing BIN_DIR}"
    "$SCRIPT" down --prefix "$prefix" # a stale one from a killed run
    "$SCRIPT" up 2 --prefix "$prefix" --bin "$bin" --log-level debug
    ;;
  down)
    "$SCRIPT" down --all
    ;;
  *)
    echo "cluster_fixture.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
