package server_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
)

// The node's console answers the names it is served under (--console-hosts, the machine's host
// name), its addresses and localhost, and refuses any other Host: a DNS-rebinding page's.
func TestConsoleServesOnlyItsHostNames(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.ConsoleHosts = []string{"console.example"} })
	_, port, _ := net.SplitHostPort(b.s.AdminAddr())
	hostname, _ := os.Hostname()
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(host string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+b.s.AdminAddr()+"/static/app.js", nil)
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{b.s.AdminAddr(), "localhost:" + port, "console.example:" + port, hostname + ":" + port} {
		if code, body := get(host); code != http.StatusOK {
			t.Errorf("Host %s: %d %.200s; want 200", host, code, body)
		}
	}
	if code, body := get("rebind.evil.example:" + port); code != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS rebinding") {
		t.Errorf("Host rebind.evil.example: %d %.200s; want 421 saying why", code, body)
	}
	// The node's other endpoints are not the console's: monitoring reaches them by any name.
	req, _ := http.NewRequest("GET", "http://"+b.s.AdminAddr()+"/healthz", nil)
	req.Host = "monitoring.example"
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz with Host monitoring.example: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
