package replica

import "testing"

// TestNotifyWithoutAWaitChannel: a waiter counted in replWait that found its quorum at once
// never made replCh; an append notifying in that window must not close a nil channel (it
// crashed a broker under franz-go's transaction tests).
func TestNotifyWithoutAWaitChannel(t *testing.T) {
	r := &Replica{replWait: 1}
	r.notifyReplicatedLocked()
	if r.replCh != nil {
		t.Fatal("a notify made a channel nobody waits on")
	}
	r.replCh = make(chan struct{})
	ch := r.replCh
	r.notifyReplicatedLocked()
	select {
	case <-ch:
	default:
		t.Fatal("a waiter's channel was not closed")
	}
}
