#!/usr/bin/env bash
# Installs the Debian packages shardscope needs, by name, only those that are missing.
# Prints what it installs; prints one line and does nothing when everything is present.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config
  libabsl-dev libeigen3-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libxxhash-dev libopenblas-dev zlib1g-dev libelf-dev libprotobuf-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libgl-dev libstb-dev
  xvfb xauth
)
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
