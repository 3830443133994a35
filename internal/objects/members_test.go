package objects

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/objstore"
)

func TestMemberKeyRoundTrip(t *testing.T) {
	for _, m := range []Member{
		{Node: 1, Host: "127.0.0.1", Port: 9092},
		{Node: 1234567, Host: "::1", Port: 19092, Rack: "rack/a b", Agent: true, Ripcording: true},
		{Node: 2, Host: "10.0.0.2", Port: 9092, Listeners: map[string]string{"PLAINTEXT": "10.0.0.2:9092", "SASL_SSL": "kafka-2.example:9094", "IPV6": "[::1]:9095"}},
	} {
		got, ok := ParseMemberKey(MemberKey(m))
		if !ok || !reflect.DeepEqual(got, m) {
			t.Errorf("ParseMemberKey(MemberKey(%+v)) = %+v, %v", m, got, ok)
		}
		if err := objstore.CheckKey(MemberKey(m)); err != nil {
			t.Errorf("MemberKey(%+v) is no valid key: %v", m, err)
		}
	}
	for _, k := range []string{"", "members/", "members/1", "members/1/", "members/1/!!", "runs/1/e30", "members/1/e30",
		"members/2/" + strings.TrimPrefix(MemberKey(Member{Node: 1, Host: "h", Port: 1}), "members/1/")} {
		if m, ok := ParseMemberKey(k); ok {
			t.Errorf("ParseMemberKey(%q) = %+v; want refused", k, m)
		}
	}
}

// TestMemberEndpoint: an announcement names a process on each of its listeners; one without
// listeners (an older process) names its one address on every listener; an unknown listener or
// a malformed address is none.
func TestMemberEndpoint(t *testing.T) {
	m := Member{Node: 2, Host: "10.0.0.2", Port: 9092, Listeners: map[string]string{"PLAINTEXT": "10.0.0.2:9092",
		"SASL_SSL": "kafka-2.example:9094", "IPV6": "[::1]:9095", "BROKEN": "nohost"}}
	for _, c := range []struct {
		listener string
		host     string
		port     int32
		ok       bool
	}{
		{"SASL_SSL", "kafka-2.example", 9094, true},
		{"IPV6", "::1", 9095, true},
		{"PLAINTEXT", "10.0.0.2", 9092, true},
		{"INTERNAL", "", 0, false},
		{"BROKEN", "", 0, false},
	} {
		if h, p, ok := m.Endpoint(c.listener); h != c.host || p != c.port || ok != c.ok {
			t.Errorf("Endpoint(%s) = %s, %d, %v; want %s, %d, %v", c.listener, h, p, ok, c.host, c.port, c.ok)
		}
	}
	if h, p, ok := (Member{Host: "h", Port: 1}).Endpoint("ANY"); h != "h" || p != 1 || !ok {
		t.Errorf("an announcement without listeners: %s, %d, %v", h, p, ok)
	}
	// Too many listeners for an object store's key: the first one only is announced.
	many := Member{Node: 1, Host: "h", Port: 1, Listeners: map[string]string{}}
	for i := range 40 {
		many.Listeners[fmt.Sprintf("LISTENER_%d", i)] = fmt.Sprintf("kafka-1.example.com:%d", 9000+i)
	}
	if d := NewDirectory(nil, many, nil, nil); d.self.Listeners != nil || objstore.CheckKey(MemberKey(d.self)) != nil {
		t.Errorf("an announcement too long for a key kept its %d listeners", len(d.self.Listeners))
	}
	// Listeners on the process's own host are announced by port, so four listeners of a long
	// host name fit a file store's 255-byte name, and still resolve to that host.
	long := Member{Node: 1, Host: "kafka-1.production.example.com", Port: 9092, Listeners: map[string]string{
		"PLAINTEXT": "kafka-1.production.example.com:9092", "SASL_SSL": "kafka-1.production.example.com:9094",
		"SSL": "kafka-1.production.example.com:9093", "INTERNAL": "10.0.0.1:9095"}}
	d := NewDirectory(nil, long, nil, nil)
	if k := MemberKey(d.self); len(k)-strings.LastIndexByte(k, '/')-1 > 255 {
		t.Errorf("announcement name of %d bytes", len(k)-strings.LastIndexByte(k, '/')-1)
	}
	for name, want := range map[string]string{"SASL_SSL": "kafka-1.production.example.com:9094", "INTERNAL": "10.0.0.1:9095"} {
		if h, p, ok := d.self.Endpoint(name); !ok || net.JoinHostPort(h, strconv.Itoa(int(p))) != want {
			t.Errorf("Endpoint(%s) = %s, %d, %v; want %s", name, h, p, ok, want)
		}
	}
	// The announcement is written to a file store.
	store := testDir(t)
	if err := store.Put(context.Background(), MemberKey(d.self), nil); err != nil {
		t.Errorf("writing the announcement to a file store: %v", err)
	}
}

func FuzzParseMemberKey(f *testing.F) {
	f.Add(MemberKey(Member{Node: 3, Host: "127.0.0.1", Port: 9092, Ripcording: true}))
	f.Add("members/1/e30")
	f.Fuzz(func(t *testing.T, key string) {
		m, ok := ParseMemberKey(key)
		if ok && MemberKey(m) != key {
			t.Fatalf("accepted %q, which is not the key of %+v", key, m)
		}
	})
}

func TestRipcordMembers(t *testing.T) {
	now := time.Unix(1000, 0)
	self := Member{Node: 5, Host: "h5", Port: 5}
	obj := func(m Member, age time.Duration) objstore.Object {
		return objstore.Object{Key: MemberKey(m), Modified: now.Add(-age)}
	}
	objs := []objstore.Object{
		obj(Member{Node: 9, Host: "h9", Port: 9, Ripcording: true}, time.Second),    // live, in Ripcord mode
		obj(Member{Node: 2, Host: "h2", Port: 2, Ripcording: true}, 2*RipcordTTL),   // stopped announcing
		obj(Member{Node: 3, Host: "h3", Port: 3}, 0),                                // up, but not in Ripcord mode
		obj(Member{Node: 5, Host: "old", Port: 1, Ripcording: true}, 0),             // self: our own answer wins
		obj(Member{Node: 1, Host: "h1", Port: 1, Agent: true, Ripcording: true}, 0), // live agent
		{Key: "members/7/garbage", Modified: now},
	}
	got := RipcordMembers(objs, self, now)
	want := []Member{{Node: 1, Host: "h1", Port: 1, Agent: true, Ripcording: true}, self, {Node: 9, Host: "h9", Port: 9, Ripcording: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("RipcordMembers = %+v; want %+v", got, want)
	}
}

// TestDirectory: two processes announce themselves in one store; while both are in Ripcord
// mode each lists the other; out of it, the announcement changes and the list is dropped; a
// clean stop withdraws the announcement.
func TestDirectory(t *testing.T) {
	store := testDir(t)
	var ripcord atomic.Bool
	ripcord.Store(true)
	a := NewDirectory(store, Member{Node: 1, Host: "a", Port: 1}, ripcord.Load, nil)
	b := NewDirectory(store, Member{Node: 2, Host: "b", Port: 2, Agent: true}, ripcord.Load, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { a.Run(ctx); done <- struct{}{} }()
	go func() { b.Run(ctx); done <- struct{}{} }()
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Members()) != 2 || len(b.Members()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("members in Ripcord mode: a sees %+v, b sees %+v; want both", a.Members(), b.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ripcord.Store(false)
	for len(a.Members()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("out of Ripcord mode, a still lists %+v", a.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each process puts its new announcement, then deletes the old one: b may be between the
	// two when a's list has changed.
	for {
		objs, err := store.List(context.Background(), MemberPrefix, "", 0)
		settled := err == nil && len(objs) == 2
		for _, o := range objs {
			if m, ok := ParseMemberKey(o.Key); !ok || m.Ripcording {
				settled = false
			}
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("announcements out of Ripcord mode: %v, %v; want one per process, none in Ripcord mode", objs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	<-done
	if objs, err := store.List(context.Background(), MemberPrefix, "", 0); err != nil || len(objs) != 0 {
		t.Fatalf("after a clean stop: %v, %v; want no announcement", objs, err)
	}
}

// TestRendezvous: every key goes to one of the candidates; a candidate that leaves moves only
// the keys it had; a lookup allocates nothing.
func TestRendezvous(t *testing.T) {
	all, without := []int32{1, 2, 3, 4}, []int32{1, 2, 4}
	moved := 0
	for k := range 1000 {
		key := []byte(fmt.Sprint("key-", k))
		a, b := Rendezvous(key, all), Rendezvous(key, without)
		if a < 1 || a > 4 || b == 3 {
			t.Fatalf("key %d: %d of %v, %d of %v", k, a, all, b, without)
		}
		if a != b {
			if a != 3 {
				t.Fatalf("key %d moved from %d to %d when node 3 left", k, a, b)
			}
			moved++
		}
	}
	if moved < 150 || moved > 350 {
		t.Fatalf("%d of 1000 keys were node 3's; want about a quarter", moved)
	}
	if Rendezvous([]byte("x"), nil) != -1 {
		t.Fatalf("no candidate: want -1")
	}
	key := []byte("topic/7")
	if n := testing.AllocsPerRun(100, func() { Rendezvous(key, all) }); n != 0 {
		t.Fatalf("Rendezvous allocates %v times", n)
	}
}
