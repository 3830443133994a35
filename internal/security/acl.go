package security

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL is one ACL binding, Kafka's model: who (principal, host) may or may not (permission) do
// what (operation) to which resources (type, pattern type, name). The enums are Kafka's numbers.
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// ClusterResource is the name of the one CLUSTER resource, as in Kafka.
const ClusterResource = "kafka-cluster"

// Wildcard is the resource name, principal name and host that match every one.
const Wildcard = "*"

func (a ACL) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permission=%s) on %s:%s:%s", a.Principal, a.Host,
		a.Operation, a.Permission, a.ResourceType, a.PatternType, a.ResourceName)
}

// Compare orders bindings by resource, then the rest (the image keeps them sorted).
func Compare(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.ResourceName, b.ResourceName), strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// ACLOperationTwoPhaseCommit is Kafka 4's TWO_PHASE_COMMIT operation (KIP-939), which kmsg
// v1.15 does not name: bindings with it are stored and listed, as Kafka's, for tools and ACL
// copies between clusters; nothing Runnel serves checks it (InitProducerId v6's 2PC is not
// served).
const ACLOperationTwoPhaseCommit kmsg.ACLOperation = 15

// OperationName is an operation's name as Kafka's AclOperation spells it.
func OperationName(op kmsg.ACLOperation) string {
	if op == ACLOperationTwoPhaseCommit {
		return "TWO_PHASE_COMMIT"
	}
	return op.String()
}

// ParseOperation reads an operation's name (any case, with or without separators), as
// kmsg.ParseACLOperation, TWO_PHASE_COMMIT included.
func ParseOperation(s string) (kmsg.ACLOperation, error) {
	if n := strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(s)); n == "twophasecommit" {
		return ACLOperationTwoPhaseCommit, nil
	}
	return kmsg.ParseACLOperation(s)
}

// Validate reports why a binding cannot be created (Kafka answers INVALID_REQUEST).
func (a ACL) Validate() error {
	switch {
	case a.ResourceType < kmsg.ACLResourceTypeTopic || a.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("invalid resource type %d", a.ResourceType)
	case a.PatternType != kmsg.ACLResourcePatternTypeLiteral && a.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("the pattern type of a binding is LITERAL or PREFIXED, not %s", a.PatternType)
	case a.ResourceName == "":
		return fmt.Errorf("the resource name is empty")
	case a.ResourceType == kmsg.ACLResourceTypeCluster && a.ResourceName != ClusterResource:
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterResource)
	case a.Operation < kmsg.ACLOperationAll || a.Operation > ACLOperationTwoPhaseCommit:
		return fmt.Errorf("invalid operation %d", a.Operation)
	case a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("the permission of a binding is ALLOW or DENY, not %s", a.Permission)
	case !strings.Contains(a.Principal, ":"):
		return fmt.Errorf("could not parse principal from %q (no colon is present separating the principal type from the principal name)", a.Principal)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls): nil strings and ANY enums match
// everything; pattern type MATCH selects the bindings that apply to the resource name.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate reports why a filter is malformed.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("invalid resource type %d", f.ResourceType)
	case f.PatternType <= kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("invalid pattern type %d", f.PatternType)
	case f.Operation <= kmsg.ACLOperationUnknown || f.Operation > ACLOperationTwoPhaseCommit:
		return fmt.Errorf("invalid operation %d", f.Operation)
	case f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("invalid permission type %d", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects a.
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternApplies(a, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != a.PatternType || f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == a.Principal) && (f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == a.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == a.Permission)
}

// patternApplies reports whether binding a's resource pattern covers the resource name.
func patternApplies(a ACL, name string) bool {
	if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, a.ResourceName)
	}
	return a.ResourceName == name || a.ResourceName == Wildcard
}

// ACLIndex is a set of bindings arranged for authorization: per resource type, literal names
// in a map, the wildcard and prefixed patterns in lists.
type ACLIndex struct {
	types map[kmsg.ACLResourceType]*typeACLs
}

type typeACLs struct {
	literal  map[string][]ACL
	wildcard []ACL
	prefixed []ACL
}

// NewACLIndex indexes the bindings.
func NewACLIndex(acls []ACL) *ACLIndex {
	ix := &ACLIndex{types: map[kmsg.ACLResourceType]*typeACLs{}}
	for _, a := range acls {
		t := ix.types[a.ResourceType]
		if t == nil {
			t = &typeACLs{literal: map[string][]ACL{}}
			ix.types[a.ResourceType] = t
		}
		switch {
		case a.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			t.prefixed = append(t.prefixed, a)
		case a.ResourceName == Wildcard:
			t.wildcard = append(t.wildcard, a)
		default:
			t.literal[a.ResourceName] = append(t.literal[a.ResourceName], a)
		}
	}
	return ix
}

// each calls fn with every binding whose pattern covers the resource, until fn returns false.
func (ix *ACLIndex) each(rt kmsg.ACLResourceType, name string, fn func(ACL) bool) {
	t := ix.types[rt]
	if t == nil {
		return
	}
	for _, a := range t.literal[name] {
		if !fn(a) {
			return
		}
	}
	for _, a := range t.wildcard {
		if !fn(a) {
			return
		}
	}
	for _, a := range t.prefixed {
		if strings.HasPrefix(name, a.ResourceName) && !fn(a) {
			return
		}
	}
}

// Authorizer decides with Kafka's StandardAuthorizer rules (docs/security.md §4).
type Authorizer struct {
	SuperUsers   map[string]bool // principals allowed everything
	AllowIfNoACL bool            // allow.everyone.if.no.acl.found
}

// ParseSuperUsers parses Kafka's super.users: "User:a;User:b".
func ParseSuperUsers(spec string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(spec, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("security: super user %q is not Type:name (e.g. User:admin)", p)
		}
		out[p] = true
	}
	return out, nil
}

func principalMatches(a ACL, principal string) bool {
	return a.Principal == principal || a.Principal == "User:*"
}

func hostMatches(a ACL, host string) bool { return a.Host == Wildcard || a.Host == host }

// implies reports whether an ALLOW binding for operation granted allows operation op: ALL
// allows everything; READ, WRITE, DELETE and ALTER allow DESCRIBE; ALTER_CONFIGS allows
// DESCRIBE_CONFIGS.
func implies(granted, op kmsg.ACLOperation) bool {
	switch {
	case granted == op || granted == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		return granted == kmsg.ACLOperationRead || granted == kmsg.ACLOperationWrite || granted == kmsg.ACLOperationDelete || granted == kmsg.ACLOperationAlter
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// Authorize reports whether principal, connected from host, may do op on the resource: a
// matching DENY wins, then a matching ALLOW, else AllowIfNoACL when no binding covers the
// resource at all.
func (z *Authorizer) Authorize(ix *ACLIndex, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return z.authorize(ix, principal, host, op, rt, name, z.AllowIfNoACL)
}

// AuthorizeExplicitly is Authorize without AllowIfNoACL: only super.users or an ALLOW binding
// grant (what lets one principal act as another must be granted, never assumed).
func (z *Authorizer) AuthorizeExplicitly(ix *ACLIndex, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return z.authorize(ix, principal, host, op, rt, name, false)
}

func (z *Authorizer) authorize(ix *ACLIndex, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, ifNoACL bool) bool {
	if z.SuperUsers[principal] {
		return true
	}
	covered, allowed, denied := false, false, false
	ix.each(rt, name, func(a ACL) bool {
		covered = true
		if !principalMatches(a, principal) || !hostMatches(a, host) {
			return true
		}
		if a.Permission == kmsg.ACLPermissionTypeDeny && (a.Operation == op || a.Operation == kmsg.ACLOperationAll) {
			denied = true
			return false
		}
		if a.Permission == kmsg.ACLPermissionTypeAllow && implies(a.Operation, op) {
			allowed = true
		}
		return true
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	}
	return !covered && ifNoACL
}

// AuthorizeAnyTopic reports whether principal may do op on some topic: it has an ALLOW binding
// for op (or one implying it) on some topic pattern that no DENY for op dominates, as Kafka's
// authorizeByResourceType: a DENY on every topic (the wildcard) dominates all; a literal ALLOW
// is dominated by a literal DENY of its name or a prefixed DENY of a prefix of it; a prefixed
// ALLOW by a prefixed DENY of a prefix of its own. Kafka asks this for an idempotent
// producer's InitProducerId (WRITE on any topic stands in for IDEMPOTENT_WRITE on the cluster).
// With allow.everyone.if.no.acl.found it is also allowed when op on the topic named "*" is (no
// binding covers that name, or a wildcard ALLOW does), as Kafka's StandardAuthorizer: a
// principal may then write to the topics no binding covers.
func (z *Authorizer) AuthorizeAnyTopic(ix *ACLIndex, principal, host string, op kmsg.ACLOperation) bool {
	if z.SuperUsers[principal] {
		return true
	}
	if z.AllowIfNoACL && z.authorize(ix, principal, host, op, kmsg.ACLResourceTypeTopic, Wildcard, true) {
		return true
	}
	t := ix.types[kmsg.ACLResourceTypeTopic]
	if t == nil {
		return false
	}
	applies := func(a ACL) bool { return principalMatches(a, principal) && hostMatches(a, host) }
	deny := func(a ACL) bool {
		return applies(a) && a.Permission == kmsg.ACLPermissionTypeDeny && (a.Operation == op || a.Operation == kmsg.ACLOperationAll)
	}
	allow := func(a ACL) bool {
		return applies(a) && a.Permission == kmsg.ACLPermissionTypeAllow && implies(a.Operation, op)
	}
	if slices.ContainsFunc(t.wildcard, deny) {
		return false
	}
	var denyPrefixes []string
	for _, a := range t.prefixed {
		if deny(a) {
			denyPrefixes = append(denyPrefixes, a.ResourceName)
		}
	}
	deniedUnder := func(name string) bool {
		return slices.ContainsFunc(denyPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	if slices.ContainsFunc(t.wildcard, allow) {
		return true
	}
	for _, a := range t.prefixed {
		if allow(a) && !deniedUnder(a.ResourceName) {
			return true
		}
	}
	for name, l := range t.literal {
		if slices.ContainsFunc(l, allow) && !slices.ContainsFunc(l, deny) && !deniedUnder(name) {
			return true
		}
	}
	return false
}

// ACLCache keeps the index of the latest version of the bindings: rebuilt when the version
// (the metadata log index of their last change) moves.
type ACLCache struct {
	cur atomic.Pointer[cachedIndex]
}

type cachedIndex struct {
	version uint64
	index   *ACLIndex
}

// Index returns the index of acls, which are the bindings at version.
func (c *ACLCache) Index(version uint64, acls []ACL) *ACLIndex {
	if ci := c.cur.Load(); ci != nil && ci.version == version {
		return ci.index
	}
	ci := &cachedIndex{version: version, index: NewACLIndex(acls)}
	c.cur.Store(ci)
	return ci.index
}
