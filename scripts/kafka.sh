#!/usr/bin/env bash
# kafka.sh: install Apache Kafka from Maven Central and run it as a single-node KRaft
# broker+controller on loopback, for `runnel bench compare`.
#
#   scripts/kafka.sh install            fetch kafka_2.13 + kafka-tools and their runtime deps
#   scripts/kafka.sh start [k=v ...]    format (first time) and start; extra broker properties
#                                       come from the arguments and from $RUNNEL_KAFKA_PROPS
#   scripts/kafka.sh stop               stop the broker started by `start` (only that PID)
#   scripts/kafka.sh status             print whether it runs, its PID, port and log
#   scripts/kafka.sh clean              stop, then delete the data directory
#
# A cluster of N combined broker+controller nodes (a static KRaft quorum of all N; replication
# factor 3 and min.insync.replicas 2 by default, as a production cluster would have):
#
#   scripts/kafka.sh cluster-start [N] [k=v ...]  format (first time) and start nodes 1..N (default 3)
#   scripts/kafka.sh cluster-stop [I]             stop node I, or every node
#   scripts/kafka.sh cluster-kill I               SIGKILL node I
#   scripts/kafka.sh cluster-restart I            start node I again
#   scripts/kafka.sh cluster-brokers              the bootstrap list
#   scripts/kafka.sh cluster-clean                stop every node and delete the cluster's data
#
# Cluster node I's client port is RUNNEL_KAFKA_CLUSTER_BASE + 100*I + 2 and its controller port
# one more (default base 29090: node 1 on 29192, node 2 on 29292, ...).
#
# Environment:
#   RUNNEL_KAFKA_VERSION  Kafka version (default 4.1.1)
#   RUNNEL_KAFKA_HOME     install dir (default $HOME/.cache/runnel/kafka-$VERSION)
#   RUNNEL_KAFKA_PORT     client (PLAINTEXT) port on 127.0.0.1 (default 19092); the
#                         controller listens on port+1
#   RUNNEL_KAFKA_DATA     log dir (default $RUNNEL_KAFKA_HOME/data-$PORT); reformatted by
#                         `start` when it holds no meta.properties
#   RUNNEL_KAFKA_PROPS    extra server.properties lines, space separated k=v, e.g.
#                         "log.flush.interval.messages=1" for a broker that fsyncs every record
#   RUNNEL_KAFKA_HEAP     JVM heap options (default "-Xms1g -Xmx1g", as kafka-server-start.sh)
#   JAVA                  the java binary (default: java on PATH; Kafka 4.x needs Java 17+)
#
# Nothing here is downloaded except through Maven (`mvn dependency:copy-dependencies`), and
# nothing listens on anything but 127.0.0.1.
set -euo pipefail

VERSION=${RUNNEL_KAFKA_VERSION:-4.1.1}
HOME_DIR=${RUNNEL_KAFKA_HOME:-${HOME}/.cache/runnel/kafka-${VERSION}}
PORT=${RUNNEL_KAFKA_PORT:-19092}
CONTROLLER_PORT=$((PORT + 1))
DATA_DIR=${RUNNEL_KAFKA_DATA:-${HOME_DIR}/data-${PORT}}
RUN_DIR=${HOME_DIR}/run
PID_FILE=${RUN_DIR}/kafka-${PORT}.pid
LOG_FILE=${RUN_DIR}/kafka-${PORT}.log
PROPS_FILE=${RUN_DIR}/server-${PORT}.properties
LOG4J_FILE=${RUN_DIR}/log4j2.xml
JAVA=${JAVA:-java}
HEAP=${RUNNEL_KAFKA_HEAP:--Xms1g -Xmx1g}
# log4j2 2.24.3 and its slf4j 1.x binding (slf4j-api resolves to 1.7.36) are what Kafka 4.1 ships; kafka's
# published poms leave the slf4j binding out, so without it the broker would log nothing.
LOG4J_VERSION=2.24.3

die() { echo "kafka.sh: $*" >&2; exit 1; }
log() { echo "kafka.sh: $*" >&2; }

cmd_install() {
	command -v mvn >/dev/null || die "mvn not found on PATH"
	command -v "$JAVA" >/dev/null || die "java not found ($JAVA)"
	if [[ -f "${HOME_DIR}/lib/.complete" ]]; then
		log "Kafka ${VERSION} already installed in ${HOME_DIR}"
		return
	fi
	mkdir -p "${HOME_DIR}/fetch"
	cat >"${HOME_DIR}/fetch/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.runnel.bench</groupId>
  <artifactId>kafka-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${VERSION}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>${VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>${LOG4J_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>${LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
EOF
	log "fetching Kafka ${VERSION} and its runtime dependencies from Maven Central into ${HOME_DIR}/lib"
	rm -rf "${HOME_DIR}/lib"
	mvn -B -q -Dstyle.color=never -f "${HOME_DIR}/fetch/pom.xml" \
		-Dmaven.repo.local="${HOME_DIR}/m2" \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="${HOME_DIR}/lib"
	ls "${HOME_DIR}"/lib/kafka_2.13-"${VERSION}".jar >/dev/null || die "kafka_2.13-${VERSION}.jar missing after fetch"
	touch "${HOME_DIR}/lib/.complete"
	log "installed: $(ls "${HOME_DIR}/lib" | wc -l) jars in ${HOME_DIR}/lib"
}

# storage_tool_class prints the main class of kafka-storage.sh in this version.
storage_tool_class() {
	local jar
	for cls in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
		for jar in "${HOME_DIR}"/lib/kafka*.jar; do
			if unzip -l "$jar" "${cls//.//}.class" >/dev/null 2>&1; then
				echo "$cls"
				return
			fi
		done
	done
	die "no StorageTool class found in ${HOME_DIR}/lib"
}

# running succeeds if the PID file names a live Kafka process started by this script.
running() {
	[[ -f "$PID_FILE" ]] || return 1
	local pid
	pid=$(cat "$PID_FILE")
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a recycled PID: the process must be our java with our properties file.
	tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q -- "kafka.Kafka ${PROPS_FILE}"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_config() {
	mkdir -p "$RUN_DIR" "$DATA_DIR"
	cat >"$PROPS_FILE" <<EOF
# written by scripts/kafka.sh: single-node KRaft broker+controller on loopback
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${CONTROLLER_PORT}
listeners=PLAINTEXT://127.0.0.1:${PORT},CONTROLLER://127.0.0.1:${CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:${PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${DATA_DIR}
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
	local kv
	for kv in ${RUNNEL_KAFKA_PROPS:-} "$@"; do
		[[ "$kv" == *=* ]] || die "extra property ${kv}: want key=value"
		echo "$kv" >>"$PROPS_FILE"
	done
	write_log4j
}

write_log4j() {
	mkdir -p "$RUN_DIR"
	cat >"$LOG4J_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers><Root level="info"><AppenderRef ref="out"/></Root></Loggers>
</Configuration>
EOF
}

cmd_start() {
	[[ -f "${HOME_DIR}/lib/.complete" ]] || die "not installed: run $0 install"
	if running; then
		die "already running (pid $(cat "$PID_FILE")) on 127.0.0.1:${PORT}"
	fi
	port_open "$PORT" && die "127.0.0.1:${PORT} is in use by another process"
	write_config "$@"
	local cp="${HOME_DIR}/lib/*"
	if [[ ! -f "${DATA_DIR}/meta.properties" ]]; then
		local tool id
		tool=$(storage_tool_class)
		id=$("$JAVA" -cp "$cp" "$tool" random-uuid)
		log "formatting ${DATA_DIR} with cluster id ${id} (${tool})"
		"$JAVA" -Dlog4j2.configurationFile="$LOG4J_FILE" -cp "$cp" "$tool" format \
			-t "$id" -c "$PROPS_FILE" --ignore-formatted >>"$LOG_FILE" 2>&1 ||
			die "format failed; see ${LOG_FILE}"
	fi
	# JVM options as kafka-run-class.sh sets them for the broker.
	# shellcheck disable=SC2086
	nohup "$JAVA" $HEAP -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J_FILE" \
		-Dkafka.logs.dir="$RUN_DIR" \
		-cp "$cp" kafka.Kafka "$PROPS_FILE" >>"$LOG_FILE" 2>&1 </dev/null &
	local pid=$!
	echo "$pid" >"$PID_FILE"
	for _ in $(seq 1 120); do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$PID_FILE"
			tail -n 30 "$LOG_FILE" >&2
			die "Kafka exited during startup; see ${LOG_FILE}"
		fi
		if port_open "$PORT"; then
			log "Kafka ${VERSION} up on 127.0.0.1:${PORT} (pid ${pid}, log ${LOG_FILE}, data ${DATA_DIR})"
			return
		fi
		sleep 0.5
	done
	die "Kafka did not open 127.0.0.1:${PORT} within 60 s; see ${LOG_FILE} (pid ${pid} left running)"
}

cmd_stop() {
	if ! running; then
		rm -f "$PID_FILE"
		log "not running (port ${PORT})"
		return
	fi
	local pid
	pid=$(cat "$PID_FILE")
	kill -TERM "$pid"
	for _ in $(seq 1 60); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$PID_FILE"; log "stopped pid ${pid}"; return; }
		sleep 0.5
	done
	log "pid ${pid} ignored SIGTERM for 30 s; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$PID_FILE"
}

cmd_status() {
	if running; then
		echo "running pid=$(cat "$PID_FILE") addr=127.0.0.1:${PORT} log=${LOG_FILE} data=${DATA_DIR}"
	else
		echo "stopped addr=127.0.0.1:${PORT} home=${HOME_DIR}"
		return 1
	fi
}

cmd_clean() {
	cmd_stop
	rm -rf "$DATA_DIR"
	log "deleted ${DATA_DIR}"
}

CLUSTER_BASE=${RUNNEL_KAFKA_CLUSTER_BASE:-29090}
CLUSTER_DIR=${HOME_DIR}/cluster-${CLUSTER_BASE}

cluster_size() { if [[ -f "$CLUSTER_DIR/size" ]]; then cat "$CLUSTER_DIR/size"; else echo 3; fi; }
cluster_port() { echo $((CLUSTER_BASE + 100 * $1 + 2)); }
cluster_pid_file() { echo "$CLUSTER_DIR/node-$1.pid"; }
cluster_running() {
	local f pid
	f=$(cluster_pid_file "$1")
	[[ -f "$f" ]] || return 1
	pid=$(cat "$f")
	kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q -- "kafka.Kafka $CLUSTER_DIR/node-$1.properties"
}

cluster_node_start() {
	local i=$1 n port cport voters="" cp="${HOME_DIR}/lib/*" props nlog kv
	n=$(cluster_size)
	port=$(cluster_port "$i")
	cport=$((port + 1))
	for ((k = 1; k <= n; k++)); do voters+="${voters:+,}$k@127.0.0.1:$(($(cluster_port "$k") + 1))"; done
	cluster_running "$i" && die "cluster node $i already runs"
	props="$CLUSTER_DIR/node-$i.properties"
	nlog="$CLUSTER_DIR/node-$i.log"
	mkdir -p "$CLUSTER_DIR/data-$i"
	{
		echo "# written by scripts/kafka.sh: cluster node $i of $n, KRaft broker+controller on loopback"
		echo "process.roles=broker,controller"
		echo "node.id=$i"
		echo "controller.quorum.voters=$voters"
		echo "listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}"
		echo "advertised.listeners=PLAINTEXT://127.0.0.1:${port}"
		echo "controller.listener.names=CONTROLLER"
		echo "inter.broker.listener.name=PLAINTEXT"
		echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
		echo "log.dirs=$CLUSTER_DIR/data-$i"
		echo "num.partitions=1"
		echo "default.replication.factor=3"
		echo "min.insync.replicas=2"
		echo "offsets.topic.replication.factor=3"
		echo "transaction.state.log.replication.factor=3"
		echo "transaction.state.log.min.isr=2"
		echo "share.coordinator.state.topic.replication.factor=3"
		echo "share.coordinator.state.topic.min.isr=2"
		echo "group.initial.rebalance.delay.ms=0"
		for kv in ${RUNNEL_KAFKA_PROPS:-} $(cat "$CLUSTER_DIR/extra-props" 2>/dev/null); do
			[[ "$kv" == *=* ]] || die "extra property ${kv}: want key=value"
			echo "$kv"
		done
	} >"$props"
	write_log4j
	if [[ ! -f "$CLUSTER_DIR/data-$i/meta.properties" ]]; then
		"$JAVA" -Dlog4j2.configurationFile="$LOG4J_FILE" -cp "$cp" "$(storage_tool_class)" format \
			-t "$(cat "$CLUSTER_DIR/cluster-id")" -c "$props" --ignore-formatted >>"$nlog" 2>&1 ||
			die "format of node $i failed; see $nlog"
	fi
	# shellcheck disable=SC2086
	nohup "$JAVA" $HEAP -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J_FILE" \
		-Dkafka.logs.dir="$CLUSTER_DIR" -cp "$cp" kafka.Kafka "$props" >>"$nlog" 2>&1 </dev/null &
	echo $! >"$(cluster_pid_file "$i")"
}

cluster_wait() {
	local i=$1
	for _ in $(seq 1 120); do
		cluster_running "$i" || die "cluster node $i exited during startup; see $CLUSTER_DIR/node-$i.log"
		port_open "$(cluster_port "$i")" && return
		sleep 0.5
	done
	die "cluster node $i did not open its port within 60 s"
}

cmd_cluster_start() {
	[[ -f "${HOME_DIR}/lib/.complete" ]] || die "not installed: run $0 install"
	local n=3
	if [[ "${1:-}" =~ ^[0-9]+$ ]]; then n=$1; shift; fi
	mkdir -p "$CLUSTER_DIR" "$RUN_DIR"
	echo "$n" >"$CLUSTER_DIR/size"
	printf '%s\n' "$@" >"$CLUSTER_DIR/extra-props"
	if [[ ! -f "$CLUSTER_DIR/cluster-id" ]]; then
		"$JAVA" -cp "${HOME_DIR}/lib/*" "$(storage_tool_class)" random-uuid >"$CLUSTER_DIR/cluster-id"
	fi
	for ((i = 1; i <= n; i++)); do cluster_node_start "$i"; done
	for ((i = 1; i <= n; i++)); do cluster_wait "$i"; done
	log "Kafka ${VERSION} cluster of $n up: $(cmd_cluster_brokers)"
}

cluster_node_stop() {
	local i=$1 pid
	cluster_running "$i" || { rm -f "$(cluster_pid_file "$i")"; return 0; }
	pid=$(cat "$(cluster_pid_file "$i")")
	kill -CONT "$pid" 2>/dev/null || true
	kill -TERM "$pid"
	for _ in $(seq 1 60); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$(cluster_pid_file "$i")"; return 0; }
		sleep 0.5
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$(cluster_pid_file "$i")"
}

cmd_cluster_stop() {
	if [[ $# -gt 0 ]]; then cluster_node_stop "$1"; return; fi
	local n
	n=$(cluster_size)
	for ((i = 1; i <= n; i++)); do cluster_node_stop "$i"; done
}

cmd_cluster_brokers() {
	local n out=""
	n=$(cluster_size)
	for ((i = 1; i <= n; i++)); do out+="${out:+,}127.0.0.1:$(cluster_port "$i")"; done
	echo "$out"
}

case "${1:-}" in
cluster-start) shift; cmd_cluster_start "$@" ;;
cluster-stop) shift; cmd_cluster_stop "$@" ;;
cluster-kill)
	[[ $# -eq 2 ]] || die "usage: cluster-kill I"
	cluster_running "$2" || die "cluster node $2 is not running"
	pid=$(cat "$(cluster_pid_file "$2")")
	kill -KILL "$pid"
	for ((k = 0; k < 100; k++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	rm -f "$(cluster_pid_file "$2")"
	log "cluster node $2 killed"
	;;
cluster-restart) [[ $# -eq 2 ]] || die "usage: cluster-restart I"; cluster_node_stop "$2"; cluster_node_start "$2"; cluster_wait "$2" ;;
cluster-brokers) cmd_cluster_brokers ;;
cluster-clean) cmd_cluster_stop; rm -rf "$CLUSTER_DIR"; log "deleted $CLUSTER_DIR" ;;
install) cmd_install ;;
start) shift; cmd_start "$@" ;;
stop) cmd_stop ;;
status) cmd_status ;;
clean) cmd_clean ;;
*) die "usage: $0 {install|start [k=v ...]|stop|status|clean|cluster-start [N] [k=v ...]|cluster-stop [I]|cluster-kill I|cluster-restart I|cluster-brokers|cluster-clean}" ;;
esac
