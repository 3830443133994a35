package broker

import (
	"cmp"
	"context"
	"net"
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/security"
)

// Authorization (docs/security.md §4): each handler asks, for the resources its request names,
// whether the connection's principal may do Kafka's operation on them, and answers Kafka's
// error for those it may not, before it touches any data. Without an authorizer every request
// is allowed.

// aclIndex returns the index of the bindings in the node's current metadata.
func (b *Broker) aclIndex() *security.ACLIndex {
	img := b.cl.Image()
	return b.acls.Index(img.ACLVersion, img.ACLs)
}

// aclHost is a connection's host as ACLs name it: the IP address.
func aclHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// allowed reports whether the request's principal may do op on the resource.
func (r *request) allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	z := r.conn.b.cfg.Security.Authorizer
	if z == nil {
		return true
	}
	return z.Authorize(r.conn.b.aclIndex(), r.conn.principal, r.conn.host, op, rt, name)
}

// allowedExplicitly reports whether an ACL (or super.users) lets the request's principal do op
// on the resource; neither running without an authorizer nor allow.everyone.if.no.acl.found
// does. For what lets a principal act as, or read the credentials of, another.
func (r *request) allowedExplicitly(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	z := r.conn.b.cfg.Security.Authorizer
	return z != nil && z.AuthorizeExplicitly(r.conn.b.aclIndex(), r.conn.principal, r.conn.host, op, rt, name)
}

// allowedCluster reports whether the request's principal may do op on the cluster.
func (r *request) allowedCluster(op kmsg.ACLOperation) bool {
	return r.allowed(op, kmsg.ACLResourceTypeCluster, security.ClusterResource)
}

func (r *request) allowedTopic(op kmsg.ACLOperation, topic string) bool {
	return r.allowed(op, kmsg.ACLResourceTypeTopic, topic)
}

// undescribableTopics is Kafka's message for a described group that is hidden because its
// members' assignments name a topic the client may not describe.
const undescribableTopics = "The group has described topic(s) that the client is not authorized to describe."

// mayDescribe returns a check of DESCRIBE on topics for the request's principal that asks the
// authorizer once per topic name.
func (r *request) mayDescribe() func(topic string) bool {
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, asked := seen[topic]
		if !asked {
			ok = r.allowedTopic(kmsg.ACLOperationDescribe, topic)
			seen[topic] = ok
		}
		return ok
	}
}

// mayDescribeAssignments reports whether may allows every topic in a consumer group's current
// and target assignments: Kafka (KAFKA-18813) hides a group that has one the client may not
// describe, so that its topics' names do not leak through the group.
func mayDescribeAssignments(may func(string) bool, members []kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
	for _, m := range members {
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if !may(tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}

// mayDescribeShareAssignments is mayDescribeAssignments for a share group, whose members have
// only their current assignment.
func mayDescribeShareAssignments(may func(string) bool, members []kmsg.ShareGroupDescribeResponseGroupMember) bool {
	for _, m := range members {
		for _, tp := range m.Assignment.TopicPartitions {
			if !may(tp.Topic) {
				return false
			}
		}
	}
	return true
}

// describeFilter is the group coordinator's view of the topics the request's principal may
// describe, for resolving a regex subscription (nil without an authorizer: every topic). It
// holds the connection's principal and host, not the request, and reads the ACLs in force
// when it is asked.
func (r *request) describeFilter() group.TopicFilter {
	b, principal, host := r.conn.b, r.conn.principal, r.conn.host
	z := b.cfg.Security.Authorizer
	if z == nil {
		return nil
	}
	return func(topic string) bool {
		return z.Authorize(b.aclIndex(), principal, host, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
	}
}

func (r *request) allowedGroup(op kmsg.ACLOperation, group string) bool {
	return r.allowed(op, kmsg.ACLResourceTypeGroup, group)
}

func (r *request) allowedTxnID(op kmsg.ACLOperation, id string) bool {
	return r.allowed(op, kmsg.ACLResourceTypeTransactionalId, id)
}

// allowedAnyTopic reports whether the principal may do op on some topic (an idempotent
// producer's InitProducerId).
func (r *request) allowedAnyTopic(op kmsg.ACLOperation) bool {
	z := r.conn.b.cfg.Security.Authorizer
	if z == nil {
		return true
	}
	return z.AuthorizeAnyTopic(r.conn.b.aclIndex(), r.conn.principal, r.conn.host, op)
}

// configAuthz checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource: a topic's
// configs are the topic's, a group's the group's, a broker's (and the cluster defaults) the
// cluster's.
func (r *request) configAuthz(rt kmsg.ConfigResourceType, name string, op kmsg.ACLOperation) *adminError {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !r.allowedTopic(op, name) {
			return adminErr(kerr.TopicAuthorizationFailed, "")
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !r.allowedCluster(op) {
			return adminErr(kerr.ClusterAuthorizationFailed, "")
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !r.allowedGroup(op, name) {
			return adminErr(kerr.GroupAuthorizationFailed, "")
		}
	}
	return nil
}

// authorize runs a request's handler under the authorizer: requests whose every resource is
// denied are answered here with Kafka's error, without running the handler; requests naming
// several resources run with only the allowed ones, and the denied ones are answered with
// their error. Checks of resources only a handler resolves (topics of produce, fetch and list
// offsets; configs; topic admin; metadata) are in the handlers.
func authorize(ctx context.Context, r *request, handle func(context.Context, *request) reply) reply {
	if r.conn.b.cfg.Security.Authorizer == nil {
		return handle(ctx, r)
	}
	deny := func(code *kerr.Error) reply {
		resp := r.req.ResponseKind()
		setTopLevelError(resp, code.Code)
		return reply{resp: resp}
	}
	const (
		read, write, describe, del, alter = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter
	)
	groupDenied, txnDenied, clusterDenied := kerr.GroupAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.ClusterAuthorizationFailed
	switch req := r.req.(type) {
	case *kmsg.DescribeLogDirsRequest, *kmsg.ListPartitionReassignmentsRequest, *kmsg.DescribeUserSCRAMCredentialsRequest,
		*kmsg.DescribeQuorumRequest:
		if !r.allowedCluster(describe) {
			return deny(clusterDenied)
		}
	case *kmsg.ElectLeadersRequest:
		if !r.allowedCluster(alter) {
			// As Kafka: every partition named answers it too (v0 has no top-level error).
			resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
			resp.ErrorCode = clusterDenied.Code
			for _, rt := range req.Topics {
				t := kmsg.NewElectLeadersResponseTopic()
				t.Topic = rt.Topic
				for _, p := range rt.Partitions {
					tp := kmsg.NewElectLeadersResponseTopicPartition()
					tp.Partition, tp.ErrorCode = p, clusterDenied.Code
					t.Partitions = append(t.Partitions, tp)
				}
				resp.Topics = append(resp.Topics, t)
			}
			return reply{resp: resp}
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		if !r.allowedCluster(alter) {
			// As Kafka (AlterPartitionReassignmentsRequest.getErrorResponse): every partition
			// named answers it too.
			resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
			resp.ErrorCode = clusterDenied.Code
			for _, rt := range req.Topics {
				t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
				t.Topic = rt.Topic
				for _, p := range rt.Partitions {
					tp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
					tp.Partition, tp.ErrorCode = p.Partition, clusterDenied.Code
					t.Partitions = append(t.Partitions, tp)
				}
				resp.Topics = append(resp.Topics, t)
			}
			return reply{resp: resp}
		}
	case *kmsg.AddRaftVoterRequest, *kmsg.RemoveRaftVoterRequest, *kmsg.UnregisterBrokerRequest, *kmsg.UpdateFeaturesRequest:
		if !r.allowedCluster(alter) {
			return deny(clusterDenied)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if !r.allowedCluster(alter) {
			resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
			seen := map[string]bool{}
			add := func(user string) {
				if !seen[user] {
					seen[user] = true
					res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
					res.User, res.ErrorCode = user, clusterDenied.Code
					resp.Results = append(resp.Results, res)
				}
			}
			for _, d := range req.Deletions {
				add(d.Name)
			}
			for _, u := range req.Upsertions {
				add(u.Name)
			}
			return reply{resp: resp}
		}
	case *kmsg.JoinGroupRequest:
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
	case *kmsg.SyncGroupRequest:
		if syncGroupProtocolMissing(req) { // answered by the handler before any ACL, as Kafka
			break
		}
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
	case *kmsg.HeartbeatRequest:
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
	case *kmsg.LeaveGroupRequest:
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
		for _, t := range req.SubscribedTopicNames { // as Kafka (KAFKA-18813): DESCRIBE on every topic named
			if !r.allowedTopic(describe, t) {
				return deny(kerr.TopicAuthorizationFailed)
			}
		}
	case *kmsg.StreamsGroupHeartbeatRequest:
		if !r.allowedGroup(read, req.Group) {
			return deny(groupDenied)
		}
		if req.Topology != nil { // as Kafka: DESCRIBE on every topic the topology names
			for _, t := range streamsRequiredTopics(req.Topology) {
				if !r.allowedTopic(describe, t) {
					return deny(kerr.TopicAuthorizationFailed)
				}
			}
		}
	case *kmsg.OffsetDeleteRequest:
		if !r.allowedGroup(del, req.Group) {
			return deny(groupDenied)
		}
		var denied []kmsg.OffsetDeleteRequestTopic
		sub := *req
		sub.Topics, denied = splitTopics(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return r.allowedTopic(read, t.Topic) })
		r.req = &sub
		return after(handle(ctx, r), func(resp kmsg.Response) {
			od := resp.(*kmsg.OffsetDeleteResponse)
			if od.ErrorCode != 0 {
				return // as Kafka: the group's error alone
			}
			var rows []kmsg.OffsetDeleteResponseTopic
			for _, t := range denied {
				st := kmsg.NewOffsetDeleteResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetDeleteResponseTopicPartition()
					sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				rows = append(rows, st)
			}
			od.Topics = mergeOffsetDeleteTopics(od.Topics, rows)
		})
	case *kmsg.OffsetCommitRequest:
		groupOK := r.allowedGroup(read, req.Group)
		var denied []kmsg.OffsetCommitRequestTopic
		sub := *req
		sub.Topics, denied = splitTopics(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return groupOK && r.allowedTopic(read, t.Topic) })
		answer := func(oc *kmsg.OffsetCommitResponse) {
			code := kerr.TopicAuthorizationFailed.Code
			if !groupOK {
				code = groupDenied.Code
			}
			oc.Topics = mergeOffsetCommitTopics(append(oc.Topics, offsetCommitErrors(denied, code)...))
		}
		if len(sub.Topics) == 0 {
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			answer(resp)
			return reply{resp: resp}
		}
		r.req = &sub
		return after(handle(ctx, r), func(resp kmsg.Response) { answer(resp.(*kmsg.OffsetCommitResponse)) })
	case *kmsg.TxnOffsetCommitRequest:
		code := int16(0)
		switch {
		case !r.allowedTxnID(write, req.TransactionalID):
			code = txnDenied.Code
		case !r.allowedGroup(read, req.Group):
			code = groupDenied.Code
		}
		var denied []kmsg.TxnOffsetCommitRequestTopic
		sub := *req
		sub.Topics, denied = splitTopics(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return code == 0 && r.allowedTopic(read, t.Topic) })
		answer := func(tc *kmsg.TxnOffsetCommitResponse) {
			tc.Topics = mergeTxnOffsetCommitTopics(append(tc.Topics, txnOffsetCommitErrors(denied, cmp.Or(code, kerr.TopicAuthorizationFailed.Code))...))
		}
		if len(sub.Topics) == 0 {
			resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			answer(resp)
			return reply{resp: resp}
		}
		r.req = &sub
		return after(handle(ctx, r), func(resp kmsg.Response) { answer(resp.(*kmsg.TxnOffsetCommitResponse)) })
	case *kmsg.OffsetFetchRequest:
		if req.Version < 8 && !r.allowedGroup(describe, req.Group) {
			return reply{resp: offsetFetchError(req, groupDenied.Code)}
		}
		return after(handle(ctx, r), func(resp kmsg.Response) { r.filterOffsetFetch(req, resp.(*kmsg.OffsetFetchResponse)) })
	case *kmsg.DescribeGroupsRequest:
		return after(handle(ctx, r), func(resp kmsg.Response) {
			dg := resp.(*kmsg.DescribeGroupsResponse)
			for i, g := range dg.Groups {
				if !r.allowedGroup(describe, g.Group) {
					ng := kmsg.NewDescribeGroupsResponseGroup()
					ng.Group, ng.ErrorCode, ng.AuthorizedOperations = g.Group, groupDenied.Code, notRequested
					dg.Groups[i] = ng
				}
			}
		})
	case *kmsg.StreamsGroupDescribeRequest:
		return after(handle(ctx, r), func(resp kmsg.Response) {
			dg := resp.(*kmsg.StreamsGroupDescribeResponse)
			for i, g := range dg.Groups {
				if !r.allowedGroup(describe, g.Group) {
					ng := kmsg.NewStreamsGroupDescribeResponseGroup()
					ng.Group, ng.ErrorCode, ng.AuthorizedOperations = g.Group, groupDenied.Code, notRequested
					dg.Groups[i] = ng
				}
			}
		})
	case *kmsg.ConsumerGroupDescribeRequest:
		return after(handle(ctx, r), func(resp kmsg.Response) {
			dg := resp.(*kmsg.ConsumerGroupDescribeResponse)
			may := r.mayDescribe()
			for i, g := range dg.Groups {
				switch {
				case !r.allowedGroup(describe, g.Group):
					ng := kmsg.NewConsumerGroupDescribeResponseGroup()
					ng.Group, ng.ErrorCode, ng.AuthorizedOperations = g.Group, groupDenied.Code, notRequested
					dg.Groups[i] = ng
				case g.ErrorCode == 0 && !mayDescribeAssignments(may, g.Members):
					ng := kmsg.NewConsumerGroupDescribeResponseGroup()
					ng.Group, ng.ErrorCode, ng.ErrorMessage, ng.AuthorizedOperations = g.Group, kerr.TopicAuthorizationFailed.Code, new(undescribableTopics), notRequested
					dg.Groups[i] = ng
				}
			}
		})
	case *kmsg.ListGroupsRequest:
		if r.allowedCluster(describe) {
			break
		}
		return after(handle(ctx, r), func(resp kmsg.Response) {
			lg := resp.(*kmsg.ListGroupsResponse)
			lg.Groups = slices.DeleteFunc(lg.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !r.allowedGroup(describe, g.Group) })
		})
	case *kmsg.DeleteGroupsRequest:
		sub := *req
		var denied []string
		sub.Groups, denied = splitTopics(uniqueGroups(req.Groups), func(g string) bool { return r.allowedGroup(del, g) })
		answer := func(dg *kmsg.DeleteGroupsResponse) {
			for _, g := range denied {
				ng := kmsg.NewDeleteGroupsResponseGroup()
				ng.Group, ng.ErrorCode = g, groupDenied.Code
				dg.Groups = append(dg.Groups, ng)
			}
		}
		if len(sub.Groups) == 0 {
			resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
			answer(resp)
			return reply{resp: resp}
		}
		r.req = &sub
		return after(handle(ctx, r), func(resp kmsg.Response) { answer(resp.(*kmsg.DeleteGroupsResponse)) })
	case *kmsg.FindCoordinatorRequest:
		allowed := func(key string) bool {
			if req.CoordinatorType == 1 {
				return r.allowedTxnID(describe, key)
			}
			return r.allowedGroup(describe, key)
		}
		code := groupDenied.Code
		if req.CoordinatorType == 1 {
			code = txnDenied.Code
		}
		if req.Version < 4 {
			if !allowed(req.CoordinatorKey) {
				resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
				resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
				return reply{resp: resp}
			}
			break
		}
		sub := *req
		var denied []string
		sub.CoordinatorKeys, denied = splitTopics(req.CoordinatorKeys, allowed)
		r.req = &sub
		return after(handle(ctx, r), func(resp kmsg.Response) {
			fc := resp.(*kmsg.FindCoordinatorResponse)
			for _, key := range denied {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.ErrorCode, c.NodeID, c.Port = key, code, -1, -1
				fc.Coordinators = append(fc.Coordinators, c)
			}
		})
	case *kmsg.InitProducerIDRequest:
		if req.TransactionalID != nil {
			if !r.allowedTxnID(write, *req.TransactionalID) {
				return deny(txnDenied)
			}
		} else if !r.allowedCluster(kmsg.ACLOperationIdempotentWrite) && !r.allowedAnyTopic(write) {
			return deny(clusterDenied)
		}
	case *kmsg.AddOffsetsToTxnRequest:
		switch {
		case !r.allowedTxnID(write, req.TransactionalID):
			return deny(txnDenied)
		case !r.allowedGroup(read, req.Group):
			return deny(groupDenied)
		}
	case *kmsg.EndTxnRequest:
		if !r.allowedTxnID(write, req.TransactionalID) {
			return deny(txnDenied)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if denied := r.addPartitionsDenied(req); denied != nil {
			return reply{resp: denied}
		}
	case *kmsg.DescribeTransactionsRequest:
		return after(handle(ctx, r), func(resp kmsg.Response) {
			dt := resp.(*kmsg.DescribeTransactionsResponse)
			may := r.mayDescribe()
			for i, s := range dt.TransactionStates {
				if !r.allowedTxnID(describe, s.TransactionalID) {
					ns := kmsg.NewDescribeTransactionsResponseTransactionState()
					ns.TransactionalID, ns.ErrorCode = s.TransactionalID, txnDenied.Code
					dt.TransactionStates[i] = ns
					continue
				}
				// As Kafka: the transaction's topics the principal may not describe are left out.
				dt.TransactionStates[i].Topics = slices.DeleteFunc(s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
					return !may(t.Topic)
				})
			}
		})
	case *kmsg.ListTransactionsRequest:
		return after(handle(ctx, r), func(resp kmsg.Response) {
			lt := resp.(*kmsg.ListTransactionsResponse)
			lt.TransactionStates = slices.DeleteFunc(lt.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
				return !r.allowedTxnID(describe, s.TransactionalID)
			})
		})
	}
	return handle(ctx, r)
}

// after runs fn on the reply's response once it is complete (after its wait, if any).
func after(rep reply, fn func(kmsg.Response)) reply {
	if rep.resp == nil {
		return rep
	}
	if rep.wait == nil {
		fn(rep.resp)
		return rep
	}
	wait := rep.wait
	rep.wait = func() { wait(); fn(rep.resp) }
	return rep
}

// splitTopics splits a request's entries into the allowed and the denied.
func splitTopics[T any](all []T, allowed func(T) bool) (yes, no []T) {
	for _, t := range all {
		if allowed(t) {
			yes = append(yes, t)
		} else {
			no = append(no, t)
		}
	}
	return yes, no
}

// setTopLevelError sets a response's top-level ErrorCode field (responses that have one).
func setTopLevelError(resp kmsg.Response, code int16) {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() {
		f.SetInt(int64(code))
	}
}

// filterOffsetFetch hides, from an OffsetFetch answer, the groups the principal may not
// describe (GROUP_AUTHORIZATION_FAILED) and the topics it may not describe: left out of an
// all-topics answer, TOPIC_AUTHORIZATION_FAILED where the request named them.
func (r *request) filterOffsetFetch(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	describe := kmsg.ACLOperationDescribe
	fixTopics := func(all bool, ts []kmsg.OffsetFetchResponseTopic) []kmsg.OffsetFetchResponseTopic {
		if all {
			return slices.DeleteFunc(ts, func(t kmsg.OffsetFetchResponseTopic) bool { return !r.allowedTopic(describe, t.Topic) })
		}
		for i := range ts {
			if !r.allowedTopic(describe, ts[i].Topic) {
				for j := range ts[i].Partitions {
					p := &ts[i].Partitions[j]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, new(""), kerr.TopicAuthorizationFailed.Code
				}
			}
		}
		return ts
	}
	if req.Version < 8 {
		resp.Topics = fixTopics(req.Topics == nil, resp.Topics)
		return
	}
	named := map[string]bool{}
	for _, g := range req.Groups {
		named[g.Group] = g.Topics == nil
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !r.allowedGroup(describe, g.Group) {
			name := g.Group
			*g = kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			continue
		}
		if named[g.Group] {
			g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !r.allowedTopic(describe, t.Topic) })
			continue
		}
		for j := range g.Topics {
			if !r.allowedTopic(describe, g.Topics[j].Topic) {
				for k := range g.Topics[j].Partitions {
					p := &g.Topics[j].Partitions[k]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, new(""), kerr.TopicAuthorizationFailed.Code
				}
			}
		}
	}
}

// addPartitionsDenied answers an AddPartitionsToTxn whose transactional id or some topic the
// principal may not write (nil: allowed). As Kafka: an unauthorized transactional id fails every
// partition; an unauthorized topic fails its partitions and the others are not attempted.
func (r *request) addPartitionsDenied(req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	write := kmsg.ACLOperationWrite
	if req.Version < 4 {
		txnOK := r.allowedTxnID(write, req.TransactionalID)
		// As Kafka, an internal topic is never authorized here, whatever the ACLs.
		mayWrite := func(topic string) bool { return !internalTopic(topic) && r.allowedTopic(write, topic) }
		topicsOK := true
		for _, t := range req.Topics {
			topicsOK = topicsOK && mayWrite(t.Topic)
		}
		if txnOK && topicsOK {
			return nil
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range req.Topics {
			code := kerr.OperationNotAttempted.Code
			switch {
			case !txnOK:
				code = kerr.TransactionalIDAuthorizationFailed.Code
			case !mayWrite(t.Topic):
				code = kerr.TopicAuthorizationFailed.Code
			}
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	// v4+ comes from brokers verifying transactions (KIP-890): Kafka wants CLUSTER_ACTION.
	if !r.allowedCluster(kmsg.ACLOperationClusterAction) {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	return nil
}

// The operations each resource type has, as Kafka reports authorized operations (KIP-430).
var (
	topicOps = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDelete,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	groupOps = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} // group configs (KIP-848), as Kafka's AclEntry
	clusterOps = []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite}
)

// authorizedOperations is the bit field (bit i: operation i) of the operations among ops the
// principal may do on the resource.
func (r *request) authorizedOperations(rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		if r.allowed(op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}
