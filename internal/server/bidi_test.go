package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// firefox finds a Firefox with WebDriver BiDi (Debian's firefox-esr).
func firefox(t *testing.T) string {
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipOutsideCI(t, "no firefox-esr on PATH (.ci/run installs Debian's package)")
	return ""
}

// bidi is a minimal WebDriver BiDi client for headless Firefox: chromedp cannot drive Firefox
// (it dropped CDP), but Firefox speaks BiDi natively on its remote debugging port.
type bidi struct {
	Exe     string
	Context string // the top-level browsing context, set by Start

	cmd     *exec.Cmd
	exited  chan struct{} // closed when Firefox's main process has exited
	profile string
	conn    net.Conn
	done    chan struct{} // closed when the reader stops
	closed  sync.Once

	mu      sync.Mutex
	nextID  int
	pending map[int]chan bidiMessage
	errs    []string // log entries at level "error"
	early   []string // what Firefox said before listening, for failure messages
}

// bidiMessage is any message from the browser: a command's reply or an event.
type bidiMessage struct {
	Type    string          `json:"type"` // "success", "error" or "event"
	ID      int             `json:"id"`
	Method  string          `json:"method"` // events
	Params  json.RawMessage `json:"params"` // events
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

// Start launches Firefox with a fresh profile, opens a BiDi session that collects error log
// entries, and finds the initial tab. Close runs at the end of the test.
func (b *bidi) Start(t *testing.T) {
	t.Helper()
	t.Cleanup(b.Close)
	var err error
	if b.profile, err = os.MkdirTemp("", "runnel-firefox-"); err != nil {
		t.Fatal(err)
	}
	// Port 0: Firefox picks a free port and prints it on stderr.
	b.cmd = exec.Command(b.Exe, "--headless", "--remote-debugging-port=0", "--profile", b.profile, "--window-size=1366,900", "about:blank")
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.exited = make(chan struct{})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "WebDriver BiDi listening on "); ok {
				url <- u
				break
			}
			b.mu.Lock()
			b.early = append(b.early, sc.Text())
			b.mu.Unlock()
		}
		io.Copy(io.Discard, stderr) // keep draining so Firefox never blocks on a full pipe
		b.cmd.Wait()
		close(b.exited)
	}()
	select {
	case u := <-url:
		conn, br, _, err := ws.Dial(context.Background(), u+"/session")
		if err != nil {
			t.Fatalf("connect to Firefox: %v", err)
		}
		b.conn, b.done, b.pending = conn, make(chan struct{}), map[int]chan bidiMessage{}
		var src io.Reader = conn
		if br != nil { // bytes the server sent right after the handshake
			src = br
		}
		go b.read(src)
	case <-b.exited:
		t.Fatalf("firefox exited before listening: %s", b.said())
	case <-time.After(30 * time.Second):
		t.Fatalf("firefox is not listening after 30s: %s", b.said())
	}
	if _, err := b.Command("session.new", map[string]any{"capabilities": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Command("session.subscribe", map[string]any{"events": []string{"log.entryAdded"}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Command("browsingContext.getTree", nil)
	if err != nil {
		t.Fatal(err)
	}
	var tree struct{ Contexts []struct{ Context string } }
	if err := json.Unmarshal(res, &tree); err != nil || len(tree.Contexts) == 0 {
		t.Fatalf("browsingContext.getTree: %s (%v)", res, err)
	}
	b.Context = tree.Contexts[0].Context
}

func (b *bidi) said() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.early, "\n")
}

// read dispatches replies to their commands and keeps error log entries, until the connection ends.
func (b *bidi) read(src io.Reader) {
	defer close(b.done)
	// The writer answers control frames (ping, close) in single Writes, which net.Conn never
	// interleaves with Command's.
	rw := struct {
		io.Reader
		io.Writer
	}{src, b.conn}
	for {
		data, err := wsutil.ReadServerText(rw)
		if err != nil {
			return
		}
		var m bidiMessage
		if err := json.Unmarshal(data, &m); err != nil {
			continue
		}
		b.mu.Lock()
		if m.Type == "event" && m.Method == "log.entryAdded" {
			var e struct {
				Level, Type, Text string
				StackTrace        struct{ CallFrames []struct{ URL string } }
			}
			if json.Unmarshal(m.Params, &e) == nil && e.Level == "error" {
				s := e.Type + ": " + e.Text
				if f := e.StackTrace.CallFrames; len(f) > 0 {
					s += " at " + f[0].URL
				}
				b.errs = append(b.errs, s)
			}
		} else if ch, ok := b.pending[m.ID]; ok {
			delete(b.pending, m.ID)
			ch <- m
		}
		b.mu.Unlock()
	}
}

// Command sends a BiDi command and waits for its result. params is a JSON object (nil for {}).
func (b *bidi) Command(method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	b.mu.Lock()
	b.nextID++
	id, reply := b.nextID, make(chan bidiMessage, 1)
	b.pending[id] = reply
	b.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	// One Write per frame, so that concurrent writers cannot interleave frames.
	var frame bytes.Buffer
	if err := wsutil.WriteClientText(&frame, msg); err != nil {
		return nil, err
	}
	if _, err := b.conn.Write(frame.Bytes()); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-reply:
		if m.Type == "error" {
			return nil, fmt.Errorf("%s: %s: %s", method, m.Error, m.Message)
		}
		return m.Result, nil
	case <-b.done:
		return nil, fmt.Errorf("%s: the connection to Firefox closed", method)
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no reply in 30s", method)
	}
}

// Eval evaluates a JavaScript expression in the page, awaiting it if it is a promise, and
// decodes its value (passed through JSON.stringify) into v.
func (b *bidi) Eval(expr string, v any) error {
	res, err := b.Command("script.evaluate", map[string]any{
		"expression":   "(async () => JSON.stringify(await (" + expr + ")))()",
		"target":       map[string]any{"context": b.Context},
		"awaitPromise": true, "resultOwnership": "none",
	})
	if err != nil {
		return err
	}
	var r struct {
		Type             string
		Result           struct{ Value *string }
		ExceptionDetails struct{ Text string }
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.Type == "exception" {
		return fmt.Errorf("%s: %s", expr, r.ExceptionDetails.Text)
	}
	if r.Result.Value == nil { // JSON.stringify(undefined)
		return errors.New(expr + ": undefined")
	}
	return json.Unmarshal([]byte(*r.Result.Value), v)
}

// Errors returns the error log entries (JavaScript errors, console.error) so far.
func (b *bidi) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// Close kills Firefox (nothing of its state is worth a clean shutdown) and removes its profile.
// It is safe to call more than once, and concurrently with commands, which then fail.
func (b *bidi) Close() {
	b.closed.Do(func() {
		if b.conn != nil {
			b.conn.Close()
		}
		if b.cmd != nil && b.cmd.Process != nil {
			b.cmd.Process.Kill()
			<-b.exited
		}
		if b.profile != "" {
			os.RemoveAll(b.profile)
		}
	})
}
