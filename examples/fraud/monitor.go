package main

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/runnel-dev/runnel/speclog"
)

// Payment is one record of the payments log.
type Payment struct {
	Card   string `json:"card"`
	Amount int64  `json:"amount"` // cents
}

// Alert says a card spent more than the limit over its last Window payments.
type Alert struct {
	Card     string `json:"card"`
	Position uint64 `json:"position"` // of the payment that crossed the limit
	Spent    int64  `json:"spent"`
}

// Monitor is the fraud monitor of the SpecLog paper's evaluation, written the way a speculative
// subscriber must be: it updates its state from each record as soon as it is delivered
// (speculatively), keeps an undo entry per record, and holds the alerts it raises until a
// confirmation covers them. A fail notice rolls the state back to the notice's position and
// drops the alerts raised from the records it voids; the correct records follow and are
// processed like any other. Only confirmed alerts are ever externalized.
type Monitor struct {
	Window int   // payments per card the limit applies to
	Limit  int64 // cents over the window

	recent  map[string][]int64 // per card: its last Window amounts
	undo    []undo             // per processed record, in position order
	pending []Alert            // raised, not confirmed yet
	// Confirmed receives every alert once its position is confirmed (externalized).
	Confirmed func(Alert)
}

type undo struct {
	pos     uint64
	card    string
	evicted *int64 // the amount the record pushed out of the card's window
}

// NewMonitor starts an empty monitor.
func NewMonitor(window int, limit int64, confirmed func(Alert)) *Monitor {
	return &Monitor{Window: window, Limit: limit, recent: map[string][]int64{}, Confirmed: confirmed}
}

// Handle takes the subscription's next event.
func (m *Monitor) Handle(ev speclog.Event) error {
	switch ev.Kind {
	case speclog.EventRecord:
		var p Payment
		if err := json.Unmarshal(ev.Record.Value, &p); err != nil {
			return fmt.Errorf("payment at %d: %w", ev.Position, err)
		}
		m.apply(ev.Position, p)
	case speclog.EventConfirm:
		n := 0
		for _, a := range m.pending {
			if a.Position >= ev.UpTo {
				break
			}
			m.Confirmed(a)
			n++
		}
		m.pending = m.pending[n:]
		// Undo entries of confirmed records are never needed again.
		i := sort.Search(len(m.undo), func(i int) bool { return m.undo[i].pos >= ev.UpTo })
		m.undo = m.undo[i:]
	case speclog.EventFail:
		m.rollback(ev.After)
	}
	return nil
}

func (m *Monitor) apply(pos uint64, p Payment) {
	w := append(m.recent[p.Card], p.Amount)
	u := undo{pos: pos, card: p.Card}
	if len(w) > m.Window {
		ev := w[0]
		u.evicted = &ev
		w = w[1:]
	}
	m.recent[p.Card] = w
	m.undo = append(m.undo, u)
	var spent int64
	for _, a := range w {
		spent += a
	}
	if spent > m.Limit {
		m.pending = append(m.pending, Alert{Card: p.Card, Position: pos, Spent: spent})
	}
}

// rollback undoes every record at or after position after, newest first.
func (m *Monitor) rollback(after uint64) {
	for len(m.undo) > 0 && m.undo[len(m.undo)-1].pos >= after {
		u := m.undo[len(m.undo)-1]
		m.undo = m.undo[:len(m.undo)-1]
		w := m.recent[u.card]
		w = w[:len(w)-1]
		if u.evicted != nil {
			w = append([]int64{*u.evicted}, w...)
		}
		m.recent[u.card] = w
	}
	i := sort.Search(len(m.pending), func(i int) bool { return m.pending[i].Position >= after })
	m.pending = m.pending[:i]
}
