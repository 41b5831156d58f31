#!/usr/bin/env bash
# Where a capture's CPU goes, by thread: `serve --no-worker` on a fresh store under wrk (`capture.lua`), then serve's CPU
# per capture for each kind of thread (Swift's pool, NIO's event loops, the group commit's writer, the thread that makes
# sealing keys ahead, the rest), its context switches per capture (voluntary, involuntary), and wrk's p50 and p99. Read from /proc/<pid>/task/*: no
# profiler attached, so the numbers are the process's own. Compare two builds by alternating them in one session:
#   BIN=<release profile-escrow> Benchmarks/http/capture-threads.sh [connections] [seconds]
# Without BIN, builds one. `PROFILE_ESCROW_SCHEDULING=normal` compares the scheduling policies.
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-8}
source Benchmarks/http/capture-node.sh
release_binary
work=$(mktemp -d)
trap 'stop_capture_node; rm -rf "$work"' EXIT
start_capture_node "$work"

# One line per thread: id, CPU ticks (user + system: fields 14 and 15 of stat, counted after the command name,
# which may hold spaces), voluntary and involuntary switches, and the thread's name.
snapshot() {
    for task in /proc/"$node_pid"/task/*; do
        awk -v id="${task##*/}" '{ i = index($0, ") "); split(substr($0, i + 2), f, " "); printf "%s %d ", id, f[12] + f[13] }' \
            "$task/stat"
        awk '/^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 } END { printf "%d %d ", v, n }' \
            "$task/status"
        tr ' ' '_' <"$task/comm"
    done
}
snapshot >"$work/before"
TOKEN="$node_token" wrk -t2 -c"$connections" -d"${seconds}s" --latency -s Benchmarks/http/capture.lua \
    "http://127.0.0.1:$node_port" >"$work/wrk.txt"
snapshot >"$work/after"
if grep -q "Non-2xx" "$work/wrk.txt"; then
    echo "capture-threads.sh: errors under load:" >&2
    cat "$work/wrk.txt" >&2
    exit 1
fi

python3 - "$work" "$(getconf CLK_TCK)" <<'PY'
import sys
work, hz = sys.argv[1], int(sys.argv[2])
def read(name):
    rows = {}
    for line in open(f"{work}/{name}"):
        tid, ticks, voluntary, involuntary, comm = line.split()
        rows[tid] = (int(ticks), int(voluntary), int(involuntary), comm)
    return rows
before, after = read("before"), read("after")
requests = next(int(line.split()[0]) for line in open(f"{work}/wrk.txt") if "requests in" in line)
def kind(comm):
    if "default-qos" in comm: return "Swift's pool"
    if comm.startswith("NIO-"): return "event loops"
    if "overcommit" in comm: return "writer (group commit)"
    if comm == "sealing-keys": return "sealing keys made ahead"
    return "other"
totals, switches = {}, [0, 0]
for tid, (ticks, voluntary, involuntary, comm) in after.items():
    start = before.get(tid, (0, 0, 0, comm))
    totals[kind(comm)] = totals.get(kind(comm), 0) + ticks - start[0]
    switches[0] += voluntary - start[1]
    switches[1] += involuntary - start[2]
per = lambda ticks: ticks / hz / requests * 1e6
rate = next(line.split()[1] for line in open(f"{work}/wrk.txt") if line.startswith("Requests/sec"))
percentiles = {line.split()[0]: line.split()[1] for line in open(f"{work}/wrk.txt")
               if line.strip().split(" ")[0] in ("50%", "99%")}
print(f"{requests} captures, {rate}/s, p50 {percentiles.get('50%')}, p99 {percentiles.get('99%')}")
for name in ("Swift's pool", "event loops", "writer (group commit)", "sealing keys made ahead", "other"):
    print(f"  {name:24} {per(totals.get(name, 0)):6.1f} us of CPU per capture")
print(f"  {'total':24} {per(sum(totals.values())):6.1f} us")
print(f"  context switches per capture: {switches[0] / requests:.2f} voluntary, {switches[1] / requests:.2f} involuntary")
PY
