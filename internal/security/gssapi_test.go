package security

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The tests here play the KDC and the client: a ticket is made with the service's key from the
// keytab (what a KDC does), and the client's side of RFC 4752 follows RFC 4121 as the JDK's and
// MIT's initiators do. The real thing (MIT's KDC, the Java client and librdkafka) is tested in
// internal/server (TestGSSAPIClients).

const testRealm = "RUNNEL.TEST"

// testKeytab writes a keytab with the keys of the given principals (password: the principal).
func testKeytab(t *testing.T, principals ...string) (string, *keytab.Keytab) {
	t.Helper()
	kt := keytab.New()
	for _, p := range principals {
		for _, et := range []int32{etypeID.AES256_CTS_HMAC_SHA1_96, etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES128_CTS_HMAC_SHA256_128} {
			if err := kt.AddEntry(p, testRealm, p, time.Now(), 1, et); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broker.keytab")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, kt
}

var cusec atomic.Int64

// initiator is the client side of one exchange.
type initiator struct {
	sessionKey types.EncryptionKey
	subkey     types.EncryptionKey
	auth       types.Authenticator
	acceptSeq  uint64
	apReq      []byte
}

type ticketOpts struct {
	client    string // default alice
	service   string // default kafka/broker1.runnel.test
	mutual    bool
	kvno      int                   // the service key's version (default 1)
	authRealm string                // the authenticator's realm, if not the ticket's
	mutate    func(*messages.APReq) // the AP-REQ as sent
	noSub     bool                  // no subkey in the authenticator: the session key is the context's
	etype     int32                 // default AES256
	skew      time.Duration         // the client's clock against ours
	end       time.Duration         // the ticket's lifetime from now (default 1 h)
}

func newInitiator(t testing.TB, kt *keytab.Keytab, o ticketOpts) *initiator {
	t.Helper()
	if o.client == "" {
		o.client = "alice"
	}
	if o.service == "" {
		o.service = "kafka/broker1.runnel.test"
	}
	if o.etype == 0 {
		o.etype = etypeID.AES256_CTS_HMAC_SHA1_96
	}
	if o.end == 0 {
		o.end = time.Hour
	}
	now := time.Now().UTC()
	cname := types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, o.client)
	sname := types.NewPrincipalName(nametype.KRB_NT_SRV_INST, o.service)
	if o.kvno == 0 {
		o.kvno = 1
	}
	tkt, key, err := messages.NewTicket(cname, testRealm, sname, testRealm, types.NewKrbFlags(), kt, o.etype, o.kvno,
		now, now, now.Add(o.end), now.Add(o.end))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := types.NewAuthenticator(testRealm, cname)
	if err != nil {
		t.Fatal(err)
	}
	auth.CTime = now.Add(o.skew).Truncate(time.Second)
	auth.Cusec = int(cusec.Add(1) % 1_000_000) // distinct authenticators: the replay cache keys on the time
	keySize := map[int32]int{etypeID.AES128_CTS_HMAC_SHA1_96: 16, etypeID.AES256_CTS_HMAC_SHA1_96: 32, etypeID.AES128_CTS_HMAC_SHA256_128: 16}[o.etype]
	if err := auth.GenerateSeqNumberAndSubKey(o.etype, keySize); err != nil {
		t.Fatal(err)
	}
	in := &initiator{sessionKey: key, subkey: auth.SubKey}
	if o.noSub {
		auth.SubKey, in.subkey = types.EncryptionKey{}, key
	}
	// RFC 4121 §4.1.1: the GSS checksum: 16 bytes of channel binding hash (none: zeros), then
	// the flags.
	cksum := make([]byte, 24)
	binary.LittleEndian.PutUint32(cksum, 16)
	flags := uint32(0x20 | 0x10 | 0x08) // integ, conf, sequence, as the JDK asks
	if o.mutual {
		flags |= gssMutualFlag
	}
	binary.LittleEndian.PutUint32(cksum[20:], flags)
	auth.Cksum = types.Checksum{CksumType: gssChecksumType, Checksum: cksum}
	in.auth = auth
	if o.authRealm != "" {
		auth.CRealm = o.authRealm
	}
	req, err := messages.NewAPReq(tkt, key, auth)
	if err != nil {
		t.Fatal(err)
	}
	if o.mutate != nil {
		o.mutate(&req)
	}
	rb, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	oid, _ := asn1.Marshal(gssapi.OIDKRB5.OID())
	in.apReq = asn1tools.AddASNAppTag(append(append(oid, 1, 0), rb...), 0)
	in.acceptSeq = uint64(uint32(auth.SeqNumber))
	return in
}

// readAPRep checks the server's AP-REP as an initiator would and takes its sequence number.
func (in *initiator) readAPRep(t *testing.T, tok []byte) {
	t.Helper()
	var oid asn1.ObjectIdentifier
	rest, err := asn1.UnmarshalWithParams(tok, &oid, "application,explicit,tag:0")
	if err != nil || !oid.Equal(gssapi.OIDKRB5.OID()) || !bytes.Equal(rest[:2], []byte{2, 0}) {
		t.Fatalf("AP-REP token framing: %v %v %x", err, oid, rest[:2])
	}
	var rep messages.APRep
	if err := rep.Unmarshal(rest[2:]); err != nil {
		t.Fatal(err)
	}
	plain, err := crypto.DecryptEncPart(rep.EncPart, in.sessionKey, keyusage.AP_REP_ENCPART)
	if err != nil {
		t.Fatal(err)
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(plain); err != nil {
		t.Fatal(err)
	}
	if !part.CTime.Equal(in.auth.CTime) || part.Cusec != in.auth.Cusec {
		t.Fatalf("AP-REP echoes %v.%d, the authenticator said %v.%d", part.CTime, part.Cusec, in.auth.CTime, in.auth.Cusec)
	}
	in.acceptSeq = uint64(part.SequenceNumber)
}

// readOffer checks the server's security layer offer.
func (in *initiator) readOffer(t *testing.T, tok []byte) {
	t.Helper()
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(tok, true); err != nil {
		t.Fatal(err)
	}
	if ok, err := wt.Verify(in.subkey, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		t.Fatalf("offer's checksum: %v", err)
	}
	if wt.SndSeqNum != in.acceptSeq {
		t.Fatalf("offer's sequence number %d, the context's %d", wt.SndSeqNum, in.acceptSeq)
	}
	if !bytes.Equal(wt.Payload, []byte{1, 0, 0, 0}) {
		t.Fatalf("offer %x, want no security layer and size 0", wt.Payload)
	}
}

func (in *initiator) answer(t *testing.T, payload []byte) []byte {
	t.Helper()
	wt, err := gssapi.NewInitiatorWrapToken(payload, in.subkey)
	if err != nil {
		t.Fatal(err)
	}
	wt.SndSeqNum = uint64(uint32(in.auth.SeqNumber))
	wt.CheckSum = nil
	if err := wt.SetCheckSum(in.subkey, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		t.Fatal(err)
	}
	b, err := wt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reason is an AuthError's reason (its Error() is what the client is told, the same always).
func reason(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return "AuthError: " + ae.Reason
	}
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func newTestKerberos(t *testing.T, cfg KerberosConfig, principals ...string) (*Kerberos, *keytab.Keytab) {
	t.Helper()
	path, kt := testKeytab(t, principals...)
	cfg.Keytab = path
	t.Setenv("KRB5_CONFIG", filepath.Join(t.TempDir(), "none")) // the default realm: the broker principal's
	k, err := NewKerberos(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, kt
}

func TestGSSAPIExchange(t *testing.T) {
	k, kt := newTestKerberos(t, KerberosConfig{}, "kafka/broker1.runnel.test")
	for _, o := range []ticketOpts{{mutual: true}, {mutual: false}, {mutual: true, noSub: true}, {etype: etypeID.AES128_CTS_HMAC_SHA1_96, mutual: true},
		{etype: etypeID.AES128_CTS_HMAC_SHA256_128, mutual: true}, {etype: etypeID.AES128_CTS_HMAC_SHA256_128, noSub: true},
		{client: "svc/host.runnel.test", mutual: true}} {
		in := newInitiator(t, kt, o)
		s := NewGSSAPISession(k, nil)
		out, done, err := s.Step(in.apReq)
		if err != nil || done {
			t.Fatalf("%+v: AP-REQ: %v %v", o, done, reason(err))
		}
		if o.mutual {
			in.readAPRep(t, out)
			if out, done, err = s.Step(nil); err != nil || done {
				t.Fatalf("%+v: empty message: %v %v", o, done, err)
			}
		}
		in.readOffer(t, out)
		out, done, err = s.Step(in.answer(t, []byte{1, 0, 0, 0}))
		if err != nil || !done || len(out) != 0 {
			t.Fatalf("%+v: answer: %x %v %v", o, out, done, err)
		}
		want := strings.SplitN(o.client, "/", 2)[0]
		if want == "" {
			want = "alice"
		}
		if s.User() != want {
			t.Fatalf("%+v: user %q, want %q", o, s.User(), want)
		}
	}
}

// TestGSSAPIRefusals: each way an exchange must fail, fails with an AuthError and nothing else.
func TestGSSAPIRefusals(t *testing.T) {
	k, kt := newTestKerberos(t, KerberosConfig{Principal: "kafka/broker1.runnel.test@" + testRealm}, "kafka/broker1.runnel.test", "kafka/other.runnel.test", "zookeeper/broker1.runnel.test")
	// stepTo runs an exchange up to the answer; answer builds the client's last message.
	run := func(o ticketOpts, answer func(in *initiator) []byte) (string, error) {
		in := newInitiator(t, kt, o)
		s := NewGSSAPISession(k, nil)
		out, _, err := s.Step(in.apReq)
		if err != nil {
			return "", err
		}
		if o.mutual {
			in.readAPRep(t, out)
			if out, _, err = s.Step(nil); err != nil {
				return "", err
			}
		}
		in.readOffer(t, out)
		_, done, err := s.Step(answer(in))
		if err == nil && !done {
			t.Fatal("no error and not done")
		}
		return s.User(), err
	}
	good := func(in *initiator) []byte { return in.answer(t, []byte{1, 0, 0, 0}) }
	cases := []struct {
		name   string
		o      ticketOpts
		answer func(in *initiator) []byte
		want   string
	}{
		{"another host's principal", ticketOpts{service: "kafka/other.runnel.test"}, good, "not this broker's service"},
		{"another service", ticketOpts{service: "zookeeper/broker1.runnel.test"}, good, "not this broker's service"},
		{"expired ticket", ticketOpts{end: -10 * time.Minute}, good, "refused"}, // beyond the 5 min clock skew allowed
		{"clock skew", ticketOpts{skew: 10 * time.Minute}, good, "refused"},
		{"integrity layer chosen", ticketOpts{mutual: true}, func(in *initiator) []byte { return in.answer(t, []byte{2, 0, 0x10, 0}) }, "security layer"},
		{"short answer", ticketOpts{mutual: true}, func(in *initiator) []byte { return in.answer(t, []byte{1, 0}) }, "at least 4"},
		{"the authenticator in another realm", ticketOpts{authRealm: "PARTNER.TEST"}, good, "realm"},
		{"tampered answer", ticketOpts{}, func(in *initiator) []byte {
			b := in.answer(t, []byte{1, 0, 0, 0})
			b[17] ^= 1
			return b
		}, "checksum"},
		{"answer under the wrong key", ticketOpts{}, func(in *initiator) []byte {
			in.subkey = in.sessionKey
			return in.answer(t, []byte{1, 0, 0, 0})
		}, "checksum"},
		{"sealed answer", ticketOpts{}, func(in *initiator) []byte {
			b := in.answer(t, []byte{1, 0, 0, 0})
			b[2] |= wrapSealed
			return b
		}, "sealed"},
	}
	for _, c := range cases {
		_, err := run(c.o, c.answer)
		var ae *AuthError
		if !errors.As(err, &ae) || !strings.Contains(ae.Reason, c.want) {
			t.Errorf("%s: %v (want an AuthError saying %q)", c.name, reason(err), c.want)
		}
	}
	// An authorization id is not used (as in Kafka): whatever it says, the user is the
	// authenticated one.
	for _, authz := range []string{"alice@" + testRealm, "alice", "bob", "CORP\\alice\x00"} {
		user, err := run(ticketOpts{mutual: true}, func(in *initiator) []byte { return in.answer(t, append([]byte{1, 0, 0, 0}, authz...)) })
		if err != nil || user != "alice" {
			t.Errorf("authorization id %q: user %q, %v", authz, user, reason(err))
		}
	}
	// A replayed AP-REQ is refused (the replay cache).
	in := newInitiator(t, kt, ticketOpts{mutual: true})
	if _, _, err := NewGSSAPISession(k, nil).Step(in.apReq); err != nil {
		t.Fatal(reason(err))
	}
	if _, _, err := NewGSSAPISession(k, nil).Step(in.apReq); err == nil || !strings.Contains(err.(*AuthError).Reason, "replay") {
		t.Errorf("replayed AP-REQ: %v", err)
	}
	// AP-REQs that gokrb5 would index out of range on: an AuthError, not a panic.
	for name, mutate := range map[string]func(*messages.APReq){
		"short ticket":        func(r *messages.APReq) { r.Ticket.EncPart.Cipher = r.Ticket.EncPart.Cipher[:3] },
		"short authenticator": func(r *messages.APReq) { r.EncryptedAuthenticator.Cipher = r.EncryptedAuthenticator.Cipher[:20] },
		"rc4 ticket": func(r *messages.APReq) {
			r.Ticket.EncPart.EType = etypeID.RC4_HMAC
			r.Ticket.EncPart.Cipher = r.Ticket.EncPart.Cipher[:5]
		},
		"no ap-options": func(r *messages.APReq) { r.APOptions = asn1.BitString{} },
	} {
		in := newInitiator(t, kt, ticketOpts{mutate: mutate})
		var ae *AuthError
		if _, _, err := NewGSSAPISession(k, nil).Step(in.apReq); !errors.As(err, &ae) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The same AP-REQ sent twice at once: one is taken.
	for range 20 {
		in := newInitiator(t, kt, ticketOpts{})
		errs := make(chan error, 2)
		for range 2 {
			go func() { _, _, err := NewGSSAPISession(k, nil).Step(in.apReq); errs <- err }()
		}
		if e1, e2 := <-errs, <-errs; (e1 == nil) == (e2 == nil) {
			t.Fatalf("an AP-REQ sent twice at once: %v, %v", reason(e1), reason(e2))
		}
	}
	// After the AP-REP, only an empty message.
	in = newInitiator(t, kt, ticketOpts{mutual: true})
	s := NewGSSAPISession(k, nil)
	s.Step(in.apReq)
	if _, _, err := s.Step([]byte{1}); err == nil {
		t.Error("a non-empty message after the AP-REP was taken")
	}
	// Garbage, and a SPNEGO or NTLM start, are refused.
	for _, b := range [][]byte{nil, {0x60, 0x03, 0x06, 0x01, 0x00}, []byte("NTLMSSP\x00"), in.apReq[:len(in.apReq)/2]} {
		if _, _, err := NewGSSAPISession(k, nil).Step(b); err == nil {
			t.Errorf("initial token %x taken", b)
		}
	}
}

// TestGSSAPIRotatedAnswer: a wrap token whose data the sender rotated right (RRC) is read.
func TestGSSAPIRotatedAnswer(t *testing.T) {
	k, kt := newTestKerberos(t, KerberosConfig{}, "kafka/broker1.runnel.test")
	in := newInitiator(t, kt, ticketOpts{})
	s := NewGSSAPISession(k, nil)
	out, _, err := s.Step(in.apReq)
	if err != nil {
		t.Fatal(reason(err))
	}
	in.readOffer(t, out)
	b := in.answer(t, []byte{1, 0, 0, 0})
	body := b[gssapi.HdrLen:]
	rrc := 5
	rot := append(append([]byte{}, body[len(body)-rrc:]...), body[:len(body)-rrc]...)
	copy(body, rot)
	binary.BigEndian.PutUint16(b[6:8], uint16(rrc))
	if _, done, err := s.Step(b); err != nil || !done {
		t.Fatalf("rotated answer: %v %v", done, reason(err))
	}
}

// TestGSSAPIKeytabRotation: a key rotated into the keytab file (ktadd adds the new version
// beside the old) is taken without a restart; tickets under the old version still work.
func TestGSSAPIKeytabRotation(t *testing.T) {
	k, old := newTestKerberos(t, KerberosConfig{}, "kafka/broker1.runnel.test")
	rotated := keytab.New()
	for _, e := range []struct {
		pass string
		kvno uint8
	}{{"kafka/broker1.runnel.test", 1}, {"rotated", 2}} {
		if err := rotated.AddEntry("kafka/broker1.runnel.test", testRealm, e.pass, time.Now(), e.kvno, etypeID.AES256_CTS_HMAC_SHA1_96); err != nil {
			t.Fatal(err)
		}
	}
	step := func(kt *keytab.Keytab, kvno int) error {
		_, _, err := NewGSSAPISession(k, nil).Step(newInitiator(t, kt, ticketOpts{kvno: kvno}).apReq)
		return err
	}
	if err := step(rotated, 2); err == nil {
		t.Fatal("a ticket under a key version the keytab does not hold was taken")
	}
	b, err := rotated.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	k.watch.checked = time.Time{} // (the file is looked at once a second at most)
	k.mu.Unlock()
	if err := step(rotated, 2); err != nil {
		t.Fatalf("the rotated key: %v", reason(err))
	}
	if err := step(old, 1); err != nil {
		t.Fatalf("the old key after the rotation: %v", reason(err))
	}
	// A file that stops being a keytab leaves the keys as they were.
	os.WriteFile(k.path, []byte("garbage, longer than before to change the size"), 0o600)
	k.mu.Lock()
	k.watch.checked = time.Time{}
	k.mu.Unlock()
	if err := step(rotated, 2); err != nil {
		t.Fatalf("after the keytab was broken: %v", reason(err))
	}
}

func TestNewKerberos(t *testing.T) {
	path, _ := testKeytab(t, "kafka/a.runnel.test", "kafka/b.runnel.test")
	t.Setenv("KRB5_CONFIG", filepath.Join(t.TempDir(), "none"))
	k, err := NewKerberos(KerberosConfig{Keytab: path})
	if err != nil || k.Realm() != testRealm || k.Principals() != "kafka/a.runnel.test@RUNNEL.TEST,kafka/b.runnel.test@RUNNEL.TEST" {
		t.Fatalf("%v %+v", err, k)
	}
	for _, c := range []KerberosConfig{
		{Keytab: path, ServiceName: "zookeeper"},
		{Keytab: path, Principal: "kafka/c.runnel.test@" + testRealm},
		{Keytab: path, Principal: "zookeeper/a.runnel.test@" + testRealm},
		{Keytab: path, Principal: "kafka/a.runnel.test"}, // no realm
		{Keytab: filepath.Join(t.TempDir(), "missing")},
		{},
	} {
		if _, err := NewKerberos(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	// The default realm: krb5.conf's default_realm, unless given.
	conf := filepath.Join(t.TempDir(), "krb5.conf")
	os.WriteFile(conf, []byte("[libdefaults]\n\tdefault_realm = CORP.EXAMPLE\n"), 0o600)
	t.Setenv("KRB5_CONFIG", conf)
	if k, err := NewKerberos(KerberosConfig{Keytab: path}); err != nil || k.Realm() != "CORP.EXAMPLE" {
		t.Fatalf("with krb5.conf: %v, realm %q", err, k.Realm())
	}
	if k, err := NewKerberos(KerberosConfig{Keytab: path, DefaultRealm: "OTHER"}); err != nil || k.Realm() != "OTHER" {
		t.Fatalf("with a default realm given: %v, realm %q", err, k.Realm())
	}
	bad := filepath.Join(t.TempDir(), "bad.keytab")
	os.WriteFile(bad, []byte("not a keytab"), 0o600)
	if _, err := NewKerberos(KerberosConfig{Keytab: bad}); err == nil {
		t.Error("a malformed keytab was taken")
	}
}

func TestKerberosRules(t *testing.T) {
	for _, c := range []struct {
		rules, principal, want string
		err                    bool
	}{
		{"", "alice@R", "alice", false},
		{"", "kafka/host@R", "kafka", false},
		{"", "alice@OTHER", "", true},
		{"DEFAULT", "alice", "alice", false},
		{"RULE:[1:$1@$0](.*@OTHER)s/@.*//,DEFAULT", "alice@OTHER", "alice", false},
		{"RULE:[1:$1@$0](.*@OTHER)s/@.*//,DEFAULT", "bob@R", "bob", false},
		{"RULE:[2:$1](kafka)s/.*/broker/", "kafka/h@X", "broker", false},
		{"RULE:[2:$1.$2@$0]s/^([^.]*)[.].*$/$1/", "kafka/h@X", "kafka", false},
		{"RULE:[1:$1]/U", "alice@X", "ALICE", false},
		{"RULE:[1:$1@$0]/L", "Alice@x", "", true}, // alice@x: not simple
		{"RULE:[1:$1]s/a/x/g", "banana@X", "bxnxnx", false},
		{"RULE:[1:$1]s/a/x/", "banana@X", "bxnana", false},
		{"RULE:[2:$1](nomatch)", "kafka/h@X", "", true},
		{"RULE:[1:$1],RULE:[2:$2]", "kafka/h@X", "h", false},
		// Java's replacement syntax: $1_$2 is group 1, _, group 2 (Go alone would read a group
		// named 1_); a backslash makes a character literal; $12 is group 1 then 2 when there
		// is no group 12.
		{"RULE:[2:$1.$2]s/(.*)[.](.*)/$1_$2/", "svc/alice@X", "svc_alice", false},
		{"RULE:[1:$1]s/(a)/\\$$1x/", "alice@X", "$axlice", false},
		{"RULE:[1:$1]s/(a)/$12/", "alice@X", "a2lice", false},
		{"RULE:[0:$0],RULE:[3:$1],DEFAULT", "alice@R", "alice", false}, // 0 and 3 components never apply
	} {
		r, err := ParseKerberosRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		n, err := ParseKerberosName(c.principal)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.ShortName(n, "R")
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%q on %s: %q, %v; want %q (error %v)", c.rules, c.principal, got, err, c.want, c.err)
		}
	}
	for _, bad := range []string{"RULE", "RULE:[1:$x]", "RULE:[1:$1]s/a/$/", "RULE:[1:$1]s/a/$2/", "RULE:[1:$1]s/a/b\\/", "RULE:[1:$2]", "RULE:[1:$1](()", "DEFAULT RULE:[1:$1]", "RULE:[1:$1]s/(/x/", "NONE"} {
		if _, err := ParseKerberosRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for _, bad := range []string{"", "@R", "a/@R", "a@", "a/b/c@R", "a@R@S"} {
		if _, err := ParseKerberosName(bad); err == nil {
			t.Errorf("principal %q parsed", bad)
		}
	}
}

func FuzzKerberosRules(f *testing.F) {
	f.Add("RULE:[1:$1@$0](.*@OTHER)s/@.*//,DEFAULT", "alice@OTHER")
	f.Add("RULE:[2:$1/$2@$0]s/^([^/]*)\\/.*$/$1/g/L", "kafka/h@X")
	f.Fuzz(func(t *testing.T, rules, principal string) {
		r, err := ParseKerberosRules(rules)
		if err != nil {
			return
		}
		n, err := ParseKerberosName(principal)
		if err != nil {
			return
		}
		if out, err := r.ShortName(n, "R"); err == nil && strings.ContainsAny(out, "/@") {
			t.Fatalf("%q on %q: non-simple %q", rules, principal, out)
		}
	})
}

// FuzzGSSAPIMessages: any message at any stage of an exchange ends in an answer or an
// AuthError, never a panic.
func FuzzGSSAPIMessages(f *testing.F) {
	path := filepath.Join(f.TempDir(), "broker.keytab")
	kt := keytab.New()
	kt.AddEntry("kafka/broker1.runnel.test", testRealm, "kafka/broker1.runnel.test", time.Now(), 1, etypeID.AES256_CTS_HMAC_SHA1_96)
	b, _ := kt.Marshal()
	os.WriteFile(path, b, 0o600)
	k, err := NewKerberos(KerberosConfig{Keytab: path})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), []byte{0x60, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01, 0x00})
	// Real AP-REQs (their tickets decrypt with the key), for the fuzzer to mutate.
	f.Add(uint8(0), newInitiator(f, kt, ticketOpts{mutual: true}).apReq)
	f.Add(uint8(0), newInitiator(f, kt, ticketOpts{noSub: true}).apReq)
	f.Add(uint8(2), []byte{5, 4, 0, 0xff, 0, 12, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, stage uint8, msg []byte) {
		s := &gssapiSession{k: k, stage: int(stage % 4)}
		if s.stage > 0 {
			s.key = types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: make([]byte, 32)}
		}
		_, _, err := s.Step(msg)
		var ae *AuthError
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("stage %d: %T %v", stage, err, err)
		}
	})
}
