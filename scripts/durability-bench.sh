#!/usr/bin/env bash
# Produce latency of acks=all with and without write caching, at 5k and 20k records/s of 1 KiB,
# against a fresh `runnel serve`, next to the disk's own fsync latency measured in the same run,
# and the fsync rate against the record rate (from /metrics). Produce only (no consumer): the
# client shares the machine's cores with the broker, and a consumer's CPU would show up as
# produce latency. The results go in docs/benchmarks.md#durability. Run it alone on the machine.
#
#   scripts/durability-bench.sh            # 5 s warm-up, 20 s measured per run
#   DURATION=60s WARMUP=10s scripts/durability-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-20s}"
WARMUP="${WARMUP:-5s}"
PORT="${PORT:-29092}"
ADMIN="${ADMIN:-29644}"
work="$(mktemp -d "${TMPDIR:-/tmp}/runnel-durability.XXXXXX")"
bin="$work/runnel"
go build -o "$bin" ./cmd/runnel
"$bin" serve --data-dir "$work/data" --kafka-addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN" --speclog-addr 127.0.0.1:0 --log-level warn >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$ADMIN/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
syncs() { curl -fs "http://127.0.0.1:$ADMIN/metrics" | awk '$1 == "runnel_flush_syncs_total" { print $2 }'; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, data dir on $(df -T "$work" | awk 'NR==2 {print $2}')"
echo "disk before: $("$bin" bench fsync --dir "$work/data" --count 3000)"
printf '\n| rate | write.caching | produce p50 | p90 | p99 | p99.9 | max | fsyncs/s | records/s | records per fsync | errors |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for rate in 5000 20000; do
	for wc in false true; do
		before="$(syncs)"
		start="$(date +%s.%N)"
		"$bin" bench run --workload latency-1kb --bootstrap "127.0.0.1:$PORT" --rate "$rate" --linger 0 --consumers 0 \
			--topic-config "write.caching=$wc" --warmup "$WARMUP" --duration "$DURATION" --quiet --json >"$work/run.json"
		end="$(date +%s.%N)"
		after="$(syncs)"
		python3 - "$work/run.json" "$rate" "$wc" "$before" "$after" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rate, wc, s0, s1, t0, t1 = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
p, c = r["produce_latency"], r["records"]
secs = t1 - t0  # the whole run (warm-up included), as the counter covers it
fsyncs = (s1 - s0) / secs
recs = c["acked"] / secs
print("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %.1f | %d |" % (
    rate, wc, p["p50_ms"], p["p90_ms"], p["p99_ms"], p["p99_9_ms"], p["max_ms"],
    fsyncs, recs, recs / fsyncs if fsyncs else float("inf"), c["produce_errors"]))
PY
	done
done
echo
echo "disk after: $("$bin" bench fsync --dir "$work/data" --count 3000)"
