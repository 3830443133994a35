package console

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/runnel-dev/runnel/internal/adminops"
)

// Runnel's own views: transactions, a group's lag over time, and (through Config.FlushLag) what
// write caching has not flushed yet.

// FlushLag is what a replica has not yet flushed to disk (write caching).
type FlushLag struct {
	Bytes, Records int64
	Age            time.Duration
}

// ReplicaFlushLag is one node's FlushLag of a partition.
type ReplicaFlushLag struct {
	Node int32
	FlushLag
}

// TxnRow is one transactional id of the transactions page.
type TxnRow struct {
	ID, State  string
	ProducerID int64
	Epoch      int16
	Timeout    time.Duration
	Started    time.Time
	Partitions []string
	Err        string
}

func (c *Console) transactions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	var rows []TxnRow
	_, adm, err := c.client(r)
	if err == nil {
		var listed kadm.ListedTransactions
		if listed, err = adm.ListTransactions(ctx, nil, nil); err == nil && len(listed) > 0 {
			ids := make([]string, 0, len(listed))
			for id := range listed {
				ids = append(ids, id)
			}
			var described kadm.DescribedTransactions
			if described, err = adm.DescribeTransactions(ctx, ids...); err == nil {
				for _, d := range described.Sorted() {
					row := TxnRow{ID: d.TxnID, State: d.State, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch,
						Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond}
					if d.StartTimestamp > 0 {
						row.Started = time.UnixMilli(d.StartTimestamp)
					}
					for _, tp := range d.Topics.Sorted() {
						for _, p := range tp.Partitions {
							row.Partitions = append(row.Partitions, tp.Topic+"/"+strconv.Itoa(int(p)))
						}
					}
					if d.Err != nil {
						row.Err = d.Err.Error()
					}
					rows = append(rows, row)
				}
			}
		}
	}
	// Open transactions first: they hold back read_committed consumers.
	sort.SliceStable(rows, func(i, j int) bool { return open(rows[i].State) && !open(rows[j].State) })
	c.render(w, r, "transactions", page{Title: "Transactions", Nav: "transactions", Data: rows, Error: errText(err)})
}

func open(state string) bool {
	return state == "Ongoing" || strings.HasPrefix(state, "Prepare")
}

// lagAPI answers a group's total lag and per-partition lag now: GET /api/v1/groups/{group}/lag
// (the group page charts it).
func (c *Console) lagAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	cl, _, err := c.client(r)
	var g adminops.Group
	if err == nil {
		g, err = adminops.DescribeGroup(ctx, cl, r.PathValue("group"))
	}
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"t": time.Now().Unix(), "total": g.TotalLag(), "partitions": g.Partitions})
}

// TotalOrder is a total-order topic's sequencing state (SpecLog Describe).
type TotalOrder struct {
	Confirmed       uint64 // positions below are final
	View            uint64
	Trimmed         uint64
	Window          uint64 // the current window's number
	WindowCuts      int
	Interval        time.Duration
	SequencerLeader int32
	Shards          []TotalOrderShard
}

// TotalOrderShard is one shard of a TotalOrder.
type TotalOrderShard struct {
	Shard, Leader int32
	Quota         uint64 // positions per cut in the current window
	Failed        bool
	Head          *ShardHead // nil: its leader did not say
}

// ShardHead is how far a shard's speculation runs, as its leader has it.
type ShardHead struct {
	Delivered    uint64 // the end of the positions delivered (speculatively above the confirmed prefix)
	View         uint64
	DurableSlots int64 // the end of the shard's durable slots (its partition's high watermark)
}
