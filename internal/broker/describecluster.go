package broker

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

func init() { register(kmsg.DescribeCluster, 0, 2, handleDescribeCluster) }

// DescribeCluster endpoint types (v1+, KIP-919).
const (
	endpointTypeBrokers     = 1
	endpointTypeControllers = 2
)

func handleDescribeCluster(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	b := r.conn.b
	resp.EndpointType = endpointTypeBrokers
	resp.ClusterAuthorizedOperations = notRequested
	if req.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		// As Kafka's computeDescribeClusterResponse: a broker listener serves only the brokers
		// endpoint type; the controllers type belongs on another endpoint, any other is unknown.
		resp.ControllerID = -1
		if req.EndpointType != endpointTypeControllers {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			resp.ErrorMessage = strp("Unsupported endpoint type " + strconv.Itoa(int(req.EndpointType)))
			return reply{resp: resp}
		}
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = strp("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
		return reply{resp: resp}
	}
	img := b.cl.Image()
	resp.ClusterID = img.ClusterID
	var rv *ripcordView
	if b.ripcording() {
		rv = b.ripcordView()
	}
	listed := b.brokerList(img, rv, r.conn.listener.Name)
	resp.ControllerID = b.controllerFor(listed)
	for _, m := range listed {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = m.Node, m.Host, m.Port
		if m.Rack != "" {
			br.Rack = &m.Rack
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	if req.IncludeFencedBrokers && rv == nil {
		// v2 (KIP-1073): the registered nodes that are fenced too, marked so, as Kafka lists
		// them (Admin.describeCluster with includeFencedBrokers, kafka-cluster list-endpoints).
		for _, id := range slices.Sorted(maps.Keys(img.Nodes)) {
			n := img.Nodes[id]
			if !n.Fenced {
				continue
			}
			if host, port, ok := n.Endpoint(r.conn.listener.Name); ok {
				br := kmsg.NewDescribeClusterResponseBroker()
				br.NodeID, br.Host, br.Port, br.IsFenced = n.ID, host, port, true
				if n.Rack != "" {
					br.Rack = &n.Rack
				}
				resp.Brokers = append(resp.Brokers, br)
			}
		}
		slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return int(a.NodeID) - int(b.NodeID) })
	}
	// Any client may describe the cluster (Metadata names the same brokers); DESCRIBE on the
	// cluster only decides whether its authorized operations are told (0 without), as Kafka.
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0
		if r.allowedCluster(kmsg.ACLOperationDescribe) {
			resp.ClusterAuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeCluster, security.ClusterResource, clusterOps)
		}
	}
	return reply{resp: resp}
}
