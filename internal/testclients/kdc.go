package testclients

import (
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// KDC is a real Kerberos KDC (MIT krb5kdc, started by scripts/kdc.sh) on loopback, realm
// RUNNEL.TEST.
type KDC struct {
	Dir  string
	Conf string // the clients' krb5.conf (KRB5_CONFIG, java.security.krb5.conf)
}

// Realm is the KDC's realm.
const Realm = "RUNNEL.TEST"

// StartKDC starts a KDC for the test with a random key for each principal (written to a
// keytab: KDC.Keytab). Outside CI a machine without MIT's KDC skips the test (.ci/run installs
// it: krb5-kdc, krb5-admin-server, krb5-user).
func StartKDC(t testing.TB, principals ...string) *KDC {
	t.Helper()
	for _, tool := range []string{"krb5kdc", "kdb5_util", "kadmin.local", "kinit"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := exec.LookPath(filepath.Join("/usr/sbin", tool)); err != nil {
				SkipOutsideCI(t, tool+" is not installed (apt-get install krb5-kdc krb5-admin-server krb5-user; .ci/run does it)")
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	script := filepath.Join(RepoRoot(t), "scripts", "kdc.sh")
	out, err := exec.Command("bash", append([]string{script, "start", dir, strconv.Itoa(port)}, principals...)...).CombinedOutput()
	t.Cleanup(func() { exec.Command("bash", script, "stop", dir).Run() })
	if err != nil {
		t.Fatalf("kdc.sh start: %v\n%s", err, out)
	}
	return &KDC{Dir: dir, Conf: strings.TrimSpace(string(out))}
}

// Keytab is the keytab file of a principal the KDC was started with.
func (k *KDC) Keytab(principal string) string {
	return filepath.Join(k.Dir, strings.NewReplacer("/", "_", "@", "_").Replace(principal)+".keytab")
}
