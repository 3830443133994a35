package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/security/securitytest"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestConsoleCluster: on a 3-node cluster, one node's console shows what only the other nodes
// know — every replica's unflushed data (write caching), the heads of total-order shards led
// elsewhere — and the cluster's object-store journal; an object topic's page breaks its
// produces down by stage, the object stages included. Plain HTTP: the pages are rendered by
// the server (TestConsoleInBrowser drives a browser).
func TestConsoleCluster(t *testing.T) {
	store := "file://" + t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore = store
		c.batchTimeout = 20 * time.Millisecond
		c.tune = func(_ int32, cfg *server.Config) { cfg.SpecLogAddr = "127.0.0.1:0" }
	})
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	page := func(node int32, path string) string {
		t.Helper()
		resp, err := http.Get("http://" + c.servers[node].AdminAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s on node %d: %s\n%s", path, node, resp.Status, body)
		}
		return string(body)
	}
	eventuallyPage := func(what string, node int32, path string, ok func(string) bool) string {
		t.Helper()
		var body string
		eventually(t, what, 30*time.Second, func() bool {
			body = page(node, path)
			return ok(body)
		})
		return body
	}

	c.waitNodes(3)

	// Write caching with a flush far away: every replica holds the records unflushed, and node
	// 1's page says so for the replicas on nodes 2 and 3 too.
	produceUnflushed(t, ctx, cl, adm, "cached")
	eventuallyPage("every replica's unflushed records on node 1's page", 1, "/topics/cached", func(body string) bool {
		return unflushedNodes(body) == 3
	})

	// A total-order topic: the heads of both shards, whichever nodes lead them.
	if _, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"runnel.ordering": new("total")}, "ordered"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ordered", Partition: int32(i % 2), Value: []byte("o")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	head := regexp.MustCompile(`<td>(\d+) \(view \d+\)</td>`)
	for node := int32(1); node <= 3; node++ {
		eventuallyPage(fmt.Sprintf("both shards' heads on node %d", node), node, "/topics/ordered", func(body string) bool {
			heads := head.FindAllStringSubmatch(body, -1)
			if len(heads) != 2 {
				return false
			}
			total := 0
			for _, h := range heads {
				n, _ := strconv.Atoi(h[1])
				total += n
			}
			return total > 0 && !strings.Contains(body, "not known here")
		})
	}

	// An object topic's produces, by stage, on the node that took them.
	if _, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"runnel.storage": new("object")}, "objs"); err != nil {
		t.Fatal(err)
	}
	found := false
	for !found && ctx.Err() == nil {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "objs", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for node := int32(1); node <= 3 && !found; node++ {
			body := page(node, "/topics/objs")
			topicStages := section(body, `id="topic-stages"`)
			objectStages := section(body, `id="topic-object-stages"`)
			found = strings.Contains(topicStages, "<td>commit</td>") && strings.Contains(objectStages, "<td>put</td>")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !found {
		t.Fatal("no node's page for the object topic showed its produce and object stages")
	}

	// The journal: each node's current run, live, and nothing left uncommitted once the files
	// are committed.
	body := eventuallyPage("three live runs in the journal", 1, "/objects", func(body string) bool {
		return strings.Count(section(body, `id="journal"`), `badge live`) == 3
	})
	if !strings.Contains(body, `id="journal-total"><strong>0</strong> uncommitted files`) {
		t.Fatalf("the journal's total: %s", section(body, `id="journal-total"`))
	}
}

// section is the part of an HTML page from marker to the end of its element's table or
// paragraph (enough to look inside one table).
func section(body, marker string) string {
	i := strings.Index(body, marker)
	if i < 0 {
		return ""
	}
	body = body[i:]
	for _, end := range []string{"</table>", "</p>"} {
		if j := strings.Index(body, end); j >= 0 {
			return body[:j]
		}
	}
	return body
}

// TestConsolePeersOverTLS: with the admin endpoints on TLS (--admin-tls) and the cluster
// transport too, node 1's console gathers the other nodes' unflushed data from their admin
// endpoints over HTTPS, presenting its certificate and verifying theirs against the cluster's
// CA bundle.
func TestConsolePeersOverTLS(t *testing.T) {
	pki := securitytest.NewPKI(t, t.TempDir())
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) {
			cert, key := pki.Issue(t, "node"+strconv.Itoa(int(id)), pkix.Name{CommonName: "node" + strconv.Itoa(int(id))})
			cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = cert, key, pki.CAFile
			cfg.ClusterTLS, cfg.AdminTLS = true, true
		}
	})
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitNodes(3)
	produceUnflushed(t, ctx, cl, adm, "cached")
	ccert, ckey := pki.Issue(t, "browser", pkix.Name{CommonName: "browser"})
	pair, err := tls.LoadX509KeyPair(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool(t), Certificates: []tls.Certificate{pair}}}}
	eventually(t, "every replica's unflushed records on node 1's page", 30*time.Second, func() bool {
		resp, err := browser.Get("https://" + c.servers[1].AdminAddr() + "/topics/cached")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && unflushedNodes(string(body)) == 3
	})
}

// produceUnflushed creates topic, replicated on three nodes with write caching and a flush far
// away, and produces records that every replica then holds unflushed.
func produceUnflushed(t *testing.T, ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) {
	t.Helper()
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"write.caching": new("true"), "flush.ms": new("600000"),
		"flush.bytes": new("1000000000")}, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

var unflushedRow = regexp.MustCompile(`node (\d): (\d+) records`)

// unflushedNodes is how many nodes a console topic page shows with unflushed records.
func unflushedNodes(body string) int {
	seen := map[string]bool{}
	for _, m := range unflushedRow.FindAllStringSubmatch(body, -1) {
		if n, _ := strconv.Atoi(m[2]); n > 0 {
			seen[m[1]] = true
		}
	}
	return len(seen)
}
