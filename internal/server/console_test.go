package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/server"
)

// chromium finds Debian's headless-capable Chromium.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipOutsideCI(t, "no chromium on PATH (.ci/run installs Debian's package)")
	return ""
}

// browser starts headless Chromium for the test (closed at its end).
func browser(t *testing.T, ctx context.Context, exe string) context.Context {
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1366, 900))...)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return bctx
}

// browserSteps are the tests' two verbs: read an element's text, and run actions (failing the
// test with what was being done).
func browserSteps(t *testing.T, bctx context.Context) (text func(sel string) string, run func(what string, actions ...chromedp.Action)) {
	// text reads an element's text, again if the page replaced the element in between (a
	// form's submission still navigating when the element of the page before it was found).
	text = func(sel string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var s string
			err := chromedp.Run(bctx, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Text(sel, &s, chromedp.ByQuery))
			if err == nil {
				return s
			}
			if time.Now().After(deadline) || bctx.Err() != nil {
				t.Fatalf("reading %s: %v", sel, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	run = func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	return text, run
}

// TestConsoleInBrowser drives the console in headless Chromium against a real node: every page
// loads without console errors; creating a topic, producing and browsing a record, resetting a
// group's offsets and deleting a topic work end to end; bad input gets a clear message and
// changes nothing. Screenshots of each page go to $RUNNEL_CONSOLE_SCREENSHOTS (default: a
// temporary directory).
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	base := "http://" + b.s.AdminAddr()
	shots := os.Getenv("RUNNEL_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// A group with a committed offset and no members, and records to find.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"order":%d}`, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("orders", 0, 5, -1)
	offs.AddOffset("orders", 1, 5, -1)
	if _, err := adm.CommitOffsets(ctx, "billing", offs); err != nil {
		t.Fatal(err)
	}

	bctx := browser(t, ctx, exe)
	var mu sync.Mutex
	var consoleErrors []string
	chromedp.ListenTarget(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, "exception: "+e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				consoleErrors = append(consoleErrors, "console.error")
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError {
				consoleErrors = append(consoleErrors, e.Entry.Source.String()+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(bctx, log.Enable(), runtime.Enable()); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, "console-"+name+".png"), png, 0o644)
		})
	}
	text, run := browserSteps(t, bctx)

	// Overview: the cards and the charts (uPlot draws a canvas once data arrives).
	run("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#chart-throughput canvas", chromedp.ByQuery))
	if s := text("main"); !strings.Contains(s, "Controller") || !strings.Contains(s, "Nodes") {
		t.Fatalf("overview: %s", s)
	}

	// Topics: bad input first (nothing created), then a real topic.
	run("topics", chromedp.Navigate(base+"/topics"), chromedp.WaitVisible("#create-topic", chromedp.ByQuery))
	run("create a bad topic", chromedp.SetValue(`#create-topic input[name=name]`, "bad name!", chromedp.ByQuery),
		chromedp.Submit(`#create-topic`, chromedp.ByQuery), chromedp.WaitVisible(".error", chromedp.ByQuery))
	if s := text(".error"); !strings.Contains(s, "bad name!") {
		t.Fatalf("the bad topic's message: %q", s)
	}
	if _, ok := b.s.Topics().Get("bad name!"); ok {
		t.Fatal("the bad topic was created")
	}
	run("create a topic", chromedp.SetValue(`#create-topic input[name=name]`, "browser", chromedp.ByQuery),
		chromedp.SetValue(`#create-topic input[name=partitions]`, "3", chromedp.ByQuery),
		chromedp.SetValue(`#create-topic textarea[name=configs]`, "retention.ms=3600000", chromedp.ByQuery),
		chromedp.Submit(`#create-topic`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery), shot("topic"))
	if s := text(".flash"); !strings.Contains(s, "Created topic browser") {
		t.Fatalf("after create: %q", s)
	}
	if tp, ok := b.s.Topics().Get("browser"); !ok || len(tp.Partitions) != 3 {
		t.Fatal("the topic was not created with 3 partitions")
	}
	run("topics list", chromedp.Navigate(base+"/topics?q=or"), chromedp.WaitVisible("table", chromedp.ByQuery), shot("topics"))
	if s := text("table"); !strings.Contains(s, "orders") || strings.Contains(s, "browser") {
		t.Fatalf("search 'or' lists: %s", s)
	}

	// Messages: produce one with a header, browse it back, JSON-decoded.
	run("produce", chromedp.Navigate(base+"/topics/browser/messages"), chromedp.WaitVisible("#produce", chromedp.ByQuery),
		chromedp.SetValue(`#produce input[name=partition]`, "2", chromedp.ByQuery),
		chromedp.SetValue(`#produce input[name=key]`, "user-7", chromedp.ByQuery),
		chromedp.SetValue(`#produce textarea[name=value]`, `{"hello":"browser"}`, chromedp.ByQuery),
		chromedp.SetValue(`#produce textarea[name=headers]`, "trace=abc", chromedp.ByQuery),
		chromedp.Submit(`#produce`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if s := text(".flash"); !strings.Contains(s, "partition 2 at offset 0") {
		t.Fatalf("after produce: %q", s)
	}
	run("browse", chromedp.Navigate(base+"/topics/browser/messages?from=start&decode=json"), chromedp.WaitVisible("#messages", chromedp.ByQuery), shot("messages"))
	if s := text("#messages"); !strings.Contains(s, `"hello": "browser"`) || !strings.Contains(s, "user-7") || !strings.Contains(s, "trace=abc") {
		t.Fatalf("browsed: %s", s)
	}
	run("filter", chromedp.Navigate(base+"/topics/orders/messages?from=start&filter=k13&limit=100"), chromedp.WaitVisible("#messages", chromedp.ByQuery))
	if s := text("#messages tbody"); !strings.Contains(s, `{"order":13}`) || strings.Contains(s, `{"order":12}`) {
		t.Fatalf("filtered: %s", s)
	}
	// The live tail shows a record produced after it started.
	run("tail", chromedp.Navigate(base+"/topics/orders/messages"), chromedp.WaitVisible("#tail", chromedp.ByQuery), chromedp.Click("#tail", chromedp.ByQuery), chromedp.Sleep(1500*time.Millisecond))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("tailed-record")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	run("tail shows it", chromedp.WaitVisible(`//pre[text()="tailed-record"]`, chromedp.BySearch))

	// The overview breaks produce latency down by stage once produces ran in the last interval.
	for i := 0; ; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("stage")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		run("overview stages", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#stages", chromedp.ByQuery))
		if s := text("#stages"); strings.Contains(s, "commit") && strings.Contains(s, "write") {
			break
		}
		if i == 40 {
			t.Fatalf("no produce stages on the overview: %s", text("#stages"))
		}
	}
	run("overview shot", chromedp.Sleep(2500*time.Millisecond), shot("overview"))
	// The topic's own breakdown, and the object-store journal (this node's run, live).
	for i := 0; ; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("stage")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		run("topic stages", chromedp.Navigate(base+"/topics/orders"), chromedp.WaitVisible("#topic-stages", chromedp.ByQuery))
		if s := text("#topic-stages"); strings.Contains(s, "commit") {
			break
		}
		if i == 40 {
			t.Fatalf("no produce stages on the topic's page: %s", text("#topic-stages"))
		}
	}
	run("journal", chromedp.Navigate(base+"/objects"), chromedp.WaitVisible("#journal", chromedp.ByQuery), shot("objects"))
	if s := text("#journal"); !strings.Contains(s, "live") {
		t.Fatalf("the journal: %s", s)
	}

	// Groups: lag, a bad reset (nothing changes), then a reset to earliest.
	run("groups", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible("table", chromedp.ByQuery), shot("groups"))
	if s := text("table"); !strings.Contains(s, "billing") {
		t.Fatalf("groups: %s", s)
	}
	run("group", chromedp.Navigate(base+"/groups/billing"), chromedp.WaitVisible("#reset-offsets", chromedp.ByQuery), shot("group"))
	run("bad reset", chromedp.Click(`#reset-offsets input[value=offset]`, chromedp.ByQuery),
		chromedp.SetValue(`#reset-offsets input[name=offset]`, "minus one", chromedp.ByQuery),
		chromedp.Click(`#reset-offsets input[name=confirm]`, chromedp.ByQuery),
		chromedp.Submit(`#reset-offsets`, chromedp.ByQuery), chromedp.WaitVisible(".error", chromedp.ByQuery))
	if s := text(".error"); !strings.Contains(s, "nothing was changed") {
		t.Fatalf("bad reset: %q", s)
	}
	committed := func() int64 {
		o, err := adm.FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := o.Lookup("orders", 0)
		return c.At
	}
	if c := committed(); c != 5 {
		t.Fatalf("a refused reset moved the offset to %d", c)
	}
	run("reset", chromedp.Click(`#reset-offsets input[value=earliest]`, chromedp.ByQuery),
		chromedp.Click(`#reset-offsets input[name=confirm]`, chromedp.ByQuery),
		chromedp.Submit(`#reset-offsets`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if c := committed(); c != 0 {
		t.Fatalf("after the reset the offset is %d, want 0", c)
	}

	run("lag chart", chromedp.Navigate(base+"/groups/billing"), chromedp.WaitVisible("#chart-lag canvas", chromedp.ByQuery))

	// Transactions: an open one comes first.
	txcl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID("console-tx"), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer txcl.Close()
	if err := txcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txcl.ProduceSync(ctx, &kgo.Record{Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	run("transactions", chromedp.Navigate(base+"/transactions"), chromedp.WaitVisible("table", chromedp.ByQuery), shot("transactions"))
	if s := text("table tbody tr"); !strings.Contains(s, "console-tx") || !strings.Contains(s, "Ongoing") || !strings.Contains(s, "orders/") {
		t.Fatalf("transactions: %s", s)
	}
	if err := txcl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// A total-order topic's page shows its sequencing.
	total := "total"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"runnel.ordering": &total}, "ordered"); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		var n int
		run("total order", chromedp.Navigate(base+"/topics/ordered"), chromedp.WaitVisible("table", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll("#total-order").length`, &n))
		if n == 1 {
			break
		}
		if i == 50 {
			t.Fatalf("no total-order section: %s", text("main"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := text("#total-order"); !strings.Contains(s, "Confirmed prefix") || !strings.Contains(s, "sequencer leader node 0") {
		t.Fatalf("total order: %s", s)
	}
	run("total order shot", shot("total-order"))
	run("flush lag column", chromedp.Navigate(base+"/topics/orders"), chromedp.WaitVisible("table", chromedp.ByQuery))
	if s := text("table"); !strings.Contains(s, "Unflushed") || !strings.Contains(s, "records") {
		t.Fatalf("topic page without flush lag: %s", s)
	}

	// Delete: a wrong confirmation deletes nothing; the right one deletes the topic.
	run("bad delete", chromedp.Navigate(base+"/topics/browser"), chromedp.WaitVisible("#delete-topic", chromedp.ByQuery),
		chromedp.SetValue(`#delete-topic input[name=confirm]`, "brows", chromedp.ByQuery),
		chromedp.Submit(`#delete-topic`, chromedp.ByQuery), chromedp.WaitVisible(".error", chromedp.ByQuery))
	if _, ok := b.s.Topics().Get("browser"); !ok {
		t.Fatal("a wrong confirmation deleted the topic")
	}
	run("delete", chromedp.SetValue(`#delete-topic input[name=confirm]`, "browser", chromedp.ByQuery),
		chromedp.Submit(`#delete-topic`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if s := text(".flash"); !strings.Contains(s, "Deleted topic browser") {
		t.Fatalf("after delete: %q", s)
	}
	if _, ok := b.s.Topics().Get("browser"); ok {
		t.Fatal("the topic is still there")
	}
	mu.Lock()
	defer mu.Unlock()
	// Pages that answered 422 for bad input log that status as a network error: expected.
	var unexpected []string
	for _, e := range consoleErrors {
		if !strings.Contains(e, "422") {
			unexpected = append(unexpected, e)
		}
	}
	if len(unexpected) > 0 {
		t.Fatalf("console errors: %v", unexpected)
	}
	t.Logf("screenshots in %s", shots)
}

// TestConsoleLogin: with a SASL listener the console asks who is using it; the user's ACLs
// limit what its pages show and do, and logging out ends the session.
func TestConsoleLogin(t *testing.T) {
	exe := chromium(t)
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "visible", "hidden"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "viewer", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "viewer-pw"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:viewer").AllowHosts("*").Topics("visible").Operations(kadm.OpDescribe, kadm.OpRead, kadm.OpDescribeConfigs)); err != nil {
		t.Fatal(err)
	}
	base := "http://" + b.s.AdminAddr()
	bctx := browser(t, ctx, exe)
	text, run := browserSteps(t, bctx)
	login := func(user, pass string) {
		run("login "+user, chromedp.WaitVisible("#login", chromedp.ByQuery),
			chromedp.SetValue(`#login input[name=user]`, user, chromedp.ByQuery),
			chromedp.SetValue(`#login input[name=password]`, pass, chromedp.ByQuery),
			chromedp.Submit("#login", chromedp.ByQuery))
	}
	run("a page asks for a login", chromedp.Navigate(base+"/topics"))
	login("viewer", "wrong")
	run("wrong password", chromedp.WaitVisible(".error", chromedp.ByQuery))
	if s := text(".error"); !strings.Contains(s, "Login failed") {
		t.Fatalf("wrong password: %q", s)
	}
	login("viewer", "viewer-pw")
	run("topics as viewer", chromedp.WaitVisible("form.user", chromedp.ByQuery), chromedp.WaitVisible("table", chromedp.ByQuery))
	if s := text("table"); !strings.Contains(s, "visible") || strings.Contains(s, "hidden") {
		t.Fatalf("the viewer's topics: %s", s)
	}
	run("create denied", chromedp.SetValue(`#create-topic input[name=name]`, "mine", chromedp.ByQuery),
		chromedp.Submit("#create-topic", chromedp.ByQuery), chromedp.WaitVisible(".error", chromedp.ByQuery))
	if s := text(".error"); !strings.Contains(s, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("a create the ACLs do not allow: %q", s)
	}
	if _, ok := b.s.Topics().Get("mine"); ok {
		t.Fatal("the viewer created a topic")
	}
	run("logout", chromedp.Submit("form.user", chromedp.ByQuery), chromedp.WaitVisible("#login", chromedp.ByQuery))
	run("after logout", chromedp.Navigate(base+"/groups"), chromedp.WaitVisible("#login", chromedp.ByQuery))
	// The JSON API wants a session too.
	var status int64
	run("api", chromedp.Evaluate(`fetch("/api/v1/metrics").then(r => r.status)`, &status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	if status != 401 {
		t.Fatalf("the API without a session: %d", status)
	}
}
