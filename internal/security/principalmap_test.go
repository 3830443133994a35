package security

import (
	"errors"
	"testing"
)

// TestPrincipalMappingRules: Kafka's rule syntax (KIP-371) and semantics: rules in order, the
// first whose pattern matches the whole subject applies; $n groups with Java's digit rule, \
// escapes, commas inside patterns, L and U; DEFAULT; no rule applying is an error; malformed
// rules are refused.
func TestPrincipalMappingRules(t *testing.T) {
	const dn = "CN=Alice Smith,OU=ServiceUsers,O=Example,L=Berlin,C=DE"
	tests := []struct {
		rules, subject, want string
		noRule               bool
	}{
		{"", dn, dn, false},
		{"DEFAULT", dn, dn, false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, dn, "Alice Smith", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`, dn, "alice smith", false},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),C=(.*?)$/$1@$2/U`, dn, "ALICE SMITH@SERVICEUSERS", false},
		{`RULE:^CN=(.*?),OU=Other.*$/$1/,RULE:^.*O=(\w+),.*$/org-$1/`, dn, "org-Example", false},
		{`RULE:^CN=(.*?),OU=Other.*$/$1/`, dn, "", true},
		{`RULE:^CN=([^,]*),.*$/$10/`, dn, "Alice Smith0", false}, // $10 with one group: $1 then "0"
		{`RULE:^CN=([^,]*),.*$/\$1 is $1/`, dn, "$1 is Alice Smith", false},
		{`RULE:^CN=a\/b,.*$/slash/`, "CN=a/b,O=x", "slash", false},
		{`RULE:^CN=(.*),O=x$/$1\/y/`, "CN=q,O=x", "q/y", false},
	}
	for _, tt := range tests {
		m, err := ParsePrincipalMappingRules(tt.rules)
		if err != nil {
			t.Fatalf("%q: %v", tt.rules, err)
		}
		got, err := m.Map(tt.subject)
		if tt.noRule {
			if !errors.Is(err, ErrNoPrincipalRule) {
				t.Errorf("%q on %q: %q, %v; want ErrNoPrincipalRule", tt.rules, tt.subject, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q on %q: %q, %v; want %q", tt.rules, tt.subject, got, err, tt.want)
		}
	}
	for _, bad := range []string{"RULE:abc", "RULE:a/b", "NOPE", "DEFAULT DEFAULT", `RULE:(/x/,`, "RULE:^(a)$/$2/", "RULE:a/b/Q"} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil {
			t.Errorf("%q parsed; want an error", bad)
		}
	}
	var nilMapper *PrincipalMapper
	if got, err := nilMapper.Map(dn); err != nil || got != dn {
		t.Errorf("a nil mapper: %q, %v; want the subject", got, err)
	}
}

// FuzzPrincipalMappingRules: parsing any rules string never panics, and a parsed mapper maps
// any subject without panicking.
func FuzzPrincipalMappingRules(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT`, "CN=a,OU=b")
	f.Add(`RULE:a\/b/\$$0/U`, "a/b")
	f.Fuzz(func(t *testing.T, rules, subject string) {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			return
		}
		m.Map(subject)
	})
}
