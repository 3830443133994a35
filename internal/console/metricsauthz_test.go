package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With Login, the console's pages show only what the logged-in user's ACLs let the broker
// answer (a topic page asks Metadata first). /api/v1/metrics?topic=NAME did not ask the
// broker anything: it answered the per-topic produce stages from the node's metrics for any
// name, so a user who could not DESCRIBE a topic learned that it exists and when it is written.
func TestMetricsAPITopicStagesNeedDescribe(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runnel_topic_produce_stage_seconds",
		Buckets: []float64{0.001, 0.01, 0.1}}, []string{"topic", "stage"})
	reg.MustRegister(h)
	h.WithLabelValues("secret", "append").Observe(0.005)
	c, err := New(Config{Gatherer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Login: &Login{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Mechanisms: func(string) []string { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// bob is logged in; his client reaches no broker, so nothing can have been authorized.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.sessions.add(&session{id: "bob-session", user: "bob", cl: cl, created: now, last: now})
	time.Sleep(200 * time.Millisecond)
	h.WithLabelValues("secret", "append").Observe(0.005) // produced to between two samples
	time.Sleep(2500 * time.Millisecond)

	req := httptest.NewRequest("GET", "http://127.0.0.1:9644/api/v1/metrics?topic=secret", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "bob-session"})
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	if body := rec.Body.String(); rec.Code == http.StatusOK && strings.Contains(body, `"append"`) {
		t.Fatalf("/api/v1/metrics?topic=secret answered the topic's produce stages to bob without asking the broker whether he may describe it: %s", body)
	}
}
