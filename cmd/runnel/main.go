// Command runnel is the Runnel server and its tools; see `runnel --help`.
package main

import (
	"os"

	"github.com/runnel-dev/runnel/internal/cli"
)

// version is set at build time: go build -ldflags "-X main.version=v0.1.0" ./cmd/runnel
var version = "dev"

func main() { os.Exit(cli.Main(version)) }
