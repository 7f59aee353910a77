#!/usr/bin/env bash
# Installs every build and test dependency of hvd from Debian 12's packages.
# Idempotent: when everything is present it checks and returns quietly.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libboost-dev libboost-system-dev
  libspdlog-dev libfmt-dev libcli11-dev
  libyaml-cpp-dev  # hvdrun --config-file (horovodrun's YAML file)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev
  libssl-dev
  iproute2 procps psmisc
  # Debian packages with CPack (scripts/package.sh, tests/packaging): dpkg-shlibdeps, lintian
  dpkg-dev lintian
  # torch.distributed under hvdrun (tests/e2e/e2e_torch_test.cc), the peer of bench/fusion.sh,
  # and hvd.torch with its pytest suite (tests/python)
  python3-torch python3-pytest
  # a throw-away Slurm cluster in network namespaces for the e2e tests (scripts/slurm-cluster.sh)
  slurm-wlm munge
  # a real Prometheus server scraping hvdagent --metrics-listen (tests/e2e/e2e_metrics_test.py)
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  if [[ "$status" != *"install ok installed"* ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
