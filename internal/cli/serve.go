package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runnel-dev/runnel/internal/gctune"
	"github.com/runnel-dev/runnel/internal/server"
)

// serveFlags are the flags of `runnel serve`.
type serveFlags struct {
	dataDir             string
	kafkaAddr           string
	advertisedKafkaAddr string
	nodeID              int32
	adminAddr           string
	logLevel            string
	logFormat           string
	slowRequest         time.Duration
	gcHeadroomMiB       uint64
}

func (f *serveFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&f.dataDir, "data-dir", "./runnel-data", "directory holding this node's data")
	flags.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "host:port the Kafka listener binds")
	flags.StringVar(&f.advertisedKafkaAddr, "advertised-kafka-addr", "", "host:port clients are told to connect to (default: --kafka-addr)")
	flags.Int32Var(&f.nodeID, "node-id", 0, "this node's broker id")
	flags.StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:9644", "host:port of the admin HTTP server (metrics, health)")
	flags.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	flags.StringVar(&f.logFormat, "log-format", "text", "text or json")
	flags.DurationVar(&f.slowRequest, "slow-request-threshold", 500*time.Millisecond, "log Kafka requests that take longer (0: none)")
	flags.Uint64Var(&f.gcHeadroomMiB, "gc-headroom-mib", 256, "MiB the Go heap may grow past its live size before a GC cycle (0: plain GOGC; a set GOGC wins)")
	flags.String("config", "", `file of "flag-name: value" lines; flags and environment variables win over it`)
	flags.SetAnnotation("config", configFileAnnotation, []string{"true"})
}

// config turns the flags into a server configuration; logs go to logOut, notices to console.
func (f *serveFlags) config(logOut, console io.Writer) (server.Config, error) {
	logger, err := newLogger(logOut, f.logLevel, f.logFormat)
	if err != nil {
		return server.Config{}, err
	}
	cfg := server.Config{
		DataDir: f.dataDir, KafkaAddr: f.kafkaAddr, AdvertisedKafkaAddr: f.advertisedKafkaAddr,
		NodeID: f.nodeID, AdminAddr: f.adminAddr, Logger: logger, Console: console,
		SlowRequestThreshold: f.slowRequest,
	}
	if f.slowRequest <= 0 {
		cfg.SlowRequestThreshold = -1 // the flag's 0 means off; the config's 0 means the default
	}
	return cfg, cfg.Validate()
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid log format %q: want text or json", format)
}

func newServeCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Runnel node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd.ErrOrStderr(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			slog.SetDefault(cfg.Logger)
			defer gctune.Start(f.gcHeadroomMiB << 20).Stop()
			return serve(cmd.Context(), cfg)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// serve runs a server until SIGINT or SIGTERM, then closes it. A second signal during the
// shutdown kills the process.
func serve(ctx context.Context, cfg server.Config) error {
	s, err := server.Open(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	// Once the first signal has cancelled ctx, stop catching them: a second one during the
	// drain gets the default action and ends the process.
	context.AfterFunc(ctx, stop)
	runErr := s.Run(ctx)
	stop()
	cfg.Logger.Info("shutting down")
	if err := s.Close(); err != nil {
		return err
	}
	return runErr
}
