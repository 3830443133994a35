package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsoleInFirefox drives the console in headless Firefox over WebDriver BiDi against a real
// node: every page loads without JavaScript errors, the overview draws its charts, creating a
// topic (and refusing a bad name), producing and browsing a record and the live tail work, and
// the keyboard reaches the skip link first, then the navigation.
func TestConsoleInFirefox(t *testing.T) {
	exe := firefox(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	base := "http://" + b.s.AdminAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"order":%d}`, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("orders", 0, 3, -1)
	if _, err := adm.CommitOffsets(ctx, "billing", offs); err != nil {
		t.Fatal(err)
	}

	ff := &bidi{Exe: exe}
	ff.Start(t)
	context.AfterFunc(ctx, ff.Close) // past the deadline, pending commands fail instead of hanging
	eval := func(expr string) (v any) {
		t.Helper()
		if err := ff.Eval(expr, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// text is an element's text, or the reason there is none (for failure messages).
	text := func(sel string) string {
		var s string
		if err := ff.Eval(`document.querySelector(`+js(sel)+`)?.innerText ?? `+js("(no "+sel+")"), &s); err != nil {
			return "(" + err.Error() + ")"
		}
		return s
	}
	navigate := func(path string) {
		t.Helper()
		if _, err := ff.Command("browsingContext.navigate", map[string]any{"context": ff.Context, "url": base + path, "wait": "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	// waitFor polls a JavaScript condition; errors count as false, since after a form submission
	// the page may be between documents.
	waitFor := func(what, cond string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var ok bool
			err := ff.Eval(cond, &ok)
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: %s is still not true (%v); page: %s", what, cond, err, text("main"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	exists := func(sel string) string { return `document.querySelector(` + js(sel) + `) !== null` }
	// submit fills a form's fields by name and submits it as a user would (validation, submit event).
	submit := func(form string, fields map[string]string) {
		t.Helper()
		eval(`(() => { const f = document.querySelector(` + js(form) + `);
			for (const [name, value] of Object.entries(` + js(fields) + `)) f.elements[name].value = value;
			f.requestSubmit(); return true })()`)
	}

	// Every page, read-only.
	for _, p := range []struct{ path, want string }{
		{"/", "Controller"},
		{"/topics", "orders"},
		{"/topics/orders", "orders"},
		{"/topics/orders/messages?from=start&decode=json", `"order": 7`},
		{"/groups", "billing"},
		{"/groups/billing", "orders"},
		{"/transactions", "No transactional producers"},
		{"/objects", "Journal backlog"},
	} {
		navigate(p.path)
		if s := text("main"); !strings.Contains(s, p.want) {
			t.Fatalf("%s does not show %q: %s", p.path, p.want, s)
		}
	}

	// The overview's charts draw: uPlot's canvas, filled once the page's first metrics request
	// completes. Two samples on the server first, so that the screenshot shows lines, not dots.
	waitFor("two metrics samples", `fetch("/api/v1/metrics").then(r => r.json()).then(d => d.samples.length >= 2)`)
	navigate("/")
	waitFor("throughput chart", exists("#chart-throughput canvas"))
	waitFor("chart data", `performance.getEntriesByType("resource").some(e => e.name.includes("/api/v1/metrics"))`)
	res, err := ff.Command("browsingContext.captureScreenshot", map[string]any{"context": ff.Context, "origin": "document"})
	if err != nil {
		t.Fatal(err)
	}
	var shot struct{ Data []byte } // base64 in JSON
	if err := json.Unmarshal(res, &shot); err != nil || len(shot.Data) == 0 {
		t.Fatalf("screenshot: %v", err)
	}
	shots := os.Getenv("RUNNEL_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shots, "console-overview-firefox.png"), shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}

	// Creating a topic: a bad name is refused and creates nothing, a good one is created.
	navigate("/topics")
	submit("#create-topic", map[string]string{"name": "bad name!"})
	waitFor("bad topic", exists(".error"))
	if s := text(".error"); !strings.Contains(s, "bad name!") {
		t.Fatalf("the bad topic's message: %q", s)
	}
	if _, ok := b.s.Topics().Get("bad name!"); ok {
		t.Fatal("the bad topic was created")
	}
	submit("#create-topic", map[string]string{"name": "firefox", "partitions": "2", "configs": "retention.ms=3600000"})
	waitFor("create topic", exists(".flash"))
	if s := text(".flash"); !strings.Contains(s, "Created topic firefox") {
		t.Fatalf("after create: %q", s)
	}
	if tp, ok := b.s.Topics().Get("firefox"); !ok || len(tp.Partitions) != 2 {
		t.Fatal("the topic was not created with 2 partitions")
	}

	// Producing a record, then browsing it back decoded as JSON.
	navigate("/topics/firefox/messages")
	submit("#produce", map[string]string{"partition": "1", "key": "user-9", "value": `{"hello":"firefox"}`, "headers": "trace=ff"})
	waitFor("produce", exists(".flash"))
	if s := text(".flash"); !strings.Contains(s, "partition 1 at offset 0") {
		t.Fatalf("after produce: %q", s)
	}
	navigate("/topics/firefox/messages?from=start&decode=json")
	if s := text("#messages"); !strings.Contains(s, `"hello": "firefox"`) || !strings.Contains(s, "user-9") || !strings.Contains(s, "trace=ff") {
		t.Fatalf("browsed: %s", s)
	}

	// The live tail shows a record produced after it started. Its first poll fixes where it
	// starts, so produce only once that request has completed (Resource Timing lists it then).
	navigate("/topics/orders/messages")
	eval(`document.getElementById("tail").click(), true`)
	waitFor("tail's first poll", `performance.getEntriesByType("resource").some(e => e.name.includes("/records?"))`)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("tailed-in-firefox")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor("tail shows the record", `[...document.querySelectorAll("#messages pre")].some(p => p.textContent === "tailed-in-firefox")`)

	// Keyboard: from the top of a page, Tab reaches the skip link first, then the navigation.
	navigate("/topics")
	var links []string
	if err := ff.Eval(`[...document.querySelectorAll("nav a")].map(a => a.getAttribute("href"))`, &links); err != nil || len(links) < 4 {
		t.Fatalf("nav links: %v %v", links, err)
	}
	for i, want := range append([]string{"#main"}, links...) {
		if _, err := ff.Command("input.performActions", map[string]any{"context": ff.Context, "actions": []any{map[string]any{
			"type": "key", "id": "keyboard", "actions": []any{map[string]any{"type": "keyDown", "value": "\uE004"}, map[string]any{"type": "keyUp", "value": "\uE004"}},
		}}}); err != nil {
			t.Fatal(err)
		}
		if got := eval(`document.activeElement.getAttribute("href")`); got != want {
			t.Fatalf("Tab %d focuses %v (%v), want the link to %s", i+1, got, eval(`document.activeElement.outerHTML`), want)
		}
	}

	// Pages that answered 422 for bad input may log that status: expected.
	var unexpected []string
	for _, e := range ff.Errors() {
		if !strings.Contains(e, "422") {
			unexpected = append(unexpected, e)
		}
	}
	if len(unexpected) > 0 {
		t.Fatalf("JavaScript errors: %v", unexpected)
	}
}

// js quotes v as a JavaScript literal.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
