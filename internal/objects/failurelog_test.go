package objects

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A task failing every 2 s is logged at its first failure and then once a minute, and once
// when it works again; a single failure followed by success logs nothing more.
func TestFailureLogOncePerMinute(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	var f failureLog
	t0 := time.Unix(1000, 0)
	for i := range 60 { // two minutes of failures, every 2 s
		f.failed(l, "task", errors.New("disk full"), t0.Add(time.Duration(i)*2*time.Second))
	}
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 {
		t.Fatalf("%d warnings over two minutes of failures; want 2 (the first, one a minute later):\n%s", got, buf.String())
	}
	f.worked(l, "task")
	if !strings.Contains(buf.String(), "task: works again") || !strings.Contains(buf.String(), "failures_in_a_row=60") {
		t.Fatalf("no line when it works again:\n%s", buf.String())
	}
	buf.Reset()
	f.failed(l, "task", errors.New("once"), t0.Add(time.Hour))
	f.worked(l, "task")
	if got := buf.String(); strings.Count(got, "level=WARN") != 1 || strings.Contains(got, "works again") {
		t.Fatalf("one failure then success logged:\n%s", got)
	}
}
