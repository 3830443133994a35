package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func reviewConsole(t *testing.T, login bool) *Console {
	t.Helper()
	cfg := Config{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if login {
		cfg.Login = &Login{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Mechanisms: func(string) []string { return nil }}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A form posted from another site must be refused (docs/console.md: "form posts from another
// origin are refused"). A cross-origin form in a sandboxed iframe, a data: URL or after a
// cross-origin redirect is sent with `Origin: null` (an opaque origin, OWASP CSRF cheat sheet:
// "null" is not a trusted origin). Without a SASL listener there is no cookie to need either.
func TestCSRFOriginNullAccepted(t *testing.T) {
	c := reviewConsole(t, false)
	form := url.Values{"confirm": {"payments"}}
	for _, origin := range []string{"https://evil.example", "null"} {
		req := httptest.NewRequest("POST", "http://127.0.0.1:9644/topics/payments/delete", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("a delete-topic form posted with Origin %q reached the handler (status %d), want 403", origin, rec.Code)
		}
	}
}

// safeNext must keep the post-login redirect on this site. Browsers (WHATWG URL) drop ASCII tab
// and newline from a Location, so "/\t/evil.example" is followed as "//evil.example": another
// host (OWASP Unvalidated Redirects).
func TestSafeNextTabOpenRedirect(t *testing.T) {
	for _, next := range []string{"/\t/evil.example"} {
		got := safeNext(next)
		asBrowser := strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(got)
		if strings.HasPrefix(asBrowser, "//") {
			t.Errorf("safeNext(%q) = %q, which a browser follows to another host (%q)", next, got, asBrowser)
		}
	}
	// And the login page carries it into its form as is.
	c := reviewConsole(t, true)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9644/login?next=/%09/evil.example", nil))
	if strings.Contains(rec.Body.String(), `name="next" value="/&#9;/evil.example"`) || strings.Contains(rec.Body.String(), "name=\"next\" value=\"/\t/evil.example\"") {
		t.Errorf("the login form keeps next=/<TAB>/evil.example")
	}
}

// "at most 16 KiB of a key or value is shown ... so large and binary records do not freeze the
// page" (docs/console.md). Pretty JSON of a value within 16 KiB can be megabytes: indentation
// grows with the nesting depth, quadratically.
func TestJSONPrettyPrintUnbounded(t *testing.T) {
	const depth = 2000
	v := strings.Repeat("[", depth) + strings.Repeat("]", depth) // 4000 bytes, valid JSON
	s := show([]byte(v), "json")
	if len(s) > maxShown+64 {
		t.Fatalf("a %d-byte JSON value shows as %d bytes (limit %d)", len(v), len(s), maxShown)
	}
}

// "values that are not UTF-8 show as hex" (docs/console.md): a large value that is valid UTF-8
// must show as text, cut at a character boundary, not as hex because the 16 KiB cut fell inside
// a character.
func TestLargeUTF8ValueShownAsHex(t *testing.T) {
	v := strings.Repeat("€", 6000) // 18000 bytes of valid UTF-8; 16384 is not a multiple of 3
	s := show([]byte(v), "text")
	if !strings.HasPrefix(s, "€€€") {
		t.Fatalf("a valid UTF-8 value of %d bytes shows as %.40q...", len(v), s)
	}
}

// The console serves every page of the node (and, without a SASL listener, acts as the node's
// PLAINTEXT client for whoever loads it); another site must not be able to frame it and have the
// user click its buttons (OWASP Clickjacking Defense: frame-ancestors / X-Frame-Options). The
// group reset needs only clicks (radio, checkbox, button).
func TestConsoleFrameable(t *testing.T) {
	c := reviewConsole(t, false)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9644/login", nil))
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors") && rec.Header().Get("X-Frame-Options") == "" {
		t.Fatalf("page served with CSP %q and no X-Frame-Options: any site may frame it", csp)
	}
}

// The overview charts produce MB/s from the sum of runnel_topic_bytes_in_total over topics. The
// node drops a deleted topic's counters (metrics.NewKafka), so the sum falls and the chart shows
// a negative throughput (and records/s) for the interval a topic is deleted in: Prometheus'
// rate() treats a falling counter as a reset, never as a negative rate.
func TestDeletedTopicNegativeThroughput(t *testing.T) {
	reg := prometheus.NewRegistry()
	in := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_topic_bytes_in_total"}, []string{"topic"})
	recs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runnel_topic_records_in_total"}, []string{"topic"})
	reg.MustRegister(in, recs)
	in.WithLabelValues("big").Add(50e6)
	recs.WithLabelValues("big").Add(1e6)
	in.WithLabelValues("small").Add(1000)
	recs.WithLabelValues("small").Add(10)
	s := &sampler{g: reg, interval: time.Second, n: 10, done: make(chan struct{})}
	s.take()
	time.Sleep(50 * time.Millisecond)
	in.DeleteLabelValues("big") // the topic was deleted
	recs.DeleteLabelValues("big")
	in.WithLabelValues("small").Add(1000)
	recs.WithLabelValues("small").Add(10)
	s.take()
	last, ok := s.last()
	if !ok {
		t.Fatal("no sample")
	}
	if last.ProduceMBps < 0 || last.RecordsIn < 0 {
		t.Fatalf("after deleting a topic the overview shows produce %.1f MB/s, %.0f records/s", last.ProduceMBps, last.RecordsIn)
	}
}
