// Package server is one Runnel node: it owns the data directory and everything opened from it.
//
// Data directory layout (only the parts that exist today):
//
//	<data-dir>/
//	  LOCK                          flock'ed by the running server; holds its process id
//	  topics/<topic>/<partition>/   one logstore.Log per partition (partition: decimal, from 0)
//
// Today a Server locks the data directory, recovers every partition log in it and waits; the
// Kafka listener, the admin HTTP server and the controller will be started by Run.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Config is what a Server needs to start. The zero value is not valid; see Validate.
type Config struct {
	DataDir             string // created if missing
	KafkaAddr           string // host:port the Kafka listener binds
	AdvertisedKafkaAddr string // host:port clients are told to connect to; "" means KafkaAddr
	NodeID              int32  // this node's broker id, >= 0
	AdminAddr           string // host:port of the admin HTTP server (metrics, health)

	Logger  *slog.Logger // defaults to slog.Default()
	Console io.Writer    // plain-text notices for the operator; defaults to os.Stderr
}

// Validate reports the first setting that is missing or malformed.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("server: data dir is empty")
	}
	if c.NodeID < 0 {
		return fmt.Errorf("server: node id %d is negative", c.NodeID)
	}
	if err := checkAddr("kafka addr", c.KafkaAddr); err != nil {
		return err
	}
	if c.AdvertisedKafkaAddr != "" {
		if err := checkAddr("advertised kafka addr", c.AdvertisedKafkaAddr); err != nil {
			return err
		}
	}
	return checkAddr("admin addr", c.AdminAddr)
}

func checkAddr(what, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("server: %s %q is not host:port: %w", what, addr, err)
	}
	return nil
}

// PartitionState describes one open partition log.
type PartitionState struct {
	Topic       string
	Partition   int32
	StartOffset int64 // log start offset
	EndOffset   int64 // log end offset: the offset the next record gets
	SizeBytes   int64
}

type partition struct {
	topic string
	index int32
	log   *logstore.Log
}

// Server is one node. Open it, Run it until its context ends, then Close it.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	lock    *dirLock
	flusher *logstore.Flusher
	maint   *logstore.Maintainer // retention and compaction, started by Run
	parts   []partition          // sorted by topic, then partition
	closed  bool
}

// Open validates cfg, creates and locks the data directory, and opens (recovering) every
// partition log in it. It fails with ErrDataDirLocked if another server holds the directory.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.AdvertisedKafkaAddr == "" {
		cfg.AdvertisedKafkaAddr = cfg.KafkaAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Console == nil {
		cfg.Console = os.Stderr
	}
	if err := vfs.Default.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: creating data dir: %w", err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, lock: lock, flusher: logstore.NewFlusher(0),
		// Kafka's defaults: log.retention.check.interval.ms 5 min, log.cleaner.backoff.ms 15 s.
		maint: logstore.NewMaintainer(logstore.NewCompactor(0), 5*time.Minute, 15*time.Second, cfg.Logger)}
	if err := s.openPartitions(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.logger.Info("data dir open", "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "partitions", len(s.parts))
	return s, nil
}

// openPartitions opens every <data-dir>/topics/<topic>/<partition> directory as a log.
func (s *Server) openPartitions() error {
	topicsDir := filepath.Join(s.cfg.DataDir, "topics")
	topics, err := listDirs(topicsDir)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: listing topics: %w", err)
	}
	for _, topic := range topics {
		indexes, err := s.partitionIndexes(filepath.Join(topicsDir, topic))
		if err != nil {
			return err
		}
		for _, index := range indexes {
			dir := filepath.Join(topicsDir, topic, strconv.Itoa(int(index)))
			l, err := logstore.Open(logstore.Options{
				Dir: dir, Config: logstore.DefaultConfig(), Flusher: s.flusher, Logger: s.logger,
			})
			if err != nil {
				return fmt.Errorf("server: opening %s/%d: %w", topic, index, err)
			}
			s.parts = append(s.parts, partition{topic: topic, index: index, log: l})
			s.maint.Add(l)
			s.logger.Info("recovered partition", "topic", topic, "partition", index,
				"start_offset", l.StartOffset(), "end_offset", l.EndOffset(), "size_bytes", l.Size())
		}
	}
	return nil
}

// partitionIndexes returns the partition numbers found in a topic directory, ascending. Entries
// that are not canonical decimal partition numbers are logged and skipped.
func (s *Server) partitionIndexes(topicDir string) ([]int32, error) {
	names, err := listDirs(topicDir)
	if err != nil {
		return nil, fmt.Errorf("server: listing partitions: %w", err)
	}
	var indexes []int32
	for _, name := range names {
		n, err := strconv.ParseInt(name, 10, 32)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != name {
			s.logger.Warn("skipping a directory that is not a partition", "dir", filepath.Join(topicDir, name))
			continue
		}
		indexes = append(indexes, int32(n))
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	return indexes, nil
}

// listDirs returns the names of the subdirectories of dir, sorted.
func listDirs(dir string) ([]string, error) {
	names, err := vfs.Default.List(dir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, name := range names {
		fi, err := vfs.Default.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			dirs = append(dirs, name)
		}
	}
	return dirs, nil
}

// Partitions describes the open partition logs, sorted by topic and partition. The caller owns
// the returned slice.
func (s *Server) Partitions() []PartitionState {
	states := make([]PartitionState, len(s.parts))
	for i, p := range s.parts {
		states[i] = PartitionState{
			Topic: p.topic, Partition: p.index,
			StartOffset: p.log.StartOffset(), EndOffset: p.log.EndOffset(), SizeBytes: p.log.Size(),
		}
	}
	return states
}

// NotImplementedNotice is the line Run prints while Runnel has no Kafka listener.
const NotImplementedNotice = "runnel: Kafka listener not implemented yet; data dir open and recovered"

// Run serves until ctx ends, then returns nil. It does not close the server.
func (s *Server) Run(ctx context.Context) error {
	maintDone := make(chan struct{})
	go func() { s.maint.Run(ctx); close(maintDone) }()
	defer func() { <-maintDone }()
	fmt.Fprintln(s.cfg.Console, NotImplementedNotice)
	s.logger.Info("waiting for a signal to stop", "kafka_addr", s.cfg.KafkaAddr,
		"advertised_kafka_addr", s.cfg.AdvertisedKafkaAddr, "admin_addr", s.cfg.AdminAddr)
	<-ctx.Done()
	return nil
}

// Close syncs and closes every partition log, stops the flusher and releases the data
// directory lock. It returns every error met on the way; calling it again does nothing.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, p := range s.parts {
		s.maint.Remove(p.log)
		if err := p.log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("server: closing %s/%d: %w", p.topic, p.index, err))
		}
	}
	s.flusher.Close()
	if err := s.lock.release(); err != nil {
		errs = append(errs, err)
	}
	s.logger.Info("data dir closed", "data_dir", s.cfg.DataDir, "partitions", len(s.parts))
	return errors.Join(errs...)
}
