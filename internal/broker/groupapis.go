package broker

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/group"
)

// The consumer group APIs (classic protocol) and the coordinator lookup. Each hands the request
// to the group coordinator through its driver (groups.go).

func init() {
	register(kmsg.FindCoordinator, 0, 6, handleFindCoordinator)
	register(kmsg.JoinGroup, 0, 9, handleJoinGroup)
	register(kmsg.SyncGroup, 0, 5, handleSyncGroup)
	register(kmsg.Heartbeat, 0, 4, handleHeartbeat)
	register(kmsg.LeaveGroup, 0, 5, handleLeaveGroup)
	register(kmsg.OffsetCommit, 0, 9, handleOffsetCommit)
	register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch)
	register(kmsg.DescribeGroups, 0, 5, handleDescribeGroups)
	register(kmsg.ListGroups, 0, 5, handleListGroups)
	register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups)
	register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete)
	register(kmsg.ConsumerGroupHeartbeat, 0, 1, handleConsumerGroupHeartbeat)
	register(kmsg.ConsumerGroupDescribe, 0, 1, handleConsumerGroupDescribe)
}

// handleConsumerGroupHeartbeat answers once the group's changed state is durable.
func handleConsumerGroupHeartbeat(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ConsumerGroupHeartbeatRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, func() (kmsg.Response, group.Output) {
		return gs.c.ConsumerGroupHeartbeat(timeNow(), req, r.clientID, clientHost(r.conn.remote))
	})
	return reply{resp: resp, wait: func() {
		if err := done(); err != nil {
			hb := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			hb.ErrorCode, hb.Assignment = kerr.CoordinatorNotAvailable.Code, nil
		}
	}}
}

func handleConsumerGroupDescribe(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ConsumerGroupDescribeRequest)
	return r.conn.b.groups.locked(func(c *group.Coordinator) kmsg.Response { return c.ConsumerGroupDescribe(req) })
}

// handleFindCoordinator names this node as the coordinator of every group (and transactional
// id: InitProducerId then refuses it until transactions exist), creating __consumer_offsets on
// the first group lookup as Kafka does.
func handleFindCoordinator(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	b := r.conn.b
	answer := func() (int16, *string) {
		if req.CoordinatorType == 0 {
			b.groups.mu.Lock()
			err := b.groups.ensureTopicLocked()
			b.groups.mu.Unlock()
			if err != nil {
				b.logger.Error("broker: finding a coordinator", "err", err)
				msg := err.Error()
				return kerr.CoordinatorNotAvailable.Code, &msg
			}
		} else if req.CoordinatorType != 1 {
			msg := "unknown coordinator type"
			return kerr.InvalidRequest.Code, &msg
		}
		return 0, nil
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = answer()
		resp.NodeID, resp.Host, resp.Port = b.cfg.NodeID, b.cfg.AdvertisedHost, b.cfg.AdvertisedPort
		if resp.ErrorCode != 0 {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		}
		return reply{resp: resp}
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = answer()
		c.NodeID, c.Host, c.Port = b.cfg.NodeID, b.cfg.AdvertisedHost, b.cfg.AdvertisedPort
		if c.ErrorCode != 0 {
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return reply{resp: resp}
}

// clientHost is how Kafka shows a member's address: "/" and the IP.
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}

func handleJoinGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	gs := r.conn.b.groups
	return gs.delayed(ctx, resp, func(id group.RequestID) group.Output {
		return gs.c.JoinGroup(timeNow(), id, req, r.clientID, clientHost(r.conn.remote))
	})
}

func handleSyncGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	gs := r.conn.b.groups
	return gs.delayed(ctx, resp, func(id group.RequestID) group.Output {
		return gs.c.SyncGroup(timeNow(), id, req)
	})
}

func handleHeartbeat(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.HeartbeatRequest)
	return r.conn.b.groups.locked(func(c *group.Coordinator) kmsg.Response { return c.Heartbeat(timeNow(), req) })
}

func handleLeaveGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.LeaveGroupRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, func() (kmsg.Response, group.Output) {
		return gs.c.LeaveGroup(timeNow(), req)
	})
	return reply{resp: resp, wait: func() { _ = done() }} // a failed write is logged; the answer stands
}

func handleOffsetCommit(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetCommitRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, func() (kmsg.Response, group.Output) {
		return gs.c.OffsetCommit(timeNow(), req)
	})
	return reply{resp: resp, wait: func() {
		if err := done(); err != nil { // the commit is not durable: the client must retry
			for i := range resp.(*kmsg.OffsetCommitResponse).Topics {
				t := &resp.(*kmsg.OffsetCommitResponse).Topics[i]
				for j := range t.Partitions {
					if t.Partitions[j].ErrorCode == 0 {
						t.Partitions[j].ErrorCode = kerr.CoordinatorNotAvailable.Code
					}
				}
			}
		}
	}}
}

func handleOffsetFetch(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetFetchRequest)
	return r.conn.b.groups.locked(func(c *group.Coordinator) kmsg.Response { return c.OffsetFetch(req) })
}

func handleDescribeGroups(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeGroupsRequest)
	return r.conn.b.groups.locked(func(c *group.Coordinator) kmsg.Response { return c.DescribeGroups(req) })
}

func handleListGroups(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ListGroupsRequest)
	return r.conn.b.groups.locked(func(c *group.Coordinator) kmsg.Response { return c.ListGroups(req) })
}

func handleDeleteGroups(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteGroupsRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, func() (kmsg.Response, group.Output) {
		return gs.c.DeleteGroups(req)
	})
	return reply{resp: resp, wait: func() { _ = done() }} // a failed write is logged; the answer stands
}

func handleOffsetDelete(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, func() (kmsg.Response, group.Output) {
		return gs.c.OffsetDelete(req)
	})
	return reply{resp: resp, wait: func() { _ = done() }} // a failed write is logged; the answer stands
}
