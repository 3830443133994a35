package controller

import "slices"

// Request names one request a process proposes: the process run (its writer id, unique per
// process start) and a sequence number of its own. Every attempt to propose the request
// carries the same Request. Proposing goes through the active controller over the cluster
// transport: an attempt whose answer does not come within its time, or whose leader lost its
// leadership before answering, is tried again, and the first attempt may have been committed
// all the same. Without this, the second attempt would apply the command twice: a topic
// created by the first answered TOPIC_ALREADY_EXISTS, a reassignment started twice.
type Request struct {
	Run string `json:"run"`
	Seq uint64 `json:"seq"`
}

// RunRequests are the results of a run's latest successful requests, oldest first. A request
// the command of which failed is not kept: trying it again gets the same failure, or carries
// it out now that it can be (as a client's retry would).
type RunRequests struct {
	Done []DoneRequest `json:"done"`
}

// DoneRequest is a request's result: its value (the rest of Result is for commands that
// never carry a Request).
type DoneRequest struct {
	Seq   uint64 `json:"seq"`
	Value int64  `json:"value,omitempty"`
}

// requestsKept bounds each run's results: more than enough for the requests one process has in
// flight while a controller fails over.
const requestsKept = 256

// appliedRequest returns the result of a request applied before.
func (im *Image) appliedRequest(r *Request) (Result, bool) {
	if r == nil {
		return Result{}, false
	}
	rr := im.Requests[r.Run]
	if rr == nil {
		return Result{}, false
	}
	i := slices.IndexFunc(rr.Done, func(d DoneRequest) bool { return d.Seq == r.Seq })
	if i < 0 {
		return Result{}, false
	}
	return Result{Value: rr.Done[i].Value}, true
}

// recordRequest keeps a request's result, if it carries out a request and succeeded.
func (im *Image) recordRequest(r *Request, res Result) {
	if r == nil || res.Err != nil || r.Run == "" {
		return
	}
	var done []DoneRequest
	if old := im.Requests[r.Run]; old != nil {
		done = old.Done[max(0, len(old.Done)-(requestsKept-1)):]
	}
	done = append(slices.Clip(done), DoneRequest{Seq: r.Seq, Value: res.Value})
	if im.Requests == nil {
		im.Requests = map[string]*RunRequests{}
	}
	im.Requests[r.Run] = &RunRequests{Done: done}
}

// forgetRequests drops a node's previous run's results when it registers again (run: its new
// run): that process is gone and will not try its requests again.
func (im *Image) forgetRequests(previous, run string) {
	if previous != "" && previous != run {
		delete(im.Requests, previous)
	}
}
