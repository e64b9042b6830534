#!/usr/bin/env bash
# Installs what coordbench's build, tests and runs need, when missing, from Debian's
# packages: etcd (server and etcdctl), ZooKeeper (its server jar and, through its
# dependencies, a Java runtime), Redis (redis-server) and PostgreSQL (postgresql: the
# server binaries under /usr/lib/postgresql/<version>/bin and the `postgres` user they run
# as when coordbench is root; coordbench starts its own instances on its own ports and
# data directories, never the package's service), the protobuf compiler and headers (for gRPC code
# generation), the DejaVu fonts (text in the report's PNG charts), valgrind (the gates' deterministic
# cost) and headless Chromium (the report's browser test); then the notebooks'
# Python virtual environment, target/notebooks-venv, with notebooks/requirements.txt in it,
# and the interop tests' one, target/interop-venv (kazoo, tests/interop/requirements.txt)
# (Python 3's venv module; Debian's python3-venv where it lacks one). Safe to run
# repeatedly: it installs nothing that is already there, and rebuilds the venv only when
# requirements.txt changed since it was made.
# Usage: scripts/install-deps.sh [MODE]
#   (none)   everything above: what scripts/test.sh needs
#   build    only what building, reports and notebooks need, for the built-in engines
#            alone (no etcd, ZooKeeper, Java, Redis or PostgreSQL); the venvs too
#   compile  only what building and the report's charts need: protoc, its headers, fonts;
#            no Python venvs (scripts/quickstart.sh, first part)
#   servers  compile, plus Debian's etcd, etcdctl, ZooKeeper, a Java runtime and Maven:
#            what scripts/quickstart.sh's second part runs; no Redis, PostgreSQL or venvs
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case $mode in
  all | build | compile | servers) ;;
  *) echo "error: unknown mode '$mode'; use build, compile or servers (or nothing)" >&2; exit 2 ;;
esac

# command-that-proves-it-is-installed:debian-package
wanted=(
  protoc:protobuf-compiler
  /usr/include/google/protobuf/descriptor.proto:libprotobuf-dev
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
)
if [[ $mode == servers ]]; then
  wanted+=(
    etcd:etcd-server
    etcdctl:etcd-client
    /usr/share/java/zookeeper.jar:zookeeper
    java:default-jre-headless
    mvn:maven
  )
fi
if [[ $mode == all ]]; then
  wanted+=(
    etcd:etcd-server
    etcdctl:etcd-client
    /usr/share/java/zookeeper.jar:zookeeper
    # The TLS listener (--secure) loads netty-codec and netty-resolver, which Debian's
    # zookeeper.jar manifest does not name.
    /usr/share/java/netty-codec.jar:libnetty-java
    /usr/share/java/netty-resolver.jar:libnetty-java
    java:default-jre-headless
    # coordbench install zookeeper: Maven resolves the server's jars from Maven Central.
    mvn:maven
    redis-server:redis-server
    /usr/lib/postgresql:postgresql
    /usr/lib/python3/dist-packages/yaml:python3-yaml
    # run --engine-cost (workloads/gate.toml) counts instructions with cachegrind.
    valgrind:valgrind
    # tests/report_browser.rs renders report.html in headless Chromium.
    chromium-headless-shell:chromium-headless-shell
  )
fi

missing=()
# Only the venvs need Python.
venvs=$([[ $mode == all || $mode == build ]] && echo yes || echo no)
# python3 with venv and ensurepip (Debian splits them off into python3-venv).
if [[ $venvs == no ]]; then :
elif ! command -v python3 >/dev/null 2>&1; then missing+=(python3 python3-venv)
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then missing+=(python3-venv)
fi
for pair in "${wanted[@]}"; do
  probe=${pair%%:*} package=${pair##*:}
  if [[ $probe == /* ]]; then [[ -e $probe ]] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue
  fi
  missing+=("$package")
done

if ((${#missing[@]} > 0)); then
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
fi

# A venv made from a requirements file (every version exact). The stamp holds a hash of the
# requirements it was made from, and is written last, so an interrupted install is redone
# next time.
ensure_venv() {
  local venv=$1 requirements=$2 want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [[ $(cat "$venv/.requirements.sha256" 2>/dev/null) != "$want" ]]; then
    echo "creating $venv from $requirements" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
    echo "$want" >"$venv/.requirements.sha256"
  fi
}
[[ $venvs == yes ]] || exit 0
# The notebooks' venv.
ensure_venv target/notebooks-venv notebooks/requirements.txt
# The second ZooKeeper client library (kazoo) of tests/kazoo_interop.rs.
ensure_venv target/interop-venv tests/interop/requirements.txt
