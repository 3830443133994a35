package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestClusterPortRefusesClientCertificates: with --cluster-tls and an authorizer, the
// node-to-node port takes only nodes' certificates (a super user's principal, or the node's
// own), though --tls-client-ca-file also signs the Kafka clients' certificates. Before, an
// application given a client certificate (User:CN=app, denied everything on the cluster) could
// dial the cluster port as a "node" and send the controller RPC "propose" with any command:
// here a binding that grants itself ALL on the cluster. Kafka has no such side door: a client
// reaching the inter-broker listener is authenticated as its own principal and every
// inter-broker API needs CLUSTER_ACTION.
func TestClusterPortRefusesClientCertificates(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clusterAddr := free.Addr().String()
	free.Close()
	b := startSecureBroker(t, func(c *server.Config) {
		c.ClusterTLS, c.ClusterAddr = true, clusterAddr
		c.Authorizer, c.SuperUsers = "acl", "User:admin"
	})
	appCert, appKey := b.pki.Issue(t, "app", pkix.Name{CommonName: "app"})
	kp, err := tls.LoadX509KeyPair(appCert, appKey)
	if err != nil {
		t.Fatal(err)
	}
	const principal = "User:CN=app"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Baseline: over its SSL listener the application may not create ACLs.
	appCl := b.client(t, "SSL", nil, &tls.Config{RootCAs: b.rootCAs(t), Certificates: []tls.Certificate{kp}, ServerName: "127.0.0.1"})
	createACL := func() int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "anything", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(ctx, appCl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results[0].ErrorCode
	}
	if code := createACL(); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("setup: CreateAcls by %s answered %v, want CLUSTER_AUTHORIZATION_FAILED", principal, kerr.ErrorForCode(code))
	}

	// The application dials the cluster port with its Kafka client certificate.
	nc, err := tls.Dial("tcp", clusterAddr, &tls.Config{RootCAs: b.rootCAs(t), Certificates: []tls.Certificate{kp}, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("the TLS handshake with the cluster port: %v", err)
	}
	defer nc.Close()
	frame := func(kind byte, body []byte) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
		return append(append(f, kind), body...)
	}
	hello := []byte("RNL1")
	hello = kbin.AppendInt32(hello, 77) // a node id the cluster does not have
	hello = kbin.AppendInt32(hello, b.s.Node().NodeID())
	hello = kbin.AppendString(hello, "")
	hello = kbin.AppendString(hello, "")
	grant := security.ACL{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: security.ClusterResource,
		PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: principal, Host: "*",
		Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow}
	payload, err := json.Marshal(&controller.Command{Op: controller.OpCreateACLs, ACLs: &controller.ACLChange{ACLs: []security.ACL{grant}}})
	if err != nil {
		t.Fatal(err)
	}
	rpc := kbin.AppendInt64(nil, 1)
	rpc = kbin.AppendString(rpc, "propose")
	rpc = kbin.AppendBytes(rpc, payload)
	if _, err := nc.Write(append(frame(0, hello), frame(2, rpc)...)); err != nil {
		t.Fatal(err)
	}

	// TLS 1.3: the client's handshake completes before the server checks its certificate;
	// the refusal arrives as an alert on the first read.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Error("the cluster port answered a Kafka client's certificate")
	} else {
		t.Logf("the cluster port refused it: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	for _, a := range b.s.Node().Image().ACLs {
		if a == grant {
			t.Fatalf("a Kafka client certificate (%s) reached the cluster port and proposed a controller command granting itself ALL on the cluster", principal)
		}
	}
	if code := createACL(); code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("CreateAcls by %s afterwards answered %v; want CLUSTER_AUTHORIZATION_FAILED", principal, kerr.ErrorForCode(code))
	}
}
