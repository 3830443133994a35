// Package console is Runnel's built-in web console (docs/console.md): server-rendered pages
// (html/template) on the admin listener, with a little JavaScript for live charts and the
// message tail (uPlot, vendored). Every Kafka operation goes through the Kafka protocol to the
// node's own listener (kgo/kadm, and package adminops for what the CLI shares), so the console
// does exactly what `runnel topic` and `runnel group` do, and nothing the broker does not.
package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed templates/*.html static
var assets embed.FS

// Overview is the node and cluster state the overview page shows.
type Overview struct {
	NodeID          int32
	ClusterID       string
	Version         string
	State           string
	Uptime          time.Duration
	ControllerID    int32
	Partitions      int
	UnderReplicated int
	Offline         int
	Nodes           []Node
}

// Node is one node of the cluster.
type Node struct {
	ID        int32
	KafkaAddr string
	State     string
	Leaders   int
	Replicas  int
}

// Config configures the console.
type Config struct {
	// Bootstrap is the node's own Kafka listener, which the console is a client of.
	Bootstrap func() []string
	// ClientOpts reach it (TLS, SASL), if it needs them.
	ClientOpts []kgo.Opt
	Overview   func() Overview
	// Gatherer is the node's metrics registry: the charts sample it.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// Login, when set, has users log in with their SASL credentials (login.go).
	Login *Login
	// FlushLag is, for each partition of a topic, what each replica's write caching has not
	// flushed yet, and which nodes could not say (nil: not shown).
	FlushLag func(ctx context.Context, topic string) (map[int32][]ReplicaFlushLag, []string)
	// TotalOrder describes a total-order topic's sequencing (nil: not shown).
	TotalOrder func(ctx context.Context, topic string) (*TotalOrder, error)
	// Journal lists object topics' journal backlog (nil: no object store).
	Journal func(ctx context.Context) ([]JournalRun, error)
	// Hosts are the host names (host or host:port) the console is served under: a request
	// whose Host header names another is refused (DNS rebinding, hosts.go). An IP address and
	// localhost are always served; "*" serves every name.
	Hosts []string
}

// Console serves the pages.
type Console struct {
	cfg   Config
	hosts hostSet
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu       sync.Mutex
	cl       *kgo.Client
	sampler  *sampler
	sessions sessions

	stopSweep chan struct{} // closed by Close (nil without Login)
	swept     sync.WaitGroup
	closeOnce sync.Once
}

// New returns the console; Close stops it.
func New(cfg Config) (*Console, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Console{cfg: cfg, hosts: newHostSet(cfg.Hosts), pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	funcs := template.FuncMap{
		"join":     strings.Join,
		"bytes":    humanBytes,
		"ms":       func(t time.Time) int64 { return t.UnixMilli() },
		"time":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"duration": func(d time.Duration) string { return d.Round(time.Second).String() },
		"ms3":      func(d time.Duration) string { return d.Round(time.Millisecond).String() },
		"ahead": func(delivered, confirmed uint64) string { // positions delivered above the confirmed prefix
			if delivered <= confirmed {
				return "0"
			}
			return strconv.FormatUint(delivered-confirmed, 10)
		},
		"query": url.QueryEscape,
		"path":  url.PathEscape,
		"list":  func(s ...string) []string { return s },
		"dict": func(kv ...any) map[string]any { // arguments for a nested template
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
	}
	for _, page := range []string{"overview", "topics", "topic", "messages", "groups", "group", "login", "transactions", "objects"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, _ := fs.Sub(assets, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /{$}", c.overview)
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.logout)
	c.mux.HandleFunc("GET /topics", c.topics)
	c.mux.HandleFunc("POST /topics", c.createTopic)
	c.mux.HandleFunc("GET /topics/{topic}", c.topic)
	c.mux.HandleFunc("POST /topics/{topic}/configs", c.alterConfig)
	c.mux.HandleFunc("POST /topics/{topic}/partitions", c.addPartitions)
	c.mux.HandleFunc("POST /topics/{topic}/delete", c.deleteTopic)
	c.mux.HandleFunc("GET /topics/{topic}/messages", c.messages)
	c.mux.HandleFunc("POST /topics/{topic}/messages", c.produce)
	c.mux.HandleFunc("GET /groups", c.groups)
	c.mux.HandleFunc("GET /groups/{group}", c.group)
	c.mux.HandleFunc("POST /groups/{group}/reset", c.resetGroup)
	c.mux.HandleFunc("POST /groups/{group}/delete", c.deleteGroup)
	c.mux.HandleFunc("GET /transactions", c.transactions)
	c.mux.HandleFunc("GET /objects", c.objects)
	c.mux.HandleFunc("GET /api/v1/groups/{group}/lag", c.lagAPI)
	c.mux.HandleFunc("GET /api/v1/metrics", c.metricsAPI)
	c.mux.HandleFunc("GET /api/v1/topics/{topic}/records", c.recordsAPI)
	if cfg.Gatherer != nil {
		c.sampler = newSampler(cfg.Gatherer, 2*time.Second, 150)
	}
	if cfg.Login != nil {
		c.stopSweep = make(chan struct{})
		c.swept.Go(func() { c.sweepSessions(c.stopSweep) })
	}
	return c, nil
}

// Handler serves the console's paths: /, /topics..., /groups..., /static/, /api/v1/.
func (c *Console) Handler() http.Handler { return c.guard(c.mux) }

// Paths are the path patterns the console serves, for registering it on a mux.
var Paths = []string{"/{$}", "/login", "/logout", "/topics", "/topics/", "/groups", "/groups/", "/transactions", "/objects", "/static/", "/api/v1/"}

// Close stops the sampler and the session sweeper, and closes the Kafka clients (the console's
// and every session's).
func (c *Console) Close() {
	if c.sampler != nil {
		c.sampler.stop()
	}
	if c.stopSweep != nil {
		c.closeOnce.Do(func() { close(c.stopSweep) })
		c.swept.Wait()
	}
	c.sessions.closeAll()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		c.cl.Close()
		c.cl = nil
	}
}

// clientOpts are the options of a client made for the request: its user's, or the console's.
func (c *Console) clientOpts(r *http.Request) []kgo.Opt {
	if ss := sessionOf(r.Context()); ss != nil {
		return append([]kgo.Opt(nil), ss.opts...)
	}
	return append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Bootstrap()...), kgo.ClientID("runnel-console")}, c.cfg.ClientOpts...)
}

// client is the Kafka client for the request: the logged-in user's, or the console's own
// (made on first use).
func (c *Console) client(r *http.Request) (*kgo.Client, *kadm.Client, error) {
	if ss := sessionOf(r.Context()); ss != nil {
		return ss.cl, kadm.NewClient(ss.cl), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Bootstrap()...), kgo.ClientID("runnel-console"),
			kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}, c.cfg.ClientOpts...)...)
		if err != nil {
			return nil, nil, err
		}
		c.cl = cl
	}
	return c.cl, kadm.NewClient(c.cl), nil
}

// page is what every page template gets.
type page struct {
	User   string // the logged-in user ("" without login)
	Title  string
	Nav    string
	Flash  string // a success message (from ?ok=)
	Error  string // what went wrong (validation messages from the server)
	Data   any
	Form   url.Values // the submitted form, re-shown after an error
	Status int
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, p page) {
	if p.Flash == "" {
		p.Flash = r.URL.Query().Get("ok")
	}
	if p.Form == nil {
		p.Form = url.Values{}
	}
	if ss := sessionOf(r.Context()); ss != nil {
		p.User = ss.user
	}
	var buf bytes.Buffer // the whole page, or an error: never half a page
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.cfg.Logger.Warn("console: rendering", "page", name, "err", err)
		http.Error(w, "console: rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// No other site may frame the console (clickjacking: its actions are clicks).
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	if p.Status != 0 {
		w.WriteHeader(p.Status)
	}
	w.Write(buf.Bytes())
}

// redirect answers a successful form with a redirect carrying its message (post/redirect/get).
func redirect(w http.ResponseWriter, r *http.Request, to, msg string) {
	http.Redirect(w, r, to+"?ok="+url.QueryEscape(msg), http.StatusSeeOther)
}

func ctxTimeout(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 15*time.Second)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// errText is an error as the page shows it ("" for none).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
