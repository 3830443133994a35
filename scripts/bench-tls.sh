#!/usr/bin/env bash
# bench-tls.sh: the cost of TLS on one node, in one run: throughput-1kb (maximum rate, a consumer
# reading along) and latency-1kb (10k records/s), alternating a PLAINTEXT and an SSL listener of
# the same `runnel serve`, two rounds each. Results (JSON) go to $OUT (default ./bench-tls).
#
#   scripts/bench-tls.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${OUT:-./bench-tls}")
mkdir -p "$OUT"
(cd "$ROOT" && go build -o "$OUT/runnel" ./cmd/runnel)
cd "$OUT"
RUNNEL=./runnel
rm -rf data pki; mkdir pki
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout pki/ca.key -out pki/ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout pki/server.key -out pki/server.csr -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > pki/ext
openssl x509 -req -in pki/server.csr -CA pki/ca.pem -CAkey pki/ca.key -CAcreateserial -out pki/server.pem -days 2 -extfile pki/ext 2>/dev/null
$RUNNEL serve --data-dir data --listeners PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19094 --tls-cert-file pki/server.pem --tls-key-file pki/server.key --admin-addr 127.0.0.1:19644 --cluster-addr 127.0.0.1:19093 --speclog-addr "" --log-level warn > serve.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs http://127.0.0.1:19644/readyz >/dev/null 2>&1 && break; sleep 0.1; done
for round in 1 2; do
  $RUNNEL bench run throughput-1kb --bootstrap 127.0.0.1:19092 --label plaintext --duration 20s --warmup 5s --quiet --json > tp-plain-$round.json
  $RUNNEL bench run throughput-1kb --bootstrap 127.0.0.1:19094 --label tls --tls --tls-ca-file pki/ca.pem --duration 20s --warmup 5s --quiet --json > tp-tls-$round.json
done
for round in 1 2; do
  $RUNNEL bench run latency-1kb --bootstrap 127.0.0.1:19092 --label plaintext --duration 20s --warmup 5s --quiet --json > lat-plain-$round.json
  $RUNNEL bench run latency-1kb --bootstrap 127.0.0.1:19094 --label tls --tls --tls-ca-file pki/ca.pem --duration 20s --warmup 5s --quiet --json > lat-tls-$round.json
done
kill $PID
wait $PID || true
for f in tp-*.json lat-*.json; do
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); t=d['throughput']; p=d['produce_latency']; e=d['e2e_latency']; print('%-16s produce %6.0f MB/s consume %6.0f MB/s  produce p50 %.2f p99 %.2f ms  e2e p50 %.2f p99 %.2f ms' % (sys.argv[1][:-5], t['produce_mb_per_sec'], t['consume_mb_per_sec'], p['p50_ms'], p['p99_ms'], e['p50_ms'], e['p99_ms']))" "$f"
done
