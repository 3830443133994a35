package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestHostsServed(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		host  string
		want  bool
	}{
		{nil, "127.0.0.1:9644", true},
		{nil, "10.1.2.3:9644", true}, // served on 0.0.0.0, opened by the machine's address
		{nil, "[::1]:9644", true},
		{nil, "[fe80::1%25eth0]:9644", true},
		{nil, "localhost:9644", true},
		{nil, "LocalHost.:9644", true},
		{nil, "", true}, // HTTP/1.0: not a browser
		{nil, "rebind.evil.example:9644", false},
		{nil, "rebind.evil.example", false},
		{nil, "localhost.evil.example:9644", false},
		{nil, "127.0.0.1.evil.example:9644", false},
		{[]string{"node1.example:9092", "Console.Example"}, "node1.example:9644", true},
		{[]string{"node1.example:9092", "Console.Example"}, "console.example.", true},
		{[]string{"node1.example:9092", "Console.Example"}, "evil.example", false},
		{[]string{":9644", "0.0.0.0:9644"}, ":9644", false},
		{[]string{"*"}, "anything.example", true},
	} {
		if got := newHostSet(tc.hosts).serves(tc.host); got != tc.want {
			t.Errorf("hosts %q: serves(%q) = %v; want %v", tc.hosts, tc.host, got, tc.want)
		}
	}
}

// DNS rebinding: a page of evil.example whose name then resolves to the console's address is
// same-origin with the console to the browser, so its form passes the Origin check; without a
// SASL listener nothing else asks who it is. Its requests still say Host: evil.example.
func TestDNSRebindingRefused(t *testing.T) {
	c := reviewConsole(t, false)
	form := url.Values{"confirm": {"payments"}}
	req := httptest.NewRequest("POST", "http://rebind.evil.example:9644/topics/payments/delete", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://rebind.evil.example:9644")
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest || !strings.Contains(rec.Body.String(), "--console-hosts") {
		t.Errorf("a form from http://rebind.evil.example:9644: %d %q; want 421 naming --console-hosts", rec.Code, rec.Body.String())
	}
	// Nor may such a page read the console's answers (the JSON API, a page).
	for _, path := range []string{"/api/v1/topics/payments/records", "/topics"} {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://rebind.evil.example:9644"+path, nil))
		if rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host rebind.evil.example:9644: %d; want 421", path, rec.Code)
		}
	}
}

// The names a console is given are served, as are the addresses and localhost.
func TestConfiguredHostServed(t *testing.T) {
	c, err := New(Config{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Hosts: []string{"console.example:443"},
		Login: &Login{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Mechanisms: func(string) []string { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, host := range []string{"console.example", "192.168.0.7:9644", "localhost:9644"} {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://"+host+"/login", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET /login with Host %s: %d; want 200", host, rec.Code)
		}
	}
}
