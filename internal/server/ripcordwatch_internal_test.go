package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRipcordWatchLogsTransitions: entering and leaving Ripcord mode are logged once each,
// whoever asks how often, and runnel_ripcord_active follows.
func TestRipcordWatchLogsTransitions(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{logger: slog.New(slog.NewTextHandler(&buf, nil))}
	unreachable := false
	watch := s.ripcordWatch(func() bool { return unreachable })
	for range 5 {
		if watch() || s.ripcordActive.Load() {
			t.Fatal("in Ripcord mode with the controller answering")
		}
	}
	unreachable = true
	for range 5 {
		if !watch() || !s.ripcordActive.Load() {
			t.Fatal("not in Ripcord mode with the controller silent")
		}
	}
	unreachable = false
	watch()
	watch()
	out := buf.String()
	if strings.Count(out, "Ripcord mode: the active controller has not answered") != 1 || strings.Count(out, "Ripcord mode ended") != 1 || s.ripcordActive.Load() {
		t.Fatalf("log of one entry into Ripcord mode and one exit:\n%s", out)
	}
}
