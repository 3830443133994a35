package console

import (
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testSession(t *testing.T, id, user string, created, last time.Time) *session {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // reaches nothing; never used
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &session{id: id, user: user, cl: cl, created: created, last: last}
}

func (s *sessions) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id] != nil
}

// A session nobody uses again ends all the same: the console removes it and closes its Kafka
// client (connections, goroutines), so abandoned logins do not pile up in the node's memory.
func TestSessionsSwept(t *testing.T) {
	was := sessionSweep
	t.Cleanup(func() { sessionSweep = was }) // after the console's Close
	sessionSweep = 10 * time.Millisecond
	c := reviewConsole(t, true)
	now := time.Now()
	idle := testSession(t, "idle", "alice", now.Add(-time.Hour), now.Add(-sessionIdle-time.Minute))
	old := testSession(t, "old", "alice", now.Add(-sessionMax-time.Minute), now)
	live := testSession(t, "live", "bob", now, now)
	for _, ss := range []*session{idle, old, live} {
		c.sessions.add(ss)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.sessions.has("idle") || c.sessions.has("old") {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s the ended sessions are still kept: idle %v, old %v", c.sessions.has("idle"), c.sessions.has("old"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The sweep closes the clients after it has removed the sessions (outside the lock): a
	// moment later.
	for _, ss := range []*session{idle, old} {
		select {
		case <-ss.cl.Context().Done():
		case <-time.After(5 * time.Second):
			t.Errorf("session %s was removed and its Kafka client still open after 5 s", ss.id)
		}
	}
	if !c.sessions.has("live") || live.cl.Context().Err() != nil {
		t.Errorf("the live session was ended by the sweep")
	}
}

// The sweeper ends with the console: no goroutine is left behind, and sessions are closed.
func TestSessionSweeperStopsWithConsole(t *testing.T) {
	c, err := New(Config{Bootstrap: func() []string { return []string{"127.0.0.1:1"} },
		Login: &Login{Bootstrap: func() []string { return []string{"127.0.0.1:1"} }, Mechanisms: func(string) []string { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(goroutines(), "sweepSessions"); i++ {
		if i == 100 {
			t.Fatal("no session sweeper runs")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ss := testSession(t, "s", "alice", time.Now(), time.Now())
	c.sessions.add(ss)
	c.Close()
	c.Close() // twice is fine
	if g := goroutines(); strings.Contains(g, "sweepSessions") {
		t.Fatalf("the session sweeper runs after Close:\n%s", g)
	}
	if ss.cl.Context().Err() == nil {
		t.Error("a session's Kafka client is open after Close")
	}
	late := testSession(t, "late", "alice", time.Now(), time.Now()) // a login that ends after Close
	c.sessions.add(late)
	if c.sessions.has("late") || late.cl.Context().Err() == nil {
		t.Error("a session added after Close is kept open")
	}
}

// One user's logins in a loop keep at most maxUserSessions sessions: a new one ends the user's
// least recently used, and nobody else's.
func TestUserSessionsLimited(t *testing.T) {
	c := reviewConsole(t, true)
	now := time.Now()
	bob := testSession(t, "bob", "bob", now, now.Add(-time.Minute))
	c.sessions.add(bob)
	var alice []*session
	for i := range maxUserSessions + 1 {
		ss := testSession(t, fmt.Sprint("alice-", i), "alice", now, now.Add(time.Duration(i)*time.Second))
		alice = append(alice, ss)
		c.sessions.add(ss)
	}
	c.sessions.mu.Lock()
	n := len(c.sessions.m)
	c.sessions.mu.Unlock()
	if n != maxUserSessions+1 {
		t.Errorf("sessions after %d logins of alice and 1 of bob: %d; want %d", maxUserSessions+1, n, maxUserSessions+1)
	}
	if c.sessions.has("alice-0") || alice[0].cl.Context().Err() == nil {
		t.Error("alice's least recently used session was kept open")
	}
	if !c.sessions.has("bob") || !c.sessions.has(fmt.Sprint("alice-", maxUserSessions)) {
		t.Error("bob's session or alice's newest was ended")
	}
}

func goroutines() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}
