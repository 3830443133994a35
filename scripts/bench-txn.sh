#!/usr/bin/env bash
# bench-txn.sh: seed 004's transaction benchmarks (`runnel bench txn`) side by side in one run:
# a three-node Runnel cluster (write.caching=false: every plain acks=all write is fsynced by a
# quorum), then a three-node Apache Kafka 4.1.1 KRaft cluster with flush.messages=1 (as in the
# seed) and with its default (no fsync). RF 3, min.insync.replicas 2 everywhere.
#
#   scripts/bench-txn.sh [runnel bench txn flags...]     e.g. --cycles 500 for a short run
#
# Results go to stdout; progress to stderr. Needs Java for Kafka (scripts/kafka.sh installs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/runnel-bench-txn.XXXXXX)
export RUNNEL_CLUSTER_DIR="$WORK/runnel" RUNNEL_SERVE_ARGS="--log-level warn"
cleanup() {
	"$ROOT/scripts/cluster.sh" clean >/dev/null 2>&1 || true
	"$ROOT/scripts/kafka.sh" cluster-clean >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
BIN="$WORK/runnel-bin"
(cd "$ROOT" && go build -o "$BIN" ./cmd/runnel)
export RUNNEL_BIN="$BIN"

"$ROOT/scripts/cluster.sh" start 3 >/dev/null
"$BIN" bench txn --bootstrap "$("$ROOT/scripts/cluster.sh" brokers)" --label "runnel (write.caching=false)" \
	--topic-config write.caching=false --topic-config min.insync.replicas=2 "$@"
"$ROOT/scripts/cluster.sh" clean >/dev/null

"$ROOT/scripts/kafka.sh" cluster-start 3 >/dev/null
KB=$("$ROOT/scripts/kafka.sh" cluster-brokers)
"$BIN" bench txn --bootstrap "$KB" --label "kafka 4.1.1 (flush.messages=1)" \
	--topic-config flush.messages=1 --topic-config min.insync.replicas=2 "$@"
"$BIN" bench txn --bootstrap "$KB" --label "kafka 4.1.1 (default)" --topic-config min.insync.replicas=2 "$@"
