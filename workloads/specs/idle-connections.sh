#!/usr/bin/env bash
# What idle connections cost a zab member: one member (`BIN serve zab`, tmpfs) with the
# per-address cap raised to CAP, then N connections from 127.0.0.1 that each send only a
# 4-byte frame header announcing LEN bytes (default: the 1 MiB maximum) and go quiet.
# Prints the member's RSS (VmRSS) before and after, the difference and the bytes per
# connection. The member closes such connections after its 30 s handshake timeout, so the
# figure is taken while they are all open (the script checks the member's descriptors).
# Usage: workloads/specs/idle-connections.sh [BIN]
#   (N=10000 CAP=20000 LEN=1048576 BASE_PORT=36000; CAP= omits --max-client-cnxns, for a
#    build that has no cap)
set -euo pipefail
BIN=$(readlink -f "${1:-target/release/coordbench}")
N=${N:-10000}
CAP=${CAP-20000}
LEN=${LEN:-1048576}
PORT=${BASE_PORT:-36000}
# Both ends hold N descriptors.
ulimit -n "$(ulimit -Hn)"
(( $(ulimit -n) > N + 100 )) || { echo "ulimit -n $(ulimit -n) is too low for N=$N" >&2; exit 2; }
data=$(mktemp -d /dev/shm/idle-connections.XXXXXX)
pid=
stop() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$data"; }
trap stop EXIT

cap_arg=()
[[ -n $CAP ]] && cap_arg=(--max-client-cnxns="$CAP")
"$BIN" serve zab --id=1 --peers="1=127.0.0.1:$((PORT + 1))" --clients="1=127.0.0.1:$PORT" \
  --data-dir="$data/m1" --disk=tmpfs "${cap_arg[@]}" > "$data/member.log" 2>&1 &
pid=$!

python3 - "$pid" "$PORT" "$N" "$LEN" <<'EOF'
import os, socket, struct, sys, time
pid, port, n, length = (int(a) for a in sys.argv[1:5])

def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

def fds():
    return len(os.listdir(f"/proc/{pid}/fd"))

def ruok():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False

deadline = time.time() + 30
while not ruok():
    if time.time() > deadline:
        sys.exit("the member did not answer ruok within 30 s")
    time.sleep(0.2)
time.sleep(1)
before, fds_before = rss_kib(), fds()
header = struct.pack(">i", length)
conns = []
started = time.time()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(header)
    conns.append(s)
opened = time.time() - started
# Wait until the member holds them all (accepted, header read), within its handshake timeout.
deadline = time.time() + 10
while fds() < fds_before + n and time.time() < deadline:
    time.sleep(0.1)
held = fds() - fds_before
time.sleep(2)
after = rss_kib()
delta = after - before
print(f"connections: {n} opened in {opened:.1f} s, {held} held by the member; header announces {length} bytes")
print(f"RSS before: {before / 1024:.1f} MiB; after: {after / 1024:.1f} MiB; "
      f"increase: {delta / 1024:.1f} MiB ({delta * 1024 / max(held, 1):.0f} bytes per connection)")
# Reset rather than close: N sockets in TIME_WAIT would hold ephemeral ports for a minute.
linger = struct.pack("ii", 1, 0)
for s in conns:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    s.close()
if held < n:
    sys.exit(f"the member held only {held} of {n} connections")
EOF
