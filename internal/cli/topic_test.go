package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runRoot runs the root command with args and returns stdout and the error.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot("test")
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs([]string{"retention.ms=1000", "cleanup.policy=compact,delete", "empty=", "a=b=c"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete", "empty": "", "a": "b=c"}
	if len(got) != len(want) {
		t.Fatalf("parseConfigs = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] == nil || *got[k] != v {
			t.Errorf("config %s = %v; want %q", k, got[k], v)
		}
	}
	if got, err := parseConfigs(nil); got != nil || err != nil {
		t.Errorf("parseConfigs(nil) = %v, %v; want nil, nil", got, err)
	}
	for _, bad := range [][]string{{"novalue"}, {"=v"}, {"k=1", "k=2"}} {
		if _, err := parseConfigs(bad); err == nil {
			t.Errorf("parseConfigs(%q) = nil error; want one", bad)
		}
	}
}

func TestAlterOps(t *testing.T) {
	a := alterFlags{set: []string{"b=2", "a=1"}, delete: []string{"c"}}
	ops, err := a.ops()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op          kadm.IncrementalOp
		name, value string
	}{{kadm.SetConfig, "a", "1"}, {kadm.SetConfig, "b", "2"}, {kadm.DeleteConfig, "c", ""}}
	if len(ops) != len(want) {
		t.Fatalf("ops = %+v", ops)
	}
	for i, w := range want {
		o := ops[i]
		if o.Op != w.op || o.Name != w.name || (w.op == kadm.SetConfig && *o.Value != w.value) || (w.op == kadm.DeleteConfig && o.Value != nil) {
			t.Errorf("op %d = %+v; want %+v", i, o, w)
		}
	}
	for _, bad := range []alterFlags{
		{},                        // nothing to do
		{set: []string{"x"}},      // not k=v
		{delete: []string{"k=v"}}, // delete takes a name
		{set: []string{"k=1"}, delete: []string{"k"}}, // both
		{delete: []string{"k", "k"}},                  // twice
	} {
		if _, err := bad.ops(); err == nil {
			t.Errorf("ops(%+v) = nil error; want one", bad)
		}
	}
}

func TestTopicFlagsDefaultsAndEnv(t *testing.T) {
	cmd, _, err := NewRoot("test").Find([]string{"topic"}) // the root adds the "(env ...)" notes
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := cmd.Find([]string{"create"})
	if err != nil {
		t.Fatal(err)
	}
	flags := create.Flags()
	flags.AddFlagSet(cmd.PersistentFlags())
	for name, want := range map[string]string{"brokers": "127.0.0.1:9092", "json": "false", "partitions": "1", "replication-factor": "-1", "validate-only": "false"} {
		if f := flags.Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("flag --%s: %+v; want default %q", name, f, want)
		}
	}
	if f := flags.Lookup("brokers"); !strings.Contains(f.Usage, "RUNNEL_BROKERS") {
		t.Errorf("--brokers usage %q does not name RUNNEL_BROKERS", f.Usage)
	}

	// RUNNEL_BROKERS reaches the command: point it at a closed port and see it in the error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("RUNNEL_BROKERS", addr)
	start := time.Now()
	_, err = runRoot(t, "topic", "list", "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "list topics") {
		t.Errorf("topic list against a closed port: err = %v; want a list topics error naming %s", err, addr)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("failing took %v", time.Since(start))
	}
}

func TestTopicArgsAndFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create"},                           // no topic
		{"topic", "create", "t", "--partitions", "0"}, // bad partitions
		{"topic", "create", "t", "--config", "x"},     // bad config
		{"topic", "describe"},                         // no topic
		{"topic", "delete"},                           // no topic
		{"topic", "list", "extra"},                    // list takes none
		{"topic", "alter-config", "t"},                // nothing to alter
		{"topic", "list", "--brokers", " , "},         // no brokers
	} {
		if _, err := runRoot(t, append(args, "--timeout", "2s")...); err == nil {
			t.Errorf("runnel %s = nil error; want one", strings.Join(args, " "))
		}
	}
}

func TestTopicID(t *testing.T) {
	if got := topicID([16]byte{}); got != "" {
		t.Errorf("topicID(zero) = %q; want empty", got)
	}
	id := [16]byte{0xfb, 0xff, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	if got := topicID(id); len(got) != 22 || strings.ContainsAny(got, "+/=") {
		t.Errorf("topicID = %q; want 22 URL-safe base64 characters, as Kafka prints ids", got)
	}
}

func TestPrintList(t *testing.T) {
	var buf bytes.Buffer
	printList(&buf, []listedTopic{{Name: "a", Partitions: 1, ID: "id-a"}, {Name: "longer-name", Partitions: 12, ID: "id-b"}})
	want := "NAME         PARTITIONS  ID\n" +
		"a            1           id-a\n" +
		"longer-name  12          id-b\n"
	if buf.String() != want {
		t.Errorf("printList =\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestPrintDescriptions(t *testing.T) {
	d := []topicDescription{{Name: "orders", ID: "xyz", Configs: map[string]string{"retention.ms": "1", "cleanup.policy": "compact"},
		Partitions: []partitionInfo{
			{Partition: 0, Leader: 0, Replicas: []int32{0, 1}, ISR: []int32{0}, StartOffset: 0, EndOffset: 10},
			{Partition: 1, Leader: -1, Replicas: []int32{}, ISR: []int32{}, StartOffset: -1, EndOffset: -1, Error: "LEADER_NOT_AVAILABLE"},
		}}, {Name: "plain", Partitions: []partitionInfo{}, Configs: map[string]string{}}}
	var buf bytes.Buffer
	printDescriptions(&buf, d)
	want := `Topic:       orders
ID:          xyz
Partitions:  2
Configs:     cleanup.policy=compact
             retention.ms=1

PARTITION  LEADER  EPOCH  REPLICAS  ISR  START  END  ERROR
0          0       0      0,1       0    0      10   
1          -1      0                     -1     -1   LEADER_NOT_AVAILABLE

Topic:       plain
Partitions:  0
Configs:     (all defaults)

PARTITION  LEADER  EPOCH  REPLICAS  ISR  START  END
`
	if buf.String() != want {
		t.Errorf("printDescriptions =\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestPrintCreatedAlteredDeleted(t *testing.T) {
	var buf bytes.Buffer
	printCreated(&buf, []createdTopic{{Name: "a", ID: "ida", Partitions: 3, ReplicationFactor: 1}, {Name: "b", Partitions: 2, ReplicationFactor: -1, ValidateOnly: true}})
	printAltered(&buf, []alteredTopic{{Name: "a", Set: map[string]string{"y": "2", "x": "1"}, Deleted: []string{"z"}}})
	printDeleted(&buf, []deletedTopic{{Name: "a"}})
	want := "created topic a: 3 partitions, replication factor 1, id ida\n" +
		"topic b is valid: 2 partitions, replication factor -1 (validate only, not created)\n" +
		"altered topic a: set x=1, set y=2, deleted z\n" +
		"deleted topic a\n"
	if buf.String() != want {
		t.Errorf("output =\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestJSONOutput(t *testing.T) {
	f := topicFlags{json: true}
	var buf bytes.Buffer
	in := []listedTopic{{Name: "a", Partitions: 1, ID: "x"}}
	if err := f.output(&buf, in, func(io.Writer) {}); err != nil {
		t.Fatal(err)
	}
	var got []listedTopic
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || len(got) != 1 || got[0] != in[0] {
		t.Errorf("json output %s = %+v, %v", buf.String(), got, err)
	}
}

func TestNonDefaultConfigs(t *testing.T) {
	s := func(v string) *string { return &v }
	got := nonDefaultConfigs([]kadm.Config{
		{Key: "retention.ms", Value: s("1"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "segment.bytes", Value: s("1073741824"), Source: kmsg.ConfigSourceDefaultConfig},
		{Key: "secret", Value: nil, Sensitive: true, Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "min.insync.replicas", Value: s("1"), Source: kmsg.ConfigSourceStaticBrokerConfig},
	})
	if len(got) != 2 || got["retention.ms"] != "1" || got["secret"] != "[hidden]" {
		t.Errorf("nonDefaultConfigs = %v; want retention.ms=1 and secret hidden", got)
	}
}

func TestKafkaErr(t *testing.T) {
	if got := kafkaErr(kerr.TopicAlreadyExists, ""); !strings.HasPrefix(got, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("kafkaErr without message = %q", got)
	}
	if got := kafkaErr(kerr.TopicAlreadyExists, "Topic 'x' already exists."); got != "TOPIC_ALREADY_EXISTS: Topic 'x' already exists." {
		t.Errorf("kafkaErr = %q", got)
	}
}
