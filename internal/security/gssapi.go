package security

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/service"
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
	// MaxClockSkew bounds the difference between a client's clock and ours (default 5 minutes,
	// Kerberos' clockskew).
	MaxClockSkew time.Duration
}

// Kerberos accepts GSSAPI exchanges (NewGSSAPISession).
type Kerberos struct {
	keytab     *keytab.Keytab
	service    string
	principal  *KerberosName // nil: any of the keytab's service principals
	realm      string        // the default realm: the broker principal's
	rules      *KerberosRules
	skew       time.Duration
	principals string // the keytab's principals that may be named (for the log)
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
	b, err := os.ReadFile(cfg.Keytab)
	if err != nil {
		return nil, fmt.Errorf("security: GSSAPI keytab: %w", err)
	}
	kt := &keytab.Keytab{}
	if err := kt.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("security: GSSAPI keytab %s: %w", cfg.Keytab, err)
	}
	rules, err := ParseKerberosRules(cfg.Rules)
	if err != nil {
		return nil, err
	}
	k := &Kerberos{keytab: kt, service: cfg.ServiceName, rules: rules, skew: cfg.MaxClockSkew}
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
	var found []string
	for _, e := range kt.Entries {
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
		if !slices.Contains(found, n.String()) {
			found = append(found, n.String())
		}
		if k.realm == "" {
			k.realm = n.Realm
		}
	}
	k.principals = strings.Join(found, ",")
	if len(found) == 0 {
		want := k.service + "/<host>@<REALM>"
		if k.principal != nil {
			want = k.principal.String()
		}
		return nil, fmt.Errorf("security: GSSAPI keytab %s holds no AES key of %s", cfg.Keytab, want)
	}
	return k, nil
}

// cfxEtype reports whether an encryption type has RFC 4121's token format (the AES types: every
// Kerberos deployment of this century; DES and RC4 use RFC 1964's older tokens, not built).
func cfxEtype(t int32) bool {
	switch t {
	case etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96,
		etypeID.AES128_CTS_HMAC_SHA256_128, etypeID.AES256_CTS_HMAC_SHA384_192:
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
// the client answers with a wrap token choosing it, and an optional authorization id that
// must be the authenticated principal.
type gssapiSession struct {
	k     *Kerberos
	stage int // 0: expecting the AP-REQ; 1: the empty message after an AP-REP; 2: the client's security layer choice

	key         types.EncryptionKey // the context's key: the initiator's subkey, else the ticket's session key
	acceptorSeq uint64              // the sequence number of our wrap token
	principal   KerberosName        // authenticated
	user        string              // its short name
}

// NewGSSAPISession starts a server exchange of GSSAPI.
func NewGSSAPISession(k *Kerberos) Session { return &gssapiSession{k: k} }

func (s *gssapiSession) User() string { return s.user }

func (s *gssapiSession) fail(reason string, args ...any) ([]byte, bool, error) {
	s.stage = -1
	user := ""
	if s.principal.Service != "" {
		user = s.principal.String()
	}
	return nil, false, &AuthError{Mechanism: GSSAPI, User: user, Reason: fmt.Sprintf(reason, args...)}
}

func (s *gssapiSession) Step(msg []byte) ([]byte, bool, error) {
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
	ok, creds, err := service.VerifyAPREQ(&req, service.NewSettings(s.k.keytab, service.MaxClockSkew(s.k.skew), service.DecodePAC(false)))
	if err != nil || !ok {
		return s.fail("KRB_AP_REQ for %s refused: %v", target, err)
	}
	s.principal = KerberosName{Service: creds.CName().NameString[0], Realm: creds.Realm()}
	if n := creds.CName().NameString; len(n) == 2 {
		s.principal.Host = n[1]
	} else if len(n) != 1 {
		return s.fail("client principal of %d components", len(n))
	}
	if s.user, err = s.k.rules.ShortName(s.principal, s.k.realm); err != nil {
		return s.fail("%v", err)
	}
	auth := req.Authenticator
	if auth.Cksum.CksumType != gssChecksumType || len(auth.Cksum.Checksum) < 24 {
		return s.fail("the authenticator has no GSS-API checksum (type %d)", auth.Cksum.CksumType)
	}
	flags := binary.LittleEndian.Uint32(auth.Cksum.Checksum[20:24])
	s.key = req.Ticket.DecryptedEncPart.Key
	if auth.SubKey.KeyType != 0 {
		s.key = auth.SubKey
	}
	if !cfxEtype(s.key.KeyType) {
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
	rep, err := apRep(req.Ticket.DecryptedEncPart.Key, auth.CTime, auth.Cusec, int64(s.acceptorSeq))
	if err != nil {
		return s.fail("building the AP-REP: %v", err)
	}
	s.stage = 1
	return rep, false, nil
}

func (k *Kerberos) want() string {
	if k.principal != nil {
		return k.principal.String()
	}
	return k.service + "/*"
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
// its maximum message size, and an authorization id.
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
	if authz := string(payload[4:]); authz != "" && authz != s.principal.String() && authz != s.user {
		return s.fail("%s may not act as %q (the authorization id must be the authenticated principal)", s.principal, authz)
	}
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
func (k *Kerberos) Principals() string { return k.principals }
