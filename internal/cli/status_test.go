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
				{Partition: 0, Role: "leader", LeaderEpoch: 2, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2, 3},
					StartOffset: 0, EndOffset: 1200, HighWatermark: 1200, SizeBytes: 1536},
				{Partition: 1, Role: "follower", LeaderEpoch: 0, Replicas: []int32{1, 3, 2}, ISR: []int32{1, 3},
					StartOffset: 100, EndOffset: 1300, HighWatermark: 1290, SizeBytes: 3 << 20,
					FlushLagBytes: 2048, FlushLagRecords: 10, FlushLagMillis: 12},
			}},
			{Name: "payments", Partitions: []server.PartitionStatus{{Partition: 0, Role: "none", LeaderEpoch: -1}}},
		},
		Cluster: &server.ClusterStatus{ControllerID: 1, Voters: []int32{1, 2, 3}, Partitions: 3, UnderReplicated: 1, CommandLevel: 2, CommandLevelHeld: true,
			Nodes: []server.NodeStatus{
				{ID: 1, KafkaAddr: "h1:9092", ClusterAddr: "h1:9093", State: "live", Leaders: 2, Replicas: 3},
				{ID: 2, KafkaAddr: "h2:9092", ClusterAddr: "h2:9093", State: "fenced", Leaders: 0, Replicas: 3},
				{ID: 3, KafkaAddr: "h3:9092", ClusterAddr: "h3:9093", State: "live", Leaders: 1, Replicas: 3},
			}},
	}
}

func TestPrintStatus(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, testStatus())
	want := `node 3 of cluster c1: serving (ready), up 1h2m3s
kafka 127.0.0.1:9092 (advertised kafka.example:9092), admin 127.0.0.1:9644, data /var/lib/runnel

controller 1 (voters [1 2 3], command level 2, held); 3 partitions, 0 offline, 1 under-replicated
NODE  STATE   KAFKA    CLUSTER  LEADERS  REPLICAS
1     live    h1:9092  h1:9093  2        3
2     fenced  h2:9092  h2:9093  0        3
3     live    h3:9092  h3:9093  1        3

TOPIC     PARTITION  ROLE      EPOCH  REPLICAS  ISR    START  END   HIGH WATERMARK  SIZE     FLUSH LAG
orders    0          leader    2      3,1,2     1,2,3  0      1200  1200            1.5 KiB  -
orders    1          follower  0      1,3,2     1,3    100    1300  1290            3.0 MiB  10 rec, 2.0 KiB, 12ms
payments  0          none      -1     -         -      0      0     0               0 B      -
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
