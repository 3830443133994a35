#!/usr/bin/env bash
# bench-object-peers.sh: what reading through each file's owner saves (docs/object-topics.md §3,
# `--object-peer-reads`), with peer reads on and off in one run on this machine:
#
#   a 3-node cluster on versitygw (S3) takes an object topic of 12 partitions (object-1kb at
#   20,000 records/s for 10 s, 50 ms batch timeout); node 3 stops, so its partitions' Metadata
#   leaders move to nodes 1 and 2; a consumer (kcat) then reads the whole topic from the start
#   through them. Reported: GETs nodes 1 and 2 made for that read, reads from peers, records
#   read and the read's wall time.
#
#   scripts/bench-object-peers.sh [records/s] [seconds]
#
# Needs kcat and versitygw (scripts/s3server.sh installs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RATE=${1:-20000}
SECONDS_RUN=${2:-10}
WORK=$(mktemp -d /tmp/runnel-bench-peers.XXXXXX)
export RUNNEL_CLUSTER_BASE=${RUNNEL_CLUSTER_BASE:-23090}
cleanup() {
	for mode in true false; do
		RUNNEL_CLUSTER_DIR="$WORK/cluster-$mode" "$ROOT/scripts/cluster.sh" clean >/dev/null 2>&1 || true
	done
	"$ROOT/scripts/s3server.sh" stop "$WORK/s3" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
export RUNNEL_BIN="$WORK/runnel"
(cd "$ROOT" && go build -o "$RUNNEL_BIN" ./cmd/runnel)
mkdir -p "$WORK/s3/root/runnel"
ENDPOINT=$("$ROOT/scripts/s3server.sh" start "$WORK/s3" 27071)
export AWS_ACCESS_KEY_ID=runnel-test AWS_SECRET_ACCESS_KEY=runnel-test-secret AWS_REGION=us-east-1

admin() { echo "127.0.0.1:$((RUNNEL_CLUSTER_BASE + 100 * $1 + 4))"; }
# metric NODE NAME: the sample's value on node NODE (0 if absent).
metric() {
	curl -sf "http://$(admin "$1")/metrics" | awk -v m="$2" '$1 == m { print $2; found = 1 } END { if (!found) print 0 }'
}
sum12() { awk -v a="$(metric 1 "$1")" -v b="$(metric 2 "$1")" 'BEGIN { printf "%d", a + b }'; }

echo "mode,gets,peer_reads_ok,peer_reads_failed,records,read_seconds"
for mode in true false; do
	export RUNNEL_CLUSTER_DIR="$WORK/cluster-$mode"
	export RUNNEL_SERVE_ARGS="--object-store s3://runnel/peers-$mode?endpoint=$ENDPOINT --object-batch-timeout 50ms --object-peer-reads=$mode --log-level warn"
	"$ROOT/scripts/cluster.sh" start 3 >&2
	BROKERS=$("$ROOT/scripts/cluster.sh" brokers)
	OUT=$("$RUNNEL_BIN" bench run object-1kb --bootstrap "$BROKERS" --partitions 12 --rate "$RATE" \
		--duration "${SECONDS_RUN}s" --warmup 0s --consumers 0 --keep-topics --json 2>>"$WORK/bench.log")
	TOPIC=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["topics"][0])' <<<"$OUT")
	ACKED=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["records"]["acked"])' <<<"$OUT")
	"$ROOT/scripts/cluster.sh" stop 3 >&2
	# Node 3's session lapses and Metadata stops naming it.
	for _ in $(seq 1 100); do
		if ! kcat -L -b "$BROKERS" -t "$TOPIC" 2>/dev/null | grep -q "leader 3,"; then break; fi
		sleep 0.2
	done
	G0=$(sum12 'runnel_object_requests_total{op="get"}')
	P0=$(sum12 'runnel_object_peer_reads_total{result="ok"}')
	F0=$(sum12 'runnel_object_peer_reads_total{result="failed"}')
	START=$(date +%s.%N)
	READ=$(kcat -C -b "$BROKERS" -t "$TOPIC" -o beginning -e -q -f '%o\n' 2>>"$WORK/kcat.log" | wc -l)
	END=$(date +%s.%N)
	G1=$(sum12 'runnel_object_requests_total{op="get"}')
	P1=$(sum12 'runnel_object_peer_reads_total{result="ok"}')
	F1=$(sum12 'runnel_object_peer_reads_total{result="failed"}')
	echo "$mode,$((G1 - G0)),$((P1 - P0)),$((F1 - F0)),$READ/$ACKED,$(awk -v a="$START" -v b="$END" 'BEGIN { printf "%.2f", b - a }')"
	"$ROOT/scripts/cluster.sh" clean >/dev/null 2>&1
done
