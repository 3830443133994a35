package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestJavaClient: the Apache Kafka Java client (kafka-clients 4.1.1) with its defaults against
// Runnel: an idempotent producer (enable.idempotence=true, acks=all, 5 in flight), then group
// consumers of both protocols — KIP-848 (group.protocol=consumer) taking turns, and a classic
// one — each reading every record exactly once.
func TestJavaClient(t *testing.T) {
	java := testclients.Java(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("java", 4)
	run := javaRunner(t, java, b.addr)
	if out := run("produce", "java", "1000"); !strings.Contains(out, "acked 1000") {
		t.Fatalf("java produce: %s", out)
	}
	if got := endOffsets(b); got != 1000 {
		t.Fatalf("the topic holds %d records after 1000 idempotent sends; want 1000", got)
	}
	first := run("consume", "java", "j848", "consumer", "600")
	second := run("consume", "java", "j848", "consumer", "400")
	valuesOnce(t, "KIP-848 consumers in turn", "j", 1000, first, second)
	valuesOnce(t, "classic consumer", "j", 1000, run("consume", "java", "jclassic", "classic", "1000"))

	// The groups really used the protocols asked for.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	listed, err := kmsg.NewPtrListGroupsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, g := range listed.Groups {
		types[g.Group] = g.GroupType
	}
	if types["j848"] != "consumer" || types["jclassic"] != "classic" {
		t.Errorf("group types %v; want j848 consumer, jclassic classic", types)
	}
	// And the producer was idempotent: the partitions remember its producer id.
	producers, err := kadm.NewClient(cl).DescribeProducers(context.Background(), kadm.TopicsSet{"java": {0: {}, 1: {}, 2: {}, 3: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	producers.EachProducer(func(kadm.DescribedProducer) { n++ })
	if n != 4 {
		t.Errorf("DescribeProducers lists %d producers; want the Java producer on each of 4 partitions", n)
	}
}

// TestJavaStaticMember: KIP-848 static membership with the Java client (group.protocol=consumer,
// group.instance.id). A static consumer that closes leaves for a while (member epoch -2): the
// group keeps it, with its partitions, for its session timeout; the same instance started again
// takes its place under a new member id, and between them they read every record once.
func TestJavaStaticMember(t *testing.T) {
	java := testclients.Java(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("static", 4)
	run := javaRunner(t, java, b.addr)
	if out := run("produce", "static", "1000"); !strings.Contains(out, "acked 1000") {
		t.Fatalf("java produce: %s", out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	describe := func() []kmsg.ConsumerGroupDescribeResponseGroupMember {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"jstatic"}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
		}
		return resp.Groups[0].Members
	}
	partitions := func(m kmsg.ConsumerGroupDescribeResponseGroupMember) int {
		n := 0
		for _, tp := range m.Assignment.TopicPartitions {
			n += len(tp.Partitions)
		}
		return n
	}

	first := run("consume", "static", "jstatic", "consumer", "300", "instance-a")
	members := describe()
	if len(members) != 1 || members[0].InstanceID == nil || *members[0].InstanceID != "instance-a" ||
		members[0].MemberEpoch != -2 || partitions(members[0]) != 4 {
		t.Fatalf("after the static consumer closed: members %+v; want instance-a kept at epoch -2 with its 4 partitions", members)
	}
	left := members[0].MemberID

	second := run("consume", "static", "jstatic", "consumer", "700", "instance-a")
	members = describe()
	if len(members) != 1 || *members[0].InstanceID != "instance-a" || members[0].MemberID == left || members[0].MemberEpoch != -2 {
		t.Fatalf("after the instance came back and closed again: members %+v; want one instance-a member, a new member id, epoch -2", members)
	}
	valuesOnce(t, "a static consumer and its restart", "j", 1000, first, second)
}

// javaRunner runs the Java test client's commands (JavaClient.java) against addr.
func javaRunner(t *testing.T, java []string, addr string) func(args ...string) string {
	return func(args ...string) string {
		return runClient(t, 120*time.Second, "", java[0], append(append(java[1:], args[0], addr), args[1:]...)...)
	}
}
