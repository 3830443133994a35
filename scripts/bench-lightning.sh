#!/usr/bin/env bash
# bench-lightning.sh: classic (eager) and lightning (runnel.sequencing=lazy) object topics side
# by side in one run, on the same store and batch timeout (issue 15): the local directory,
# versitygw (S3), and versitygw behind the fault wrapper's 10-20 ms per request (S3 Express-like).
# One broker process per store; the two topic kinds alternate, ROUNDS times each.
#
#   scripts/bench-lightning.sh [--duration 20s] [--warmup 5s]   (any `runnel bench run` flags)
#
# Environment: BATCH_TIMEOUT (default 50ms, the low-latency configuration where the commit
# matters), ROUNDS (default 2). Results go to stdout.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/runnel-bench-lightning.XXXXXX)
BATCH_TIMEOUT=${BATCH_TIMEOUT:-50ms}
ROUNDS=${ROUNDS:-2}
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	"$ROOT/scripts/s3server.sh" stop "$WORK/s3" || true
	rm -rf "$WORK"
}
trap cleanup EXIT
BIN="$WORK/runnel-bin"
(cd "$ROOT" && go build -o "$BIN" ./cmd/runnel)
FLAGS=("$@")
[[ ${#FLAGS[@]} -eq 0 ]] && FLAGS=(--duration 20s --warmup 5s)

mkdir -p "$WORK/s3/root/runnel"
ENDPOINT=$("$ROOT/scripts/s3server.sh" start "$WORK/s3" 27071)
export AWS_ACCESS_KEY_ID=runnel-test AWS_SECRET_ACCESS_KEY=runnel-test-secret AWS_REGION=us-east-1

serve() { # STORE [flags...]
	local store=$1
	shift
	rm -rf "$WORK/data"
	"$BIN" serve --data-dir "$WORK/data" --kafka-addr 127.0.0.1:29092 --cluster-addr 127.0.0.1:29093 \
		--admin-addr 127.0.0.1:29644 --speclog-addr 127.0.0.1:0 --log-level warn --object-store "$store" --object-batch-timeout "$BATCH_TIMEOUT" \
		"$@" >>"$WORK/serve.log" 2>&1 &
	SERVE_PID=$!
	PIDS+=("$SERVE_PID")
	for _ in $(seq 1 100); do
		curl -sf http://127.0.0.1:29644/readyz >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench-lightning.sh: runnel did not start; see $WORK/serve.log" >&2
	exit 1
}
stop_serve() {
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null || true
}
pair() { # STORE-LABEL
	for round in $(seq 1 "$ROUNDS"); do
		for kind in classic lightning; do
			local extra=()
			[[ $kind == lightning ]] && extra=(--topic-config runnel.sequencing=lazy)
			echo "== $1, $kind, round $round" >&2
			"$BIN" bench run object-1kb --bootstrap 127.0.0.1:29092 --metrics 127.0.0.1:29644 \
				--label "$kind, $1, batch timeout $BATCH_TIMEOUT, round $round" --quiet "${FLAGS[@]}" "${extra[@]}"
			echo
		done
	done
}

serve "file://$WORK/objects"
pair "file:// store"
stop_serve
serve "s3://runnel/bench?endpoint=$ENDPOINT"
pair "S3 (versitygw)"
stop_serve
serve "s3://runnel/bench?endpoint=$ENDPOINT" --enable-fault-injection
curl -sf -X POST -d '{"object_store_faults": {"latency_ms": 10, "jitter_ms": 10}}' http://127.0.0.1:29644/v1/debug/faults >/dev/null
pair "S3 + 10-20 ms per request"
stop_serve
