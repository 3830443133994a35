#!/usr/bin/env bash
# cluster-idle.sh: what an idle cluster costs, and how fast a node with many partitions restarts.
#
#   scripts/cluster-idle.sh [PARTITIONS] [SECONDS]
#
# Starts a 3-node cluster (scripts/cluster.sh, in a temporary directory, ports from
# RUNNEL_CLUSTER_BASE, default 19090), creates one topic of PARTITIONS (default 1000) partitions
# at replication factor 3 with a record in each, waits for it to settle, then measures each
# node's CPU (user + system, from /proc) over SECONDS (default 60) of idleness, as % of one core.
# Then it kills node 2 with SIGKILL, restarts it, and times until it is ready (/readyz) and until
# the cluster has no under-replicated partition again. Cleans up after itself.
set -euo pipefail

PARTS=${1:-1000}
SECS=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export RUNNEL_CLUSTER_DIR=${RUNNEL_CLUSTER_DIR:-$(mktemp -d /tmp/runnel-idle.XXXXXX)}
export RUNNEL_SERVE_ARGS=${RUNNEL_SERVE_ARGS:---log-level warn}
CL="$ROOT/scripts/cluster.sh"
trap '"$CL" clean >/dev/null 2>&1 || true' EXIT

"$CL" start 3 >/dev/null
BIN=${RUNNEL_BIN:-$RUNNEL_CLUSTER_DIR/runnel}
BROKERS=$("$CL" brokers)
ADMIN2=$((${RUNNEL_CLUSTER_BASE:-19090} + 204))
# A topic of PARTS partitions with a few records in each (round-robin keys), left behind idle.
"$BIN" bench run latency-1kb --bootstrap "$BROKERS" --topics 1 --partitions "$PARTS" --replication-factor 3 \
	--keys round-robin --rate $((PARTS * 2)) --warmup 0s --duration 3s --consumers 0 --keep-topics >/dev/null
under() { curl -fs "http://127.0.0.1:$ADMIN2/metrics" | awk '/^runnel_cluster_under_replicated_partitions /{print $2}'; }
for ((i = 0; i < 600; i++)); do [[ "$(under)" == "0" ]] && break; sleep 0.1; done
sleep 10 # leadership balancing and ISR reports settle

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A before
for i in 1 2 3; do before[$i]=$(ticks "$(cat "$RUNNEL_CLUSTER_DIR/node-$i.pid")"); done
sleep "$SECS"
for i in 1 2 3; do
	after=$(ticks "$(cat "$RUNNEL_CLUSTER_DIR/node-$i.pid")")
	awk -v a="$after" -v b="${before[$i]}" -v hz="$hz" -v s="$SECS" -v i="$i" -v p="$PARTS" \
		'BEGIN { printf "node %d idle with %d partitions at RF 3: %.2f%% of a core\n", i, p, 100 * (a - b) / hz / s }'
done

"$CL" kill 2 >/dev/null
t0=$(date +%s.%N)
"$CL" restart 2 >/dev/null
t1=$(date +%s.%N)
for ((i = 0; i < 6000; i++)); do [[ "$(under)" == "0" ]] && break; sleep 0.05; done
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "node 2 after kill -9: ready in %.2f s, every partition in sync again after %.2f s\n", b - a, c - a }'
