package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startServe runs `runnel serve` on a fixed loopback port and waits until it serves Kafka. The
// channel closes when the process has exited (startServe owns cmd.Wait).
func startServe(t *testing.T, bin, dataDir, addr string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--kafka-addr", addr, "--admin-addr", "127.0.0.1:0", "--speclog-addr", "127.0.0.1:0", "--log-level", "warn")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(exited) }()
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			if strings.Contains(s.Text(), "serving Kafka on") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("runnel serve did not start within 30s")
	}
	return cmd, exited
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestKill9KeepsAcknowledgedRecords: a real process crash. `runnel serve` is killed with
// SIGKILL while producers with acks=all write to a topic with write caching off and one with it
// on; after a restart every acknowledged record is there in both (the OS keeps the page cache,
// so write caching loses nothing in a process crash either).
func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "runnel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir, addr := filepath.Join(t.TempDir(), "data"), freeAddr(t)
	srv, exited := startServe(t, bin, dataDir, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(admin)
	caching := map[string]string{"fsync": "false", "cached": "true"}
	for topic, wc := range caching {
		if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"write.caching": &wc}, topic); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()

	var mu sync.Mutex
	acked := map[string]map[string]bool{"fsync": {}, "cached": {}}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(0), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for topic := range caching {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("%s-%d", topic, i)
				prod.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[topic][v] = true
						mu.Unlock()
					}
				})
				if i%100 == 99 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	srv.Process.Kill() // SIGKILL: no shutdown, no final sync
	<-exited
	close(stop)
	wg.Wait()
	prod.Close() // fails what was in flight; acknowledged records are in acked
	mu.Lock()
	defer mu.Unlock()

	srv, exited = startServe(t, bin, dataDir, addr)
	defer func() { srv.Process.Kill(); <-exited }()
	for topic, want := range acked {
		if len(want) < 50 {
			t.Fatalf("%s: only %d records acknowledged before the kill; the load did not run", topic, len(want))
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for missing(want, got) > 0 && time.Now().Before(deadline) {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
			pcancel()
		}
		cons.Close()
		if n := missing(want, got); n > 0 {
			t.Errorf("%s (write.caching=%s): %d of %d acknowledged records missing after kill -9 and restart", topic, caching[topic], n, len(want))
		} else {
			t.Logf("%s: all %d acknowledged records present after kill -9 (%d read back)", topic, len(want), len(got))
		}
	}
}

func missing(want, got map[string]bool) int {
	n := 0
	for v := range want {
		if !got[v] {
			n++
		}
	}
	return n
}
