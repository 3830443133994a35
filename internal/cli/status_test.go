package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnel-dev/runnel/internal/server"
)

func testStatus() server.Status {
	return server.Status{
		NodeID: 3, ClusterID: "c1", State: "serving", Ready: true,
		KafkaAddr: "127.0.0.1:9092", AdvertisedKafkaAddr: "kafka.example:9092", AdminAddr: "127.0.0.1:9644",
		DataDir: "/var/lib/runnel", UptimeSeconds: 3723.4,
		Topics: []server.TopicStatus{
			{Name: "orders", Partitions: []server.PartitionStatus{
				{Partition: 0, StartOffset: 0, EndOffset: 1200, HighWatermark: 1200, SizeBytes: 1536},
				{Partition: 1, StartOffset: 100, EndOffset: 1300, HighWatermark: 1290, SizeBytes: 3 << 20,
					FlushLagBytes: 2048, FlushLagRecords: 10, FlushLagMillis: 12},
			}},
			{Name: "payments", Partitions: []server.PartitionStatus{{Partition: 0}}},
		},
	}
}

func TestPrintStatus(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, testStatus())
	want := `node 3 of cluster c1: serving (ready), up 1h2m3s
kafka 127.0.0.1:9092 (advertised kafka.example:9092), admin 127.0.0.1:9644, data /var/lib/runnel

TOPIC     PARTITION  START  END   HIGH WATERMARK  SIZE     FLUSH LAG
orders    0          0      1200  1200            1.5 KiB  -
orders    1          100    1300  1290            3.0 MiB  10 rec, 2.0 KiB, 12ms
payments  0          0      0     0               0 B      -
`
	if out.String() != want {
		t.Errorf("printStatus =\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	printStatus(&out, server.Status{NodeID: 0, State: "recovering", UptimeSeconds: 1})
	if got := out.String(); !strings.HasPrefix(got, "node 0: recovering (not ready), up 1s\n") || !strings.HasSuffix(got, "no topics\n") {
		t.Errorf("printStatus while recovering =\n%s", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"},
		{3 << 30, "3.0 GiB"}, {2 << 40, "2.0 TiB"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q; want %q", tc.n, got, tc.want)
		}
	}
}

func TestStatusCommand(t *testing.T) {
	doc, _ := json.Marshal(testStatus())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out, err := runRoot(t, "status", "--admin-addr", addr)
	if err != nil || !strings.Contains(out, "node 3 of cluster c1") || !strings.Contains(out, "payments") {
		t.Errorf("runnel status = %q, %v", out, err)
	}
	out, err = runRoot(t, "status", "--admin-addr", srv.URL, "--json")
	if err != nil || out != string(doc) {
		t.Errorf("runnel status --json = %q, %v; want the document as sent", out, err)
	}
	if _, err := runRoot(t, "status", "--admin-addr", srv.URL+"/elsewhere"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("runnel status against a 404: err = %v; want one naming 404", err)
	}
}
