#!/usr/bin/env bash
# kgo-tests.sh: run franz-go's own client integration tests (package pkg/kgo, which ships in the
# franz-go module this repo uses) against a Runnel cluster on loopback, as a new user would:
# KGO_SEEDS pointing at Runnel.
#
#   scripts/kgo-tests.sh [NODES] [go test flags...]
#
# NODES is 1 (default: one node, KGO_TEST_RF=1) or 3 (three nodes, KGO_TEST_RF=3). Extra flags
# go to `go test`, e.g. -run TestTxnEtl -v. The cluster runs under a temporary directory and
# is stopped and removed at the end; the exit status is go test's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODES=${1:-1}
[[ $# -gt 0 ]] && shift
case "$NODES" in
1 | 3) ;;
*) echo "kgo-tests.sh: NODES must be 1 or 3" >&2; exit 2 ;;
esac

WORK=$(mktemp -d /tmp/runnel-kgo.XXXXXX)
export RUNNEL_CLUSTER_DIR="$WORK/cluster"
# Below the ephemeral port range (32768+ on Linux), so no outgoing connection holds a node's port.
export RUNNEL_CLUSTER_BASE=${RUNNEL_CLUSTER_BASE:-28090}
export RUNNEL_SERVE_ARGS="${RUNNEL_SERVE_ARGS:---log-level warn}"
# Every node also serves SASL_PLAINTEXT with a SCRAM user, for TestSCRAMAuth and
# TestSCRAMAuthBadCredentials (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM).
export RUNNEL_CLUSTER_SASL=1 RUNNEL_BOOTSTRAP_USER=kgo-scram:kgo-scram-secret
cleanup() {
	"$ROOT/scripts/cluster.sh" clean >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

if ! "$ROOT/scripts/cluster.sh" start "$NODES" >/dev/null; then
	tail -n 30 "$RUNNEL_CLUSTER_DIR"/node-*.log >&2 || true
	exit 1
fi
SEEDS=$("$ROOT/scripts/cluster.sh" brokers)
SCRAM_SEEDS=$("$ROOT/scripts/cluster.sh" sasl-brokers)

# A writable copy of the module's source (the module cache is read-only).
MOD=$(cd "$ROOT" && go list -m -f '{{.Dir}}' github.com/twmb/franz-go)
cp -r "$MOD" "$WORK/franz-go"
chmod -R u+w "$WORK/franz-go"

echo "kgo-tests: franz-go $(cd "$ROOT" && go list -m -f '{{.Version}}' github.com/twmb/franz-go) pkg/kgo against $NODES Runnel node(s) at $SEEDS"
cd "$WORK/franz-go"
KGO_SEEDS="$SEEDS" KGO_TEST_SCRAM_SEEDS="$SCRAM_SEEDS" KGO_TEST_SCRAM=kgo-scram:kgo-scram-secret:256 \
	KGO_TEST_RF="$NODES" KGO_LOG_LEVEL=none go test ./pkg/kgo -count=1 -timeout 20m "$@"
