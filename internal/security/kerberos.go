package security

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// KerberosName is a Kerberos principal: service[/host][@REALM] (a user is service alone:
// alice@EXAMPLE.COM).
type KerberosName struct {
	Service, Host, Realm string
}

// ParseKerberosName splits a principal's text form. A slash or at sign inside a component is
// not supported (Kafka's KerberosName does not take them either).
func ParseKerberosName(s string) (KerberosName, error) {
	var n KerberosName
	name, realm, hasRealm := strings.Cut(s, "@")
	if hasRealm {
		if realm == "" || strings.ContainsAny(realm, "@/") {
			return n, fmt.Errorf("security: malformed Kerberos principal %q", s)
		}
		n.Realm = realm
	}
	n.Service, n.Host, _ = strings.Cut(name, "/")
	if n.Service == "" || strings.Contains(n.Host, "/") || (strings.Contains(name, "/") && n.Host == "") {
		return n, fmt.Errorf("security: malformed Kerberos principal %q", s)
	}
	return n, nil
}

func (n KerberosName) String() string {
	s := n.Service
	if n.Host != "" {
		s += "/" + n.Host
	}
	if n.Realm != "" {
		s += "@" + n.Realm
	}
	return s
}

// KerberosRules are Kafka's sasl.kerberos.principal.to.local.rules: they turn an authenticated
// Kerberos principal into the short name the broker's principal is made of (User:<short>). A
// comma-separated list, tried in order, the first rule that applies giving the name:
//
//	DEFAULT                                 a principal of the default realm: its first component
//	                                        (alice@R, kafka/host@R → alice, kafka)
//	RULE:[n:format](regexp)s/from/to/g/L    for a principal of n components: format with $0 the
//	                                        realm and $1, $2 the components; if regexp matches
//	                                        the whole of that, it with from replaced by to (once,
//	                                        or every match with g); /L or /U lower or upper case
//
// The (regexp) and the s/from/to/ part are optional; rules are separated by commas. As in Kafka,
// a result holding / or @ is an error, and a principal no rule applies to fails its
// authentication. Patterns are Go regular expressions (RE2: Java's syntax without
// back-references and look-around); `to` is read as Java reads a replacement ($1 ... refer to
// from's groups, a backslash makes the next character literal). A nil KerberosRules is DEFAULT.
type KerberosRules struct {
	rules []kerberosRule
	text  string
}

type kerberosRule struct {
	isDefault  bool
	components int
	format     string
	match      *regexp.Regexp // nil: every name
	from       *regexp.Regexp // nil: no substitution
	to         string
	global     bool
	lower      bool
	upper      bool
}

// kerberosRuleRE is one rule at the start of the text (Kafka's KerberosShortNamer grammar).
var kerberosRuleRE = regexp.MustCompile(`^\s*(?:(DEFAULT)|RULE:\[(\d*):([^\]]*)\](?:\(([^)]*)\))?(?:s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)\s*`)

// kerberosParamRE is a reference to a principal's realm ($0) or component in a rule's format.
var kerberosParamRE = regexp.MustCompile(`\$(\d+)`)

// ParseKerberosRules parses sasl.kerberos.principal.to.local.rules; "" is DEFAULT.
func ParseKerberosRules(s string) (*KerberosRules, error) {
	r := &KerberosRules{text: strings.TrimSpace(s)}
	rest := r.text
	if rest == "" {
		r.rules = []kerberosRule{{isDefault: true}}
		return r, nil
	}
	for {
		m := kerberosRuleRE.FindStringSubmatchIndex(rest)
		if m == nil || m[1] == 0 {
			return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: invalid rule at %q: want DEFAULT or RULE:[n:format](regexp)s/from/to/g/L", rest)
		}
		group := func(i int) (string, bool) {
			if m[2*i] < 0 {
				return "", false
			}
			return rest[m[2*i]:m[2*i+1]], true
		}
		var k kerberosRule
		if _, ok := group(1); ok {
			k.isDefault = true
		} else {
			n, _ := group(2)
			c, err := strconv.Atoi(n)
			if err != nil || c > 1000 {
				return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: a rule's component count %q is not a number", n)
			}
			k.components = c // (0 or more than 2 never applies, as in Kafka)
			k.format, _ = group(3)
			for i := 0; i < len(k.format); i++ {
				if k.format[i] != '$' {
					continue
				}
				j := i + 1
				for j < len(k.format) && k.format[j] >= '0' && k.format[j] <= '9' {
					j++
				}
				if ref, err := strconv.Atoi(k.format[i+1 : j]); err != nil || ref > c {
					return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: format %q: $ must be followed by 0 (the realm) to %d (a component)", k.format, c)
				}
			}
			if p, ok := group(4); ok {
				if k.match, err = regexp.Compile("^(?:" + p + ")$"); err != nil {
					return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: pattern %q: %v", p, err)
				}
			}
			if from, ok := group(5); ok {
				if k.from, err = regexp.Compile(from); err != nil {
					return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: pattern %q: %v", from, err)
				}
				to, _ := group(6)
				if k.to, err = goReplacement(to, k.from.NumSubexp()); err != nil {
					return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: replacement %q: %v", to, err)
				}
				_, k.global = group(7)
			}
			cs, _ := group(8)
			k.lower, k.upper = cs == "L", cs == "U"
		}
		r.rules = append(r.rules, k)
		rest = rest[m[1]:]
		if rest == "" {
			return r, nil
		}
		if rest[0] != ',' && rest[0] != '\n' {
			return nil, fmt.Errorf("sasl.kerberos.principal.to.local.rules: expected a comma before %q", rest)
		}
		rest = rest[1:]
	}
}

func (r *KerberosRules) String() string {
	if r == nil || r.text == "" {
		return "DEFAULT"
	}
	return r.text
}

// goReplacement turns a replacement in Java's syntax (Matcher.appendReplacement: $n refers to a
// group, the digits after the first taken while they make a group number there is; a backslash
// makes the next character literal) into a regexp.Expand template ($$ a literal $, ${n} a
// group): Go would read "$1_x" as a group named 1_x.
func goReplacement(to string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(to); i++ {
		switch c := to[i]; c {
		case '\\':
			if i+1 == len(to) {
				return "", errors.New("a backslash at the end")
			}
			i++
			if to[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(to[i])
			}
		case '$':
			if i+1 == len(to) || to[i+1] < '0' || to[i+1] > '9' {
				return "", errors.New("$ not followed by a group number")
			}
			n, j := int(to[i+1]-'0'), i+2
			for j < len(to) && to[j] >= '0' && to[j] <= '9' && n*10+int(to[j]-'0') <= groups {
				n, j = n*10+int(to[j]-'0'), j+1
			}
			if n > groups {
				return "", fmt.Errorf("no group %d", n)
			}
			fmt.Fprintf(&b, "${%d}", n)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// ErrNoKerberosRule is the error for a principal no rule applies to.
var ErrNoKerberosRule = errors.New("no sasl.kerberos.principal.to.local.rules rule applies to the principal")

// ShortName is the local name of principal n; defaultRealm is what DEFAULT takes as local.
func (r *KerberosRules) ShortName(n KerberosName, defaultRealm string) (string, error) {
	rules := []kerberosRule{{isDefault: true}}
	if r != nil {
		rules = r.rules
	}
	if n.Realm == "" { // a bare name is local already
		if n.Host == "" {
			return n.Service, nil
		}
	}
	params := []string{n.Realm, n.Service}
	if n.Host != "" {
		params = append(params, n.Host)
	}
	for _, k := range rules {
		out, ok := k.apply(params, defaultRealm)
		if !ok {
			continue
		}
		if strings.ContainsAny(out, "/@") {
			return "", fmt.Errorf("security: principal %s: non-simple name %q after rule %s", n, out, r)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNoKerberosRule, n)
}

func (k kerberosRule) apply(params []string, defaultRealm string) (string, bool) {
	var out string
	switch {
	case k.isDefault:
		if params[0] != defaultRealm {
			return "", false
		}
		out = params[1]
	case len(params)-1 == k.components:
		base := expandKerberosFormat(k.format, params)
		if k.match != nil && !k.match.MatchString(base) {
			return "", false
		}
		out = base
		if k.from != nil {
			if k.global {
				out = k.from.ReplaceAllString(base, k.to)
			} else if loc := k.from.FindStringSubmatchIndex(base); loc != nil {
				out = base[:loc[0]] + string(k.from.ExpandString(nil, k.to, base, loc)) + base[loc[1]:]
			}
		}
	default:
		return "", false
	}
	return withCase(out, k.lower, k.upper), true
}

// expandKerberosFormat replaces $0, $1, $2 in a rule's format by the realm and the components
// (ParseKerberosRules checked every reference is in range).
func expandKerberosFormat(format string, params []string) string {
	return kerberosParamRE.ReplaceAllStringFunc(format, func(ref string) string {
		i, _ := strconv.Atoi(ref[1:])
		return params[i]
	})
}
