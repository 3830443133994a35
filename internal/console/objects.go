package console

import (
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JournalRun is one writer run's journal backlog: files written to the object store and not yet
// committed by the controller (Config.Journal).
type JournalRun struct {
	Run        string
	Node       int32
	Live       bool  // the node's current run (else the slow path commits its files)
	SlowPath   int32 // the process whose slow path looks after it
	Files      int
	Bytes      int64
	Oldest     time.Time
	Incomplete bool // more files than were listed
}

// objects shows object topics' journal backlog, run by run, and the node's object stages. The
// journal is cluster state, so the user must be allowed to describe the cluster (the broker's
// DescribeCluster tells the cluster's authorized operations).
func (c *Console) objects(w http.ResponseWriter, r *http.Request) {
	var data struct {
		Configured bool
		Runs       []JournalRun
		Stages     []StageRow
		Files      int
		Bytes      int64
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	cl, _, err := c.client(r)
	if err == nil {
		// Any client may use DescribeCluster (as in Kafka): the cluster's authorized
		// operations, told only to a principal allowed to describe it, decide.
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		var resp *kmsg.DescribeClusterResponse
		if resp, err = req.RequestWith(ctx, cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && resp.ClusterAuthorizedOperations&(1<<int(kmsg.ACLOperationDescribe)) == 0 {
			err = kerr.ClusterAuthorizationFailed
		}
	}
	if err == nil && c.cfg.Journal != nil {
		data.Configured = true
		data.Runs, err = c.cfg.Journal(ctx)
		for _, run := range data.Runs {
			data.Files += run.Files
			data.Bytes += run.Bytes
		}
	}
	if last, ok := c.lastSample(); ok {
		data.Stages = stageRows(ObjectStages, last.ObjectStages)
	}
	c.render(w, r, "objects", page{Title: "Object storage", Nav: "objects", Data: data, Error: errText(err)})
}
