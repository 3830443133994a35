package server_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestGSSAPIClients: Kerberos with a real KDC (MIT krb5kdc on loopback, realm RUNNEL.TEST). The
// broker has kafka/localhost's key in a keytab; the Kafka Java client (its Krb5LoginModule with a
// keytab, the JDK's GSSAPI), kcat (librdkafka over Cyrus SASL and MIT's GSSAPI, which runs
// kinit itself) and kafka-python (python-gssapi over MIT's, from a ticket cache kinit filled)
// get tickets from the KDC, authenticate as User:alice (the DEFAULT
// principal-to-local rule), produce and consume with alice's ACLs. User:bob, whose principal is
// as valid but who has no ACL, is refused the topic, which shows the principal is the one
// Kerberos authenticated.
func TestGSSAPIClients(t *testing.T) {
	kdc := testclients.StartKDC(t, "kafka/localhost", "alice", "bob")
	t.Setenv("KRB5_CONFIG", kdc.Conf) // the node's default realm: RUNNEL.TEST, from its krb5.conf, as Kafka's
	b := startSecureBroker(t, func(c *server.Config) {
		c.Authorizer, c.SuperUsers = "acl", "User:admin"
		c.SASLMechanisms = append(c.SASLMechanisms, "GSSAPI")
		c.Kerberos = security.KerberosConfig{Keytab: kdc.Keytab("kafka/localhost"), ServiceName: "kafka",
			Principal: "kafka/localhost@" + testclients.Realm}
		// Clients name the broker by the host they reach it at: kafka/localhost.
		for i := range c.Listeners {
			if c.Listeners[i].Name == "SASL_PLAINTEXT" {
				c.Listeners[i].Advertised = "localhost:0"
			}
		}
	})
	t.Cleanup(func() { // a failure's cause is often on the broker's side: its refusals
		if t.Failed() {
			for _, l := range strings.Split(b.logs.String(), "\n") {
				if strings.Contains(l, "authentication failed") || strings.Contains(l, "level=ERROR") {
					t.Log(l)
				}
			}
		}
	})
	_, port, _ := net.SplitHostPort(b.addrs["SASL_PLAINTEXT"])
	addr := "localhost:" + port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "krb-java", "krb-kcat", "krb-python"); err != nil {
		t.Fatal(err)
	}
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("krb-java", "krb-kcat", "krb-python").Groups("krb-group").
		Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe)
	if _, err := adm.CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	t.Run("java", func(t *testing.T) {
		java := testclients.Java(t)
		cmd := append([]string{java[0], "-Djava.security.krb5.conf=" + kdc.Conf}, java[1:]...)
		props := func(user string) string {
			p := filepath.Join(t.TempDir(), user+".properties")
			writeFile(t, p, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"+
				"sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "+
				"keyTab=\""+kdc.Keytab(user)+"\" principal=\""+user+"@"+testclients.Realm+"\";\n")
			return p
		}
		t.Setenv("RUNNEL_CLIENT_CONFIG", props("alice"))
		if out := runClient(t, 120*time.Second, "", cmd[0], append(cmd[1:], "produce", addr, "krb-java", "200")...); !strings.Contains(out, "acked 200") {
			t.Fatalf("java produce as alice: %s", out)
		}
		out := runClient(t, 120*time.Second, "", cmd[0], append(cmd[1:], "consume", addr, "krb-java", "krb-group", "consumer", "200")...)
		if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 200 {
			t.Fatalf("java consumed %d records over GSSAPI, want 200", n)
		}
		// bob authenticates (he is in the KDC) but has no ACL: the produce is refused for the
		// topic (not for his credentials: that would be a SaslAuthenticationException).
		t.Setenv("RUNNEL_CLIENT_CONFIG", props("bob"))
		c := exec.Command(cmd[0], append(cmd[1:], "produce", addr, "krb-java", "1")...)
		c.Env = os.Environ()
		out2, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out2), "TopicAuthorization") {
			t.Fatalf("java produce as bob: %v\n%s", err, out2)
		}
	})
	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			skipOutsideCI(t, "kcat is not on PATH (.ci/run installs it)")
		}
		// librdkafka runs `kinit -t keytab -k principal` into the ticket cache itself.
		t.Setenv("KRB5_CONFIG", kdc.Conf)
		t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "ccache"))
		args := []string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
			"-X", "sasl.kerberos.service.name=kafka", "-X", "sasl.kerberos.keytab=" + kdc.Keytab("alice"),
			"-X", "sasl.kerberos.principal=alice@" + testclients.Realm}
		runClient(t, 60*time.Second, "one\ntwo\nthree\n", kcat, append(args, "-P", "-t", "krb-kcat")...)
		got := runClient(t, 60*time.Second, "", kcat, append(args, "-C", "-t", "krb-kcat", "-o", "beginning", "-c", "3", "-q")...)
		if got != "one\ntwo\nthree\n" {
			t.Fatalf("kcat over GSSAPI consumed %q", got)
		}
	})
	t.Run("kafka-python", func(t *testing.T) {
		root := testclients.RepoRoot(t)
		python := clientPython(t, root)
		if err := exec.Command(python, "-c", "import gssapi").Run(); err != nil {
			skipOutsideCI(t, "python-gssapi is not installed in the client venv (.ci/run installs it)")
		}
		t.Setenv("KRB5_CONFIG", kdc.Conf)
		t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "ccache"))
		runClient(t, 30*time.Second, "", "kinit", "-k", "-t", kdc.Keytab("alice"), "alice@"+testclients.Realm)
		t.Setenv("RUNNEL_CLIENT_CONFIG_JSON", `{"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka"}`)
		script := filepath.Join(root, "test", "clients", "kafka_python_client.py")
		if out := runClient(t, 90*time.Second, "", python, script, "produce", addr, "krb-python", "100"); !strings.Contains(out, "acked 100") {
			t.Fatalf("kafka-python produce over GSSAPI: %s", out)
		}
		out := runClient(t, 90*time.Second, "", python, script, "consume", addr, "krb-python", "krb-group", "100")
		if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 100 {
			t.Fatalf("kafka-python consumed %d records over GSSAPI, want 100", n)
		}
	})
}
