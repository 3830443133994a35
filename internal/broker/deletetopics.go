package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

func init() { register(kmsg.DeleteTopics, 0, 6, handleDeleteTopics) }

// handleDeleteTopics deletes topics by name (v0+) or id (v6+), with Kafka's checks: a topic
// named by both name and id, or named twice, is an INVALID_REQUEST.
func handleDeleteTopics(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	b := r.conn.b
	b.adminBarrier(ctx)
	quota := r.mutations(5)
	reqTopics := req.Topics
	if req.Version < 6 {
		reqTopics = nil
		for _, name := range req.TopicNames {
			reqTopics = append(reqTopics, kmsg.DeleteTopicsRequestTopic{Topic: strp(name)})
		}
	}
	add := func(name *string, id [16]byte, code *kerr.Error, msg string) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = name, id
		if code != nil {
			st.ErrorCode, st.ErrorMessage = code.Code, &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	wellFormed := func(rt kmsg.DeleteTopicsRequestTopic) bool { // one of name and id, named once
		if (rt.Topic != nil) == (rt.TopicID != [16]byte{}) {
			return false
		}
		n := 0
		for _, o := range reqTopics {
			if rt.Topic != nil && o.Topic != nil && *o.Topic == *rt.Topic || rt.Topic == nil && o.Topic == nil && o.TopicID == rt.TopicID {
				n++
			}
		}
		return n == 1
	}
	if aerr := deadlinePassed(req.TimeoutMillis); aerr != nil && slices.ContainsFunc(reqTopics, wellFormed) && !b.cfg.NoTopicDeletion {
		// Kafka's controller looks the names and ids up with the passed deadline: the whole
		// request fails, every entry as named (DeleteTopicsRequest.getErrorResponse, no message).
		for _, rt := range reqTopics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = rt.Topic, rt.TopicID, aerr.code.Code
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}
	}
	var zero [16]byte
	nameCount, idCount := map[string]int{}, map[[16]byte]int{}
	for _, rt := range reqTopics {
		switch {
		case rt.Topic != nil && rt.TopicID == zero:
			nameCount[*rt.Topic]++
		case rt.Topic == nil && rt.TopicID != zero:
			idCount[rt.TopicID]++
		}
	}
	// Resolve every well-formed entry to a topic name first.
	type target struct {
		name   string
		id     [16]byte
		byName bool
	}
	var targets []target
	idsGiven := map[[16]byte]bool{}
	dupName, dupID := map[string]bool{}, map[[16]byte]bool{}
	for _, rt := range reqTopics {
		switch {
		case rt.Topic == nil && rt.TopicID == zero:
			add(nil, zero, kerr.InvalidRequest, "Neither topic name nor id were specified.")
		case rt.Topic != nil && rt.TopicID != zero:
			add(rt.Topic, rt.TopicID, kerr.InvalidRequest, "You may not specify both topic name and topic id.")
		case rt.Topic != nil:
			if nameCount[*rt.Topic] > 1 {
				if !dupName[*rt.Topic] {
					dupName[*rt.Topic] = true
					add(rt.Topic, zero, kerr.InvalidRequest, "Duplicate topic name.")
				}
				continue
			}
			tg := target{name: *rt.Topic, byName: true}
			if t, ok := b.topics.Get(tg.name); ok {
				tg.id = t.ID
			}
			targets = append(targets, tg)
		default:
			if idCount[rt.TopicID] > 1 {
				if !dupID[rt.TopicID] {
					dupID[rt.TopicID] = true
					add(nil, rt.TopicID, kerr.InvalidRequest, "Duplicate topic id.")
				}
				continue
			}
			t, ok := b.topics.GetByID(rt.TopicID)
			if !ok {
				add(nil, rt.TopicID, kerr.UnknownTopicID, "This server does not host this topic ID.")
				continue
			}
			idsGiven[t.ID] = true
			targets = append(targets, target{name: t.Name, id: t.ID})
		}
	}
	named := map[controller.TopicID]bool{} // ids a name also maps to
	for _, tg := range targets {
		if tg.byName && tg.id != zero {
			named[tg.id] = true
		}
	}
	// As Kafka's ControllerApis.deleteTopics: DELETE on the cluster lets every topic be
	// described and deleted; else a name the principal may not describe is refused before it
	// is looked up, and one it may describe but not delete after.
	clusterDelete := r.allowedCluster(kmsg.ACLOperationDelete)
	mayDescribe := func(name string) bool { return clusterDelete || r.allowedTopic(kmsg.ACLOperationDescribe, name) }
	for _, tg := range targets {
		name := tg.name
		if !tg.byName && named[tg.id] {
			// As Kafka's ControllerApis.deleteTopics: the id is not deleted, and answered once,
			// with the name's INVALID_REQUEST.
			continue
		}
		if tg.byName && !mayDescribe(name) {
			add(&name, zero, kerr.TopicAuthorizationFailed, "")
			continue
		}
		if tg.byName && tg.id == zero && !b.cfg.NoTopicDeletion {
			add(&name, zero, kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
			continue
		}
		if !clusterDelete && !r.allowedTopic(kmsg.ACLOperationDelete, name) {
			// As Kafka: the name of a topic the principal may not describe is not told (one
			// given by name passed mayDescribe above).
			if mayDescribe(name) {
				add(&name, tg.id, kerr.TopicAuthorizationFailed, "")
			} else {
				add(nil, tg.id, kerr.TopicAuthorizationFailed, "")
			}
			continue
		}
		if tg.byName && tg.id != zero && idsGiven[tg.id] {
			add(&name, tg.id, kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied.")
			continue
		}
		if b.cfg.NoTopicDeletion { // as Kafka: TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST before
			code := kerr.TopicDeletionDisabled
			if req.Version < 3 {
				code = kerr.InvalidRequest
			}
			add(&name, tg.id, code, "Topic deletion is disabled.")
			continue
		}
		t, ok := b.topics.Get(name)
		if !ok || (tg.id != zero && t.ID != tg.id) {
			if tg.byName {
				add(&name, zero, kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
			} else {
				add(nil, tg.id, kerr.UnknownTopicID, "This server does not host this topic ID.")
			}
			continue
		}
		if aerr := quota.admit(int32(len(t.Partitions))); aerr != nil {
			add(&name, t.ID, aerr.code, aerr.msg)
			continue
		}
		if _, aerr := b.propose(ctx, &controller.Command{Op: controller.OpDeleteTopic, DeleteTopic: &controller.DeleteTopic{ID: t.ID}}); aerr != nil {
			add(&name, t.ID, aerr.code, aerr.msg)
			continue
		}
		add(&name, t.ID, nil, "")
	}
	return reply{resp: resp, throttle: quota.throttle}
}
