#!/usr/bin/env bash
# Installs what coordbench's build, tests and runs need, when missing, from Debian's
# packages: etcd (server and etcdctl), ZooKeeper (its server jar and, through its
# dependencies, a Java runtime), the protobuf compiler and headers (for gRPC code
# generation) and the DejaVu fonts (text in the report's PNG charts). Safe to run
# repeatedly: it installs nothing that is already there.
# Usage: scripts/install-deps.sh [build]   (build: only what building and reports need,
# for the built-in engines alone; no etcd, ZooKeeper or Java)
set -euo pipefail

# command-that-proves-it-is-installed:debian-package
wanted=(
  protoc:protobuf-compiler
  /usr/include/google/protobuf/descriptor.proto:libprotobuf-dev
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
)
if [[ ${1:-} != build ]]; then
  wanted+=(
    etcd:etcd-server
    etcdctl:etcd-client
    /usr/share/java/zookeeper.jar:zookeeper
    java:default-jre-headless
  )
fi

missing=()
for pair in "${wanted[@]}"; do
  probe=${pair%%:*} package=${pair##*:}
  if [[ $probe == /* ]]; then [[ -e $probe ]] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue
  fi
  missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

as_root=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then as_root=(sudo); else
    echo "error: need root (or sudo) to install: ${missing[*]}" >&2
    exit 2
  fi
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q >/dev/null
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
