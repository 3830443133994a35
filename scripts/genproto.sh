#!/usr/bin/env bash
# Regenerates the SpecLog API's Go code from speclog/speclogpb/speclog.proto. The generated
# files are committed: builds and CI do not need protoc. Needs protoc (Debian:
# protobuf-compiler) and, on PATH:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -euo pipefail
cd "$(dirname "$0")/.."
protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	speclog/speclogpb/speclog.proto
