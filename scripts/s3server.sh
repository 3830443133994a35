#!/usr/bin/env bash
# s3server.sh: a real S3-compatible server on loopback for tests and benchmarks: versitygw
# (pinned, built from the Go module proxy; MinIO's server is archived), serving a local
# directory through its posix backend.
#
#   scripts/s3server.sh install            build versitygw into $RUNNEL_TOOLS_DIR/bin if missing
#   scripts/s3server.sh start DIR [PORT]   serve DIR on 127.0.0.1:PORT (default 7070), wait until it
#                                          accepts, print its endpoint; its PID goes to DIR.pid
#   scripts/s3server.sh stop DIR           stop the server started for DIR
#
# Credentials: ROOT access key "runnel-test", secret "runnel-test-secret" (export them as
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for clients); region us-east-1, path-style URLs.
set -euo pipefail
VERSION=v1.8.0 # 1.8.0 or later: earlier versions check If-None-Match before the write, racily
TOOLS=${RUNNEL_TOOLS_DIR:-$HOME/.cache/runnel-tools}
BIN="$TOOLS/bin/versitygw-$VERSION"

install() {
	if [[ -x "$BIN" ]]; then
		return
	fi
	mkdir -p "$TOOLS/bin" "$TOOLS/build"
	echo "s3server.sh: building versitygw $VERSION (once; a minute or more)" >&2
	(cd "$TOOLS/build" && CGO_ENABLED=0 GOBIN="$TOOLS/build/bin" GOFLAGS=-mod=mod \
		nice -n 10 go install -p 1 "github.com/versity/versitygw/cmd/versitygw@$VERSION")
	mv "$TOOLS/build/bin/versitygw" "$BIN"
}

case "${1:-}" in
install)
	install
	;;
start)
	DIR=${2:?usage: s3server.sh start DIR [PORT]}
	PORT=${3:-7070}
	install
	mkdir -p "$DIR/root"
	ROOT_ACCESS_KEY=runnel-test ROOT_SECRET_KEY=runnel-test-secret \
		"$BIN" --port "127.0.0.1:$PORT" posix "$DIR/root" >"$DIR/versitygw.log" 2>&1 &
	echo $! >"$DIR.pid"
	for _ in $(seq 1 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
			echo "http://127.0.0.1:$PORT"
			exit 0
		fi
		if ! kill -0 "$(cat "$DIR.pid")" 2>/dev/null; then
			cat "$DIR/versitygw.log" >&2
			exit 1
		fi
		sleep 0.05
	done
	echo "s3server.sh: versitygw did not start listening on 127.0.0.1:$PORT" >&2
	exit 1
	;;
stop)
	DIR=${2:?usage: s3server.sh stop DIR}
	if [[ -f "$DIR.pid" ]]; then
		kill "$(cat "$DIR.pid")" 2>/dev/null || true
		rm -f "$DIR.pid"
	fi
	;;
*)
	sed -n '2,13p' "$0" >&2
	exit 2
	;;
esac
