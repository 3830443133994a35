#!/usr/bin/env bash
# bench-objects.sh: object-storage topics' benchmarks (docs/object-topics.md §7, issue 14), in
# one run on this machine, one broker process at a time:
#
#   1. object-1kb on the local-directory store and on versitygw (S3), each node's time split
#      into buffer wait, object write and commit (from the node's metrics), PUTs and GETs/s;
#   2. the same stream on a local (replicated-log) Runnel topic and on Apache Kafka 4.1.1, for
#      what an object topic trades in latency;
#   3. PUTs per second from 1 to 1,000 partitions at the same record rate (they stay flat);
#   4. the batch timeout's trade: 50 ms and 1 s against the 250 ms default.
#
#   scripts/bench-objects.sh [--duration 30s] [--warmup 5s]    (any `runnel bench run` flags)
#
# Results go to stdout; progress and logs to $WORK. Needs Java for Kafka (scripts/kafka.sh
# installs it) and versitygw (scripts/s3server.sh installs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/runnel-bench-objects.XXXXXX)
KAFKA_PORT=${RUNNEL_KAFKA_PORT:-19092}
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	"$ROOT/scripts/s3server.sh" stop "$WORK/s3" || true
	RUNNEL_KAFKA_PORT=$KAFKA_PORT "$ROOT/scripts/kafka.sh" clean >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
BIN="$WORK/runnel-bin"
(cd "$ROOT" && go build -o "$BIN" ./cmd/runnel)
FLAGS=("$@")
[[ ${#FLAGS[@]} -eq 0 ]] && FLAGS=(--duration 30s --warmup 5s)

mkdir -p "$WORK/s3/root/runnel" # versitygw's posix backend: a bucket is a directory
ENDPOINT=$("$ROOT/scripts/s3server.sh" start "$WORK/s3" 27070)
export AWS_ACCESS_KEY_ID=runnel-test AWS_SECRET_ACCESS_KEY=runnel-test-secret AWS_REGION=us-east-1

# serve STORE [extra serve flags...]: a fresh one-node Runnel on 127.0.0.1:29092, admin :29644.
serve() {
	local store=$1
	shift
	rm -rf "$WORK/data"
	"$BIN" serve --data-dir "$WORK/data" --kafka-addr 127.0.0.1:29092 --cluster-addr 127.0.0.1:29093 \
		--admin-addr 127.0.0.1:29644 --speclog-addr 127.0.0.1:0 --log-level warn --object-store "$store" "$@" >>"$WORK/serve.log" 2>&1 &
	SERVE_PID=$!
	PIDS+=("$SERVE_PID")
	for _ in $(seq 1 100); do
		curl -sf http://127.0.0.1:29644/readyz >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench-objects.sh: runnel did not start; see $WORK/serve.log" >&2
	exit 1
}
stop_serve() {
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null || true
}
run() { # label workload [flags...]
	local label=$1 workload=$2
	shift 2
	echo "== $label" >&2
	"$BIN" bench run "$workload" --bootstrap 127.0.0.1:29092 --metrics 127.0.0.1:29644 --label "$label" --quiet "${FLAGS[@]}" "$@"
	echo
}

# The same stream on a topic of replicated logs (for Runnel and Kafka).
sed -e '/^topic_configs:/d' -e '/runnel.storage/d' -e 's/^name: object-1kb/name: disk-1kb/' \
	"$ROOT/internal/bench/workloads/object-1kb.yaml" >"$WORK/disk-1kb.yaml"

echo "# 1. object-1kb, local directory and S3 (versitygw)"
serve "file://$WORK/objects"
run "runnel object topic, file:// store" object-1kb
stop_serve
serve "s3://runnel/bench?endpoint=$ENDPOINT"
run "runnel object topic, s3:// (versitygw)" object-1kb
echo "# 2. the same stream on a local topic and on Kafka"
run "runnel local topic" "$WORK/disk-1kb.yaml"
stop_serve
RUNNEL_KAFKA_PORT=$KAFKA_PORT "$ROOT/scripts/kafka.sh" start >/dev/null
"$BIN" bench run "$WORK/disk-1kb.yaml" --bootstrap "127.0.0.1:$KAFKA_PORT" --label "kafka 4.1.1" --quiet "${FLAGS[@]}"
echo
RUNNEL_KAFKA_PORT=$KAFKA_PORT "$ROOT/scripts/kafka.sh" clean >/dev/null

echo "# 3. PUTs per second from 1 to 1,000 partitions (5,000 records/s in all, S3)"
serve "s3://runnel/bench?endpoint=$ENDPOINT"
for p in 1 10 100 1000; do
	run "runnel object topic, $p partitions" object-1kb --partitions "$p"
done
stop_serve

echo "# 4. the batch timeout's trade (S3)"
for bt in 50ms 1s; do
	serve "s3://runnel/bench?endpoint=$ENDPOINT" --object-batch-timeout "$bt"
	run "runnel object topic, --object-batch-timeout $bt" object-1kb
	stop_serve
done
