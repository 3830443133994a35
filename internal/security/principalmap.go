package security

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's subject into the name of its principal, by
// Kafka's ssl.principal.mapping.rules (KIP-371): a comma-separated list of rules, tried in
// order, the first that applies giving the name:
//
//	DEFAULT                      the whole subject (RFC 2253), Kafka's default
//	RULE:pattern/replacement/    if pattern matches the whole subject: the subject with the
//	RULE:pattern/replacement/L   match replaced ($1 ... refer to groups; \ escapes), in lower
//	RULE:pattern/replacement/U   or upper case with L or U
//
// A pattern and a replacement may hold commas; a slash or backslash in them is escaped with a
// backslash. Patterns are Go regular expressions (RE2: Java's syntax without back-references
// and look-around). A subject no rule applies to fails the connection's authentication, as in
// Kafka. A nil mapper is DEFAULT.
type PrincipalMapper struct {
	rules []principalRule
}

type principalRule struct {
	whole       bool           // DEFAULT
	pattern     *regexp.Regexp // anchored at both ends: the rule applies when the whole subject matches
	replacement string         // a regexp.Expand template
	lower       bool
	upper       bool
}

// ErrNoPrincipalRule is the error for a subject that no mapping rule applies to.
var ErrNoPrincipalRule = errors.New("no ssl.principal.mapping.rules rule applies to the certificate subject")

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules; "" is DEFAULT.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		return m, nil
	}
	for {
		var r principalRule
		var err error
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.whole = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			if r, rest, err = parseRule(rest[len("RULE:"):]); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule at %q: want DEFAULT or RULE:pattern/replacement/[LU]", rest)
		}
		m.rules = append(m.rules, r)
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return m, nil
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule at %q: rules are separated by commas", rest)
		}
		rest = strings.TrimLeft(rest[1:], " \t")
	}
}

// parseRule parses "pattern/replacement/[LU]" and returns the rule and what follows it.
func parseRule(s string) (principalRule, string, error) {
	var r principalRule
	pattern, s, ok := cutEscaped(s)
	if !ok {
		return r, "", fmt.Errorf("ssl.principal.mapping.rules: RULE:%s lacks the / after its pattern", s)
	}
	replacement, s, ok := cutEscaped(s)
	if !ok {
		return r, "", fmt.Errorf("ssl.principal.mapping.rules: RULE:%s/%s lacks the / after its replacement", pattern, s)
	}
	switch {
	case strings.HasPrefix(s, "L"):
		r.lower, s = true, s[1:]
	case strings.HasPrefix(s, "U"):
		r.upper, s = true, s[1:]
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return r, "", fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %v", pattern, err)
	}
	r.pattern = re
	if r.replacement, err = javaReplacement(replacement, re.NumSubexp()); err != nil {
		return r, "", fmt.Errorf("ssl.principal.mapping.rules: RULE:%s/%s/: %v", pattern, replacement, err)
	}
	return r, s, nil
}

// cutEscaped returns s up to its first slash not escaped by a backslash (the escapes kept for the
// regular expression; an escaped slash becomes a slash), and what follows the slash.
func cutEscaped(s string) (string, string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			if s[i+1] != '/' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[i+1])
			i++
		case c == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", s, false
}

// javaReplacement turns a Java replacement string ($n refers to group n, taking as many digits
// as name a group; \x is x) into a regexp.Expand template.
func javaReplacement(s string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			if s[i+1] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i+1])
			}
			i++
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			n, j := int(s[i+1]-'0'), i+2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' && n*10+int(s[j]-'0') <= groups {
				n, j = n*10+int(s[j]-'0'), j+1
			}
			if n > groups {
				return "", fmt.Errorf("$%d: the pattern has %d groups", n, groups)
			}
			fmt.Fprintf(&b, "${%d}", n)
			i = j - 1
		case c == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// Map returns the principal name of a subject (RFC 2253), or ErrNoPrincipalRule.
func (m *PrincipalMapper) Map(subject string) (string, error) {
	if m == nil || len(m.rules) == 0 {
		return subject, nil
	}
	for _, r := range m.rules {
		if r.whole {
			return subject, nil
		}
		match := r.pattern.FindStringSubmatchIndex(subject)
		if match == nil {
			continue
		}
		return withCase(string(r.pattern.ExpandString(nil, r.replacement, subject, match)), r.lower, r.upper), nil
	}
	return "", fmt.Errorf("%w: %q", ErrNoPrincipalRule, subject)
}

// withCase is s in lower or upper case, as a mapping rule's /L or /U says (neither: as it is).
func withCase(s string, lower, upper bool) string {
	switch {
	case lower:
		return strings.ToLower(s)
	case upper:
		return strings.ToUpper(s)
	}
	return s
}
