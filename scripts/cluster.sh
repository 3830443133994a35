#!/usr/bin/env bash
# cluster.sh: run a Runnel cluster of N nodes on one machine (loopback, ports side by side), for
# users, tests and benchmarks. Every node is a controller voter and a broker.
#
#   scripts/cluster.sh start [N]        build runnel (once) and start nodes 1..N (default 3)
#   scripts/cluster.sh stop [I]         SIGTERM node I (or every node) and wait for it to exit
#   scripts/cluster.sh kill I           SIGKILL node I (kill -9: no shutdown at all)
#   scripts/cluster.sh pause I          SIGSTOP node I
#   scripts/cluster.sh resume I         SIGCONT node I
#   scripts/cluster.sh restart I        start node I again (after stop or kill), same data dir
#   scripts/cluster.sh status           each node's PID, state and addresses
#   scripts/cluster.sh brokers          the bootstrap list: 127.0.0.1:19192,127.0.0.1:19292,...
#   scripts/cluster.sh sasl-brokers     the SASL_PLAINTEXT listeners' list (RUNNEL_CLUSTER_SASL=1)
#   scripts/cluster.sh clean            stop every node and delete the data directories
#
# Node I listens for Kafka on 127.0.0.1:$((BASE + 100*I + 2)), for the cluster (Raft and
# replication) on port +3, and for admin HTTP (metrics, status) on port +4: with the default
# BASE=19090, node 1 uses 19192/19193/19194, node 2 19292/19293/19294, ...
#
# Environment:
#   RUNNEL_CLUSTER_DIR   where data, logs and PID files go (default ./runnel-cluster)
#   RUNNEL_CLUSTER_BASE  the port base (default 19090)
#   RUNNEL_CLUSTER_SIZE  the voters, when `start` is not given N (default 3)
#   RUNNEL_BIN           the runnel binary (default: built into $RUNNEL_CLUSTER_DIR/runnel)
#   RUNNEL_SERVE_ARGS    extra `runnel serve` flags for every node
#   RUNNEL_CLUSTER_SASL  1: every node also serves SASL_PLAINTEXT on port +7 (users: give one with
#                        RUNNEL_BOOTSTRAP_USER=name:password, which `runnel serve` reads)
#
# Only PIDs this script started (recorded in its PID files) are ever signalled.
set -euo pipefail

DIR=${RUNNEL_CLUSTER_DIR:-./runnel-cluster}
BASE=${RUNNEL_CLUSTER_BASE:-19090}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }

size() {
	if [[ -f "$DIR/size" ]]; then cat "$DIR/size"; else echo "${RUNNEL_CLUSTER_SIZE:-3}"; fi
}
kafka_port() { echo $((BASE + 100 * $1 + 2)); }
cluster_port() { echo $((BASE + 100 * $1 + 3)); }
admin_port() { echo $((BASE + 100 * $1 + 4)); }
speclog_port() { echo $((BASE + 100 * $1 + 6)); }
sasl_port() { echo $((BASE + 100 * $1 + 7)); }
pid_file() { echo "$DIR/node-$1.pid"; }

bin() {
	if [[ -n "${RUNNEL_BIN:-}" ]]; then echo "$RUNNEL_BIN"; return; fi
	if [[ ! -x "$DIR/runnel" ]]; then
		mkdir -p "$DIR"
		(cd "$ROOT" && go build -o "$DIR/runnel" ./cmd/runnel) || die "go build failed"
	fi
	echo "$DIR/runnel"
}

voters() {
	local n out=""
	n=$(size)
	for ((i = 1; i <= n; i++)); do
		out+="${out:+,}$i@127.0.0.1:$(cluster_port "$i")"
	done
	echo "$out"
}

running() { # running I: the node's recorded PID is alive
	local f
	f=$(pid_file "$1")
	[[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

pid_of() {
	running "$1" || die "node $1 is not running"
	cat "$(pid_file "$1")"
}

start_node() {
	local i=$1 b
	b=$(bin)
	running "$i" && die "node $i already runs (PID $(cat "$(pid_file "$i")"))"
	# Another process on the node's ports would answer wait_ready in its place (a cluster of
	# another directory left running): refuse to start instead.
	local port
	for port in "$(kafka_port "$i")" "$(admin_port "$i")"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			die "port $port of node $i is taken by another process (another cluster left running?)"
		fi
	done
	mkdir -p "$DIR/node-$i"
	local kafka=(--kafka-addr "127.0.0.1:$(kafka_port "$i")")
	if [[ -n "${RUNNEL_CLUSTER_SASL:-}" ]]; then
		kafka=(--listeners "PLAINTEXT://127.0.0.1:$(kafka_port "$i"),SASL_PLAINTEXT://127.0.0.1:$(sasl_port "$i")")
	fi
	# shellcheck disable=SC2086
	"$b" serve --node-id "$i" --data-dir "$DIR/node-$i" \
		"${kafka[@]}" --cluster-addr "127.0.0.1:$(cluster_port "$i")" \
		--admin-addr "127.0.0.1:$(admin_port "$i")" --speclog-addr "127.0.0.1:$(speclog_port "$i")" --controller-voters "$(voters)" \
		${RUNNEL_SERVE_ARGS:-} >>"$DIR/node-$i.log" 2>&1 &
	echo $! >"$(pid_file "$i")"
	echo "node $i: PID $!, kafka 127.0.0.1:$(kafka_port "$i"), admin http://127.0.0.1:$(admin_port "$i"), log $DIR/node-$i.log"
}

wait_ready() { # wait_ready I [seconds]
	local i=$1 t=${2:-30}
	for ((k = 0; k < t * 10; k++)); do
		if curl -fs "http://127.0.0.1:$(admin_port "$i")/readyz" >/dev/null 2>&1; then return 0; fi
		running "$i" || die "node $i exited; see $DIR/node-$i.log"
		sleep 0.1
	done
	die "node $i not ready after ${t}s; see $DIR/node-$i.log"
}

cmd_start() {
	local n=${1:-${RUNNEL_CLUSTER_SIZE:-3}}
	mkdir -p "$DIR"
	echo "$n" >"$DIR/size"
	bin >/dev/null
	for ((i = 1; i <= n; i++)); do start_node "$i"; done
	for ((i = 1; i <= n; i++)); do wait_ready "$i"; done
	echo "cluster of $n ready; brokers $(cmd_brokers)"
}

stop_node() {
	local i=$1 pid
	running "$i" || { rm -f "$(pid_file "$i")"; return 0; }
	pid=$(cat "$(pid_file "$i")")
	kill -CONT "$pid" 2>/dev/null || true
	kill -TERM "$pid"
	for ((k = 0; k < 300; k++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && die "node $i (PID $pid) did not exit after SIGTERM"
	rm -f "$(pid_file "$i")"
	echo "node $i stopped"
}

kill_node() { # SIGKILL node I and wait until the process is gone
	local pid
	pid=$(pid_of "$1")
	kill -KILL "$pid"
	for ((k = 0; k < 100; k++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	rm -f "$(pid_file "$1")"
	echo "node $1 killed"
}

cmd_stop() {
	if [[ $# -gt 0 ]]; then stop_node "$1"; return; fi
	local n
	n=$(size)
	for ((i = 1; i <= n; i++)); do stop_node "$i"; done
}

cmd_status() {
	local n
	n=$(size)
	for ((i = 1; i <= n; i++)); do
		local state="down"
		if running "$i"; then
			state="running (PID $(cat "$(pid_file "$i")"))"
			if [[ "$(ps -o state= -p "$(cat "$(pid_file "$i")")" 2>/dev/null)" == T* ]]; then state+=", paused"; fi
		fi
		echo "node $i: $state; kafka 127.0.0.1:$(kafka_port "$i") cluster 127.0.0.1:$(cluster_port "$i") admin 127.0.0.1:$(admin_port "$i")"
	done
}

cmd_brokers() {
	local n out=""
	n=$(size)
	for ((i = 1; i <= n; i++)); do out+="${out:+,}127.0.0.1:$(kafka_port "$i")"; done
	echo "$out"
}

cmd_sasl_brokers() {
	local n out=""
	n=$(size)
	for ((i = 1; i <= n; i++)); do out+="${out:+,}127.0.0.1:$(sasl_port "$i")"; done
	echo "$out"
}

case "${1:-}" in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
kill) [[ $# -eq 2 ]] || die "usage: kill I"; kill_node "$2" ;;
pause) [[ $# -eq 2 ]] || die "usage: pause I"; kill -STOP "$(pid_of "$2")"; echo "node $2 paused" ;;
resume) [[ $# -eq 2 ]] || die "usage: resume I"; kill -CONT "$(pid_of "$2")"; echo "node $2 resumed" ;;
restart) [[ $# -eq 2 ]] || die "usage: restart I"; stop_node "$2" >/dev/null; start_node "$2"; wait_ready "$2" ;;
status) cmd_status ;;
brokers) cmd_brokers ;;
sasl-brokers) cmd_sasl_brokers ;;
clean) cmd_stop >/dev/null 2>&1 || true; rm -rf "$DIR"; echo "removed $DIR" ;;
*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
