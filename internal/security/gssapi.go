package security

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// GSSAPI is the SASL mechanism name of Kerberos V5 (RFC 4752).
const GSSAPI = "GSSAPI"

// KerberosConfig is the broker's side of GSSAPI: Kafka's sasl.kerberos.service.name, the
// keytab and principal of its JAAS KafkaServer section, and
// sasl.kerberos.principal.to.local.rules.
type KerberosConfig struct {
	Keytab      string // the keytab file with the broker's keys
	ServiceName string // the first component of the principal clients name the broker by (kafka)
	// Principal, if set, is the one principal clients may name (kafka/host@REALM); otherwise
	// any principal of the keytab whose first component is ServiceName is accepted (a node
	// behind several host names).
	Principal string
	Rules     string // sasl.kerberos.principal.to.local.rules ("": DEFAULT)
	// DefaultRealm is the realm the DEFAULT rule takes as local. Default: krb5.conf's
	// default_realm ($KRB5_CONFIG, else /etc/krb5.conf), as Kafka; without one, the realm of
	// Principal, else of the keytab's first service principal.
	DefaultRealm string
	// MaxClockSkew bounds the difference between a client's clock and ours (default 5 minutes,
	// Kerberos' clockskew).
	MaxClockSkew time.Duration
}

// Kerberos accepts GSSAPI exchanges (NewGSSAPISession).
type Kerberos struct {
	path      string
	service   string
	principal *KerberosName // nil: any of the keytab's service principals
	realm     string        // the default realm
	rules     *KerberosRules
	skew      time.Duration
	replays   replayCache

	// The keytab is read again when its file changes (a key rotated with ktadd, whose new
	// version clients' tickets then use), checked at most once a second; a file that cannot be
	// read or holds no key of ours leaves the keys as they were.
	mu         sync.Mutex
	keytab     *keytab.Keytab
	principals string // the keytab's principals that may be named (for the log)
	watch      *fileWatch
}

// NewKerberos loads the keytab and checks it holds a key for the broker's principal.
func NewKerberos(cfg KerberosConfig) (*Kerberos, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "kafka"
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = 5 * time.Minute
	}
	if cfg.Keytab == "" {
		return nil, errors.New("security: GSSAPI needs a keytab (--sasl-kerberos-keytab)")
	}
	rules, err := ParseKerberosRules(cfg.Rules)
	if err != nil {
		return nil, err
	}
	k := &Kerberos{path: cfg.Keytab, service: cfg.ServiceName, rules: rules, skew: cfg.MaxClockSkew}
	if cfg.Principal != "" {
		p, err := ParseKerberosName(cfg.Principal)
		if err != nil {
			return nil, err
		}
		if p.Service != cfg.ServiceName || p.Realm == "" {
			return nil, fmt.Errorf("security: GSSAPI principal %s must be %s/<host>@<REALM> (--sasl-kerberos-service-name %s)", p, cfg.ServiceName, cfg.ServiceName)
		}
		k.principal, k.realm = &p, p.Realm
	}
	if k.watch, err = newFileWatch(time.Now(), k.path); err != nil {
		return nil, fmt.Errorf("security: GSSAPI keytab: %w", err)
	}
	kt, found, err := k.load()
	if err != nil {
		return nil, err
	}
	k.keytab, k.principals = kt, strings.Join(found, ",")
	if cfg.DefaultRealm == "" {
		cfg.DefaultRealm = krb5DefaultRealm()
	}
	switch {
	case cfg.DefaultRealm != "":
		k.realm = cfg.DefaultRealm
	case k.realm == "":
		p, _ := ParseKerberosName(found[0])
		k.realm = p.Realm
	}
	return k, nil
}

// load reads the keytab file and keeps only the keys of the principals clients may name, of
// the AES types: a ticket for anything else finds no key (and gokrb5's RC4 and DES code is
// never reached).
func (k *Kerberos) load() (*keytab.Keytab, []string, error) {
	b, err := os.ReadFile(k.path)
	if err != nil {
		return nil, nil, fmt.Errorf("security: GSSAPI keytab: %w", err)
	}
	kt := &keytab.Keytab{}
	if err := kt.Unmarshal(b); err != nil {
		return nil, nil, fmt.Errorf("security: GSSAPI keytab %s: %w", k.path, err)
	}
	var found []string
	accepted := &keytab.Keytab{}
	for i := range kt.Entries {
		e := &kt.Entries[i]
		if len(e.Principal.Components) == 0 || len(e.Principal.Components) > 2 {
			continue
		}
		n := KerberosName{Service: e.Principal.Components[0], Realm: e.Principal.Realm}
		if len(e.Principal.Components) > 1 {
			n.Host = e.Principal.Components[1]
		}
		if n.Service != k.service || (k.principal != nil && n != *k.principal) || !cfxEtype(e.Key.KeyType) {
			continue
		}
		accepted.Entries = append(accepted.Entries, kt.Entries[i])
		if !slices.Contains(found, n.String()) {
			found = append(found, n.String())
		}
	}
	if len(found) == 0 {
		return nil, nil, fmt.Errorf("security: GSSAPI keytab %s holds no AES key of %s", k.path, k.want())
	}
	return accepted, found, nil
}

// keys is the current keytab, read again if its file changed.
func (k *Kerberos) keys(now time.Time) *keytab.Keytab {
	k.mu.Lock()
	defer k.mu.Unlock()
	if changed, _ := k.watch.changed(now); !changed {
		return k.keytab
	}
	if kt, found, err := k.load(); err == nil {
		k.keytab, k.principals = kt, strings.Join(found, ",")
	}
	return k.keytab
}

// krb5DefaultRealm is the default_realm of the machine's Kerberos configuration ($KRB5_CONFIG,
// else /etc/krb5.conf), "" if there is none.
func krb5DefaultRealm() string {
	path := os.Getenv("KRB5_CONFIG")
	if path == "" {
		path = "/etc/krb5.conf"
	}
	path, _, _ = strings.Cut(path, ":") // MIT takes a list; its first file names the default
	c, err := config.Load(path)
	if err != nil || c == nil {
		return ""
	}
	return c.LibDefaults.DefaultRealm
}

// cfxEtype reports whether an encryption type is taken: the AES types, whose tokens are RFC
// 4121's (every Kerberos deployment of this century; DES and RC4 use RFC 1964's older tokens,
// not built). Not aes256-cts-hmac-sha384-192 (20): gokrb5 v8.4.4 takes its keys as 24 bytes
// where RFC 8009 has 32, so a real ticket of that type would not decrypt.
func cfxEtype(t int32) bool {
	switch t {
	case etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96, etypeID.AES128_CTS_HMAC_SHA256_128:
		return true
	}
	return false
}

// GSS-API checksum flags (RFC 4121 §4.1.1.1) and token fields.
const (
	gssChecksumType     = 0x8003
	gssMutualFlag       = 2
	gssTokAPReq         = "\x01\x00"
	gssTokAPRep         = "\x02\x00"
	wrapFromAcceptor    = 0x01
	wrapSealed          = 0x02
	wrapAcceptorKey     = 0x04
	saslNoSecurityLayer = 0x01 // RFC 4752 §3.3: the security layers bit mask
)

// gssapiSession is RFC 4752 on the server side, as the JDK's GssKrb5Server (which Kafka's
// brokers use) runs it: the client's AP-REQ is checked against the keytab; with mutual
// authentication asked for, the server answers an AP-REP and the client replies with an empty
// message; then the server sends a wrap token offering no security layer (Kafka has none) and
// the client answers with a wrap token choosing it (and an authorization id, which Kafka does
// not use).
type gssapiSession struct {
	k     *Kerberos
	stage int // 0: expecting the AP-REQ; 1: the empty message after an AP-REP; 2: the client's security layer choice

	key         types.EncryptionKey // the context's key: the initiator's subkey, else the ticket's session key
	acceptorSeq uint64              // the sequence number of our wrap token
	principal   KerberosName        // authenticated
	user        string              // its short name
	client      net.IP              // the connection's peer: a ticket that lists addresses must list it
}

// NewGSSAPISession starts a server exchange of GSSAPI with a client at address client (a
// ticket that lists client addresses must list it; nil: such tickets are refused).
func NewGSSAPISession(k *Kerberos, client net.IP) Session {
	return &gssapiSession{k: k, client: client}
}

func (s *gssapiSession) User() string { return s.user }

func (s *gssapiSession) fail(reason string, args ...any) ([]byte, bool, error) {
	s.stage = -1
	user := ""
	if s.principal.Service != "" {
		user = s.principal.String()
	}
	return nil, false, &AuthError{Mechanism: GSSAPI, User: user, Reason: fmt.Sprintf(reason, args...)}
}

func (s *gssapiSession) Step(msg []byte) (out []byte, done bool, err error) {
	// Until the ticket decrypts, the client's bytes are hostile input to gokrb5, which is not
	// built for that (short ciphertexts and empty bit strings index out of range): besides the
	// checks made first, a panic in it fails the exchange instead of the process.
	defer func() {
		if r := recover(); r != nil {
			out, done, err = s.fail("malformed GSSAPI message (%v)", r)
		}
	}()
	switch s.stage {
	case 0:
		return s.accept(msg)
	case 1:
		if len(msg) != 0 {
			return s.fail("expected an empty message after the AP-REP, got %d bytes", len(msg))
		}
		return s.offer()
	case 2:
		return s.choose(msg)
	}
	return s.fail("GSSAPI exchange already ended")
}

// accept checks the initial context token (RFC 2743 §3.1 framing of RFC 4121's AP-REQ).
func (s *gssapiSession) accept(msg []byte) ([]byte, bool, error) {
	var oid asn1.ObjectIdentifier
	rest, err := asn1.UnmarshalWithParams(msg, &oid, "application,explicit,tag:0")
	if err != nil {
		return s.fail("not a GSS-API initial context token: %v", err)
	}
	if !oid.Equal(gssapi.OIDKRB5.OID()) {
		return s.fail("GSS-API mechanism %s is not Kerberos V5 (%s)", oid, gssapi.OIDKRB5.OID())
	}
	if len(rest) < 2 || string(rest[:2]) != gssTokAPReq {
		return s.fail("the initial context token is not a KRB_AP_REQ")
	}
	var req messages.APReq
	if err := req.Unmarshal(rest[2:]); err != nil {
		return s.fail("malformed KRB_AP_REQ: %v", err)
	}
	sname := req.Ticket.SName.NameString
	if len(sname) == 0 || len(sname) > 2 {
		return s.fail("ticket for a principal of %d components", len(sname))
	}
	target := KerberosName{Service: sname[0], Realm: req.Ticket.Realm}
	if len(sname) == 2 {
		target.Host = sname[1]
	}
	if target.Service != s.k.service || (s.k.principal != nil && target != *s.k.principal) {
		return s.fail("ticket for %s, not this broker's service (%s)", target, s.k.want())
	}
	for _, part := range []struct {
		what string
		ed   types.EncryptedData
	}{{"ticket", req.Ticket.EncPart}, {"authenticator", req.EncryptedAuthenticator}} {
		what, ed := part.what, part.ed
		if !cfxEtype(ed.EType) {
			return s.fail("%s encrypted with type %d: only the AES types are taken (RC4 and DES are not)", what, ed.EType)
		}
		if len(ed.Cipher) < 16+checksumLen(types.EncryptionKey{KeyType: ed.EType}) {
			return s.fail("%s of %d bytes: too short to decrypt", what, len(ed.Cipher))
		}
	}
	if len(req.APOptions.Bytes) == 0 {
		return s.fail("KRB_AP_REQ without ap-options")
	}
	// The ticket decrypted with our key (its times), the authenticator with the ticket's
	// session key, the authenticator's client the ticket's, its time within the clock skew.
	var addr types.HostAddress
	if s.client != nil {
		addr = types.HostAddressFromNetIP(s.client)
	}
	if ok, err := req.Verify(s.k.keys(time.Now()), s.k.skew, addr, nil); err != nil || !ok {
		return s.fail("KRB_AP_REQ for %s refused: %v", target, err)
	}
	tkt, auth := req.Ticket.DecryptedEncPart, req.Authenticator
	// The client is who the ticket names (the KDC vouches for the ticket; the authenticator is
	// the client's own writing, and gokrb5 compares its name, not its realm).
	if auth.CRealm != tkt.CRealm {
		return s.fail("the authenticator's realm %q is not the ticket's %q", auth.CRealm, tkt.CRealm)
	}
	n := tkt.CName.NameString
	if len(n) == 0 || len(n) > 2 || tkt.CRealm == "" {
		return s.fail("client principal %v@%s", n, tkt.CRealm)
	}
	s.principal = KerberosName{Service: n[0], Realm: tkt.CRealm}
	if len(n) == 2 {
		s.principal.Host = n[1]
	}
	if !s.k.replays.add(sha256.Sum256(req.EncryptedAuthenticator.Cipher),
		auth.CTime.Add(s.k.skew+time.Second), time.Now()) {
		return s.fail("KRB_AP_REQ of %s replayed", s.principal)
	}
	if s.user, err = s.k.rules.ShortName(s.principal, s.k.realm); err != nil {
		return s.fail("%v", err)
	}
	if auth.Cksum.CksumType != gssChecksumType || len(auth.Cksum.Checksum) < 24 {
		return s.fail("the authenticator has no GSS-API checksum (type %d)", auth.Cksum.CksumType)
	}
	flags := binary.LittleEndian.Uint32(auth.Cksum.Checksum[20:24])
	s.key = tkt.Key
	if auth.SubKey.KeyType != 0 {
		s.key = auth.SubKey
	}
	if !cfxEtype(s.key.KeyType) || !cfxEtype(tkt.Key.KeyType) {
		return s.fail("encryption type %d is not supported (GSSAPI here takes AES keys only)", s.key.KeyType)
	}
	mutual := flags&gssMutualFlag != 0 || types.IsFlagSet(&req.APOptions, 2) // ap-options mutual-required
	if !mutual {
		// Without an AP-REP both sides start from the initiator's sequence number (RFC 4121
		// §4.2.6); the security layer offer follows at once, as the JDK's server sends it.
		s.acceptorSeq = uint64(uint32(auth.SeqNumber))
		return s.offer()
	}
	var seq [4]byte
	rand.Read(seq[:])
	s.acceptorSeq = uint64(binary.BigEndian.Uint32(seq[:]) & 0x3fffffff)
	rep, err := apRep(tkt.Key, auth.CTime, auth.Cusec, int64(s.acceptorSeq))
	if err != nil {
		return s.fail("building the AP-REP: %v", err)
	}
	s.stage = 1
	return rep, false, nil
}

// replayCache remembers the authenticators taken while they could still be accepted (their
// time within the clock skew), so that none is taken twice, by this node. An authenticator is
// known by the hash of its ciphertext, as MIT's cache has done since 1.18: two authenticators
// of one client in the same microsecond (a client opening connections in parallel) differ in
// their confounder, a replayed one is the same bytes. (gokrb5's cache keys on the time, is
// shared by the process, and checks and adds in two steps.)
type replayCache struct {
	mu     sync.Mutex
	seen   map[replayKey]time.Time // → when the authenticator expires
	pruned time.Time
}

type replayKey = [sha256.Size]byte

// add records k until expires; false if it is recorded already.
func (c *replayCache) add(k replayKey, expires, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[replayKey]time.Time{}
	}
	if now.Sub(c.pruned) > time.Second {
		for k, e := range c.seen {
			if now.After(e) {
				delete(c.seen, k)
			}
		}
		c.pruned = now
	}
	if _, ok := c.seen[k]; ok {
		return false
	}
	c.seen[k] = expires
	return true
}

func (k *Kerberos) want() string {
	if k.principal != nil {
		return k.principal.String()
	}
	return k.service + "/<host>@<REALM>"
}

// apRep is the GSS-API token of a KRB_AP_REP (RFC 4120 §5.5.2) for mutual authentication:
// the authenticator's time, and our initial sequence number, under the ticket's session key.
func apRep(sessionKey types.EncryptionKey, ctime time.Time, cusec int, seq int64) ([]byte, error) {
	part, err := asn1.Marshal(messages.EncAPRepPart{CTime: ctime.UTC(), Cusec: cusec, SequenceNumber: seq})
	if err != nil {
		return nil, err
	}
	enc, err := crypto.GetEncryptedData(asn1tools.AddASNAppTag(part, asnAppTag.EncAPRepPart), sessionKey, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		return nil, err
	}
	rep, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: enc})
	if err != nil {
		return nil, err
	}
	oid, err := asn1.Marshal(gssapi.OIDKRB5.OID())
	if err != nil {
		return nil, err
	}
	tok := slices.Concat(oid, []byte(gssTokAPRep), asn1tools.AddASNAppTag(rep, asnAppTag.APREP))
	return asn1tools.AddASNAppTag(tok, 0), nil
}

// offer sends the security layers the server supports (none but "no security layer", and so a
// maximum message size of 0) in a wrap token.
func (s *gssapiSession) offer() ([]byte, bool, error) {
	wt := gssapi.WrapToken{Flags: wrapFromAcceptor, EC: uint16(checksumLen(s.key)), SndSeqNum: s.acceptorSeq,
		Payload: []byte{saslNoSecurityLayer, 0, 0, 0}}
	if err := wt.SetCheckSum(s.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return s.fail("wrapping the security layer offer: %v", err)
	}
	b, err := wt.Marshal()
	if err != nil {
		return s.fail("wrapping the security layer offer: %v", err)
	}
	s.stage = 2
	return b, false, nil
}

func checksumLen(key types.EncryptionKey) int {
	e, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return 0
	}
	return e.GetHMACBitLength() / 8
}

// choose reads the client's wrapped answer: the security layer it chose (it must be none),
// its maximum message size, and an authorization id (ignored).
func (s *gssapiSession) choose(msg []byte) ([]byte, bool, error) {
	payload, err := unwrap(msg, s.key)
	if err != nil {
		return s.fail("the client's security layer answer: %v", err)
	}
	if len(payload) < 4 {
		return s.fail("the client's security layer answer has %d bytes, not at least 4", len(payload))
	}
	if payload[0] != saslNoSecurityLayer {
		return s.fail("the client chose security layer %#x; only none (1) is offered", payload[0])
	}
	// An authorization id is not used: Kafka's callback handler authorizes every one and acts
	// as the authenticated principal (librdkafka on Windows sends DOMAIN\user, Java its login
	// name, whose case Active Directory may not keep).
	s.stage = 3
	return nil, true, nil
}

// unwrap checks an initiator's wrap token without confidentiality (RFC 4121 §4.2.6.2) and
// returns its payload.
func unwrap(msg []byte, key types.EncryptionKey) ([]byte, error) {
	if len(msg) < gssapi.HdrLen {
		return nil, fmt.Errorf("a wrap token of %d bytes", len(msg))
	}
	if msg[2]&wrapSealed != 0 {
		return nil, errors.New("a sealed (encrypted) wrap token: RFC 4752 wraps without confidentiality")
	}
	if msg[2]&wrapAcceptorKey != 0 {
		return nil, errors.New("a wrap token under an acceptor subkey, which was not sent")
	}
	// A receiver must undo the sender's right rotation of what follows the header.
	b := slices.Clone(msg)
	if rrc := int(binary.BigEndian.Uint16(b[6:8])); rrc != 0 {
		body := b[gssapi.HdrLen:]
		if len(body) > 0 {
			rrc %= len(body)
			rotated := slices.Concat(body[rrc:], body[:rrc])
			copy(body, rotated)
		}
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(b, false); err != nil {
		return nil, err
	}
	if int(wt.EC) != checksumLen(key) {
		return nil, fmt.Errorf("a wrap token with a %d-byte checksum, not %d", wt.EC, checksumLen(key))
	}
	if ok, err := wt.Verify(key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil || !ok {
		return nil, fmt.Errorf("wrap token checksum: %v", err)
	}
	return wt.Payload, nil
}

// Realm is the default realm (the broker principal's), which the DEFAULT rule maps.
func (k *Kerberos) Realm() string { return k.realm }

// Principals names the principals clients may name the broker by (a comma list).
func (k *Kerberos) Principals() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.principals
}
