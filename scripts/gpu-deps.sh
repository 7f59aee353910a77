#!/usr/bin/env bash
# Makes third_party/gpu-deps/include: copies of the headers libhvd needs besides the C++ library
# and the CUDA toolkit, taken from this machine's Debian packages (installed first by
# install-deps.sh): the Boost headers the runtime's sources include (the exact closure the
# compiler reports, plus the whole of boost/asio, boost/config and boost/predef so that another
# compiler's configuration branches find theirs), spdlog and fmt (used header-only there).
# scripts/gpu-check.sh builds with them on a GPU machine that has no Debian packages; the folder
# is ignored by git and travels with the working tree (about 25 MB).
#
#   scripts/gpu-deps.sh [OUT]     (default: third_party/gpu-deps)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/third_party/gpu-deps}"
"$ROOT/scripts/install-deps.sh"

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/include/boost"
# Every runtime source that includes Boost, preprocessed for its dependency list.
mapfile -t sources < <(grep -rl '#include <boost/' "$ROOT/runtime/src" --include='*.cc')
deps="$(for f in "${sources[@]}"; do
  g++ -std=c++17 -M -DBOOST_ASIO_NO_DEPRECATED -I"$ROOT/runtime/include" -I"$ROOT/runtime/src" "$f"
done)"
mapfile -t boost < <(tr ' \\' '\n\n' <<<"$deps" | grep '^/usr/include/boost/' | sort -u)
if ((${#boost[@]} == 0)); then
  echo "gpu-deps: found no Boost headers in the runtime's dependencies" >&2
  exit 1
fi
(cd /usr/include && cp --parents "${boost[@]#/usr/include/}" "$OUT.tmp/include/")
cp -r /usr/include/boost/asio /usr/include/boost/config /usr/include/boost/predef \
  "$OUT.tmp/include/boost/"
cp /usr/include/boost/asio.hpp /usr/include/boost/config.hpp "$OUT.tmp/include/boost/"
cp -r /usr/include/spdlog /usr/include/fmt "$OUT.tmp/include/"
# Debian's spdlog is configured for its compiled library with an external fmt; header-only use
# needs nothing else changed (SPDLOG_HEADER_ONLY and FMT_HEADER_ONLY come from CMake).
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "gpu-deps: $(du -sh "$OUT" | cut -f1) in $OUT (${#boost[@]} Boost headers from the closure)"
