package controller

import (
	"maps"
	"slices"

	"github.com/runnel-dev/runnel/internal/security"
)

// User is a SASL user: its SCRAM credentials by mechanism (docs/security.md §3).
type User struct {
	Scram map[security.Mechanism]security.Credential `json:"scram"`
}

// AlterScram changes SCRAM credentials: deletions first, then upserts (Kafka's
// AlterUserScramCredentials). Proposers validate them; Apply skips what cannot apply.
type AlterScram struct {
	Upserts   []ScramUpsert   `json:"upserts,omitempty"`
	Deletions []ScramDeletion `json:"deletions,omitempty"`
}

// ScramUpsert sets a user's credential for one mechanism.
type ScramUpsert struct {
	User       string              `json:"user"`
	Mechanism  security.Mechanism  `json:"mechanism"`
	Credential security.Credential `json:"credential"`
}

// ScramDeletion removes a user's credential for one mechanism; a user left with none is gone.
type ScramDeletion struct {
	User      string             `json:"user"`
	Mechanism security.Mechanism `json:"mechanism"`
}

func applyAlterScram(im *Image, a *AlterScram) {
	edit := func(name string) *User {
		u := &User{Scram: map[security.Mechanism]security.Credential{}}
		if old, ok := im.Users[name]; ok {
			u.Scram = maps.Clone(old.Scram)
		}
		if im.Users == nil {
			im.Users = map[string]*User{}
		}
		im.Users[name] = u
		return u
	}
	for _, d := range a.Deletions {
		if u, ok := im.Users[d.User]; !ok || !hasMechanism(u, d.Mechanism) {
			continue
		}
		u := edit(d.User)
		delete(u.Scram, d.Mechanism)
		if len(u.Scram) == 0 {
			delete(im.Users, d.User)
		}
	}
	for _, up := range a.Upserts {
		if up.User == "" || up.Mechanism.Type() == 0 {
			continue
		}
		edit(up.User).Scram[up.Mechanism] = up.Credential
	}
}

func hasMechanism(u *User, m security.Mechanism) bool {
	_, ok := u.Scram[m]
	return ok
}

// ScramCredential returns a user's stored credential for a mechanism.
func (im *Image) ScramCredential(user string, m security.Mechanism) (security.Credential, bool) {
	u, ok := im.Users[user]
	if !ok {
		return security.Credential{}, false
	}
	c, ok := u.Scram[m]
	return c, ok
}

// Endpoint returns the node's advertised address on a Kafka listener. A node registered by an
// older version, without listeners, has only its Kafka address, given for every listener.
func (n *Node) Endpoint(listener string) (string, int32, bool) {
	if len(n.Listeners) == 0 {
		return n.KafkaHost, n.KafkaPort, true
	}
	for _, e := range n.Listeners {
		if e.Name == listener {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// ACLChange names ACL bindings to add or remove.
type ACLChange struct {
	ACLs []security.ACL `json:"acls"`
}

func applyACLs(im *Image, index uint64, create bool, acls []security.ACL) {
	out := slices.Clone(im.ACLs)
	for _, a := range acls {
		i, found := slices.BinarySearchFunc(out, a, security.Compare)
		switch {
		case create && !found && a.Validate() == nil && (a.Operation != security.ACLOperationTwoPhaseCommit || im.Level >= LevelTwoPhaseCommitACLs):
			out = slices.Insert(out, i, a)
		case !create && found:
			out = slices.Delete(out, i, i+1)
		}
	}
	im.ACLs, im.ACLVersion = out, index
}
