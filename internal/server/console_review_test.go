package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/server"
)

// reviewConsoleUser is an HTTP client of b's console logged in as user (cookies kept, redirects
// not followed).
func reviewConsoleUser(t *testing.T, base, user, pass string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := 0; ; i++ { // the user's SCRAM credential reaches the node's image shortly after
		resp, err := hc.PostForm(base+"/login", url.Values{"user": {user}, "password": {pass}, "next": {"/"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther {
			return hc
		}
		if i == 20 {
			t.Fatalf("login %s: %s", user, resp.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func reviewGet(t *testing.T, hc *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func reviewSetup(t *testing.T) (*secureBroker, *kadm.Client, string) {
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "visible"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "viewer", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "viewer-pw"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:viewer").AllowHosts("*").Topics("visible").Operations(kadm.OpDescribe, kadm.OpRead, kadm.OpDescribeConfigs)); err != nil {
		t.Fatal(err)
	}
	return b, adm, "http://" + b.s.AdminAddr()
}

// The create form's replication factor and partitions were parsed as int and then truncated
// to int16 / int32: 65537 replicas became 1 (and 65535 the cluster default), 4294967298
// partitions became 2. A request the broker must refuse (INVALID_REPLICATION_FACTOR) created a
// topic.
func TestCreateTopicIntOverflow(t *testing.T) {
	b, _, base := reviewSetup(t)
	hc := reviewConsoleUser(t, base, "admin", "admin-secret")
	for _, f := range []url.Values{
		{"name": {"rf-wrap"}, "partitions": {"1"}, "replication": {"65537"}},
		{"name": {"parts-wrap"}, "partitions": {"4294967298"}, "replication": {"1"}},
	} {
		resp, err := hc.PostForm(base+"/topics", f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tp, ok := b.s.Topics().Get(f.Get("name")); ok {
			t.Errorf("partitions=%s replication=%s: answered %s and created %s with %d partitions", f.Get("partitions"), f.Get("replication"),
				resp.Status, f.Get("name"), len(tp.Partitions))
		}
	}
	// Add partitions: "Total partitions" 4294967298 sets visible's count to 2.
	resp, err := hc.PostForm(base+"/topics/visible/partitions", url.Values{"count": {"4294967298"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 30 { // the registry follows the metadata
		if tp, ok := b.s.Topics().Get("visible"); ok && len(tp.Partitions) != 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tp, ok := b.s.Topics().Get("visible"); ok && len(tp.Partitions) != 1 {
		t.Errorf("count=4294967298: answered %s (%s) and visible now has %d partitions", resp.Status, resp.Header.Get("Location"), len(tp.Partitions))
	}
}

// The login's post-login redirect (next) must stay on this site: "/\t/evil.example" passed
// safeNext and was sent as the Location, which a browser follows to //evil.example.
func TestLoginOpenRedirect(t *testing.T) {
	_, _, base := reviewSetup(t)
	reviewConsoleUser(t, base, "viewer", "viewer-pw") // the viewer can log in
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"user": {"viewer"}, "password": {"viewer-pw"}, "next": {"/\t/evil.example/phish"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultTransport.RoundTrip(req) // the raw answer: Go's client refuses to follow such a Location
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	asBrowser := strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(loc)
	if strings.HasPrefix(asBrowser, "//") {
		t.Fatalf("after login: %s, Location %q: a browser goes to %q", resp.Status, loc, asBrowser)
	}
}

// A group reset "to an offset" beyond the partition's end commits the end, as Kafka's
// kafka-consumer-groups --reset-offsets --to-offset clamps it (and to the start below it);
// Runnel committed the offset asked for, and the page then showed a lag of 0.
func TestResetToOffsetIsClamped(t *testing.T) {
	b, adm, base := reviewSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pcl := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)
	for range 3 {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "visible", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "visible", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	hc := reviewConsoleUser(t, base, "admin", "admin-secret")
	resp, err := hc.PostForm(base+"/groups/g/reset", url.Values{"topic": {"visible"}, "to": {"offset"}, "offset": {"1000"}, "confirm": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("visible", 0); ok && o.At > 3 {
		t.Fatalf("reset to offset 1000 of a partition ending at 3 (%s): committed %d, want 3 (Kafka clamps to the end)", resp.Status, o.At)
	}
}

// docs/console.md: Object storage "Needs DESCRIBE on the cluster (DescribeCluster asks the
// broker)". But DescribeCluster never refuses (as Kafka: any client may describe the cluster;
// DESCRIBE only gates the authorized operations), so a user allowed one topic's DESCRIBE saw
// the cluster's whole object-store journal. The page now goes by the cluster's authorized
// operations.
func TestObjectsPageNeedsClusterDescribe(t *testing.T) {
	b, adm, base := reviewSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Some object-topic traffic, so the journal has the node's run.
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"runnel.storage": kadm.StringPtr("object")}, "objs"); err != nil {
		t.Fatal(err)
	}
	pcl := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)
	if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "objs", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The viewer has no ACL on the cluster.
	hc := reviewConsoleUser(t, base, "viewer", "viewer-pw")
	_, body := reviewGet(t, hc, base+"/objects")
	if strings.Contains(body, `id="journal-total"`) || strings.Contains(body, `id="journal"`) {
		t.Fatalf("a user without DESCRIBE on the cluster sees the object-store journal: %s", section(body, `id="journal"`))
	}
}
