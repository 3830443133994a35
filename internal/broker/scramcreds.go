package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// SCRAM credentials (KIP-554): kept in the cluster metadata, salted and hashed by the client
// (kafka-configs, runnel user); the broker stores StoredKey and ServerKey, never the salted
// password (docs/security.md §3).

func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, handleDescribeUserScram)
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, handleAlterUserScram)
}

func handleDescribeUserScram(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := r.conn.b.cl.Image()
	names := make([]string, 0, len(req.Users))
	for _, u := range req.Users {
		names = append(names, u.Name)
	}
	all := len(names) == 0
	if all {
		for name := range img.Users {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	done := map[string]bool{}
	for _, name := range names {
		if done[name] {
			continue
		}
		done[name] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		u, ok := img.Users[name]
		switch {
		case count[name] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = strp("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
		case !ok:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = strp("Attempt to describe a user credential that does not exist: " + name)
		default:
			for _, m := range security.Mechanisms {
				if c, ok := u.Scram[m]; ok {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = m.Type(), int32(c.Iterations)
					res.CredentialInfos = append(res.CredentialInfos, info)
				}
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}
}

func handleAlterUserScram(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	b := r.conn.b
	b.adminBarrier(ctx) // a credential created through another node a moment ago is known here
	img := b.cl.Image()
	type userErr struct {
		code int16
		msg  string
	}
	errs := map[string]*userErr{}
	var order []string
	note := func(user string) {
		if _, ok := errs[user]; !ok {
			errs[user] = nil
			order = append(order, user)
		}
	}
	fail := func(user string, code int16, format string, args ...any) {
		note(user)
		if errs[user] == nil {
			errs[user] = &userErr{code, fmt.Sprintf(format, args...)}
		}
	}
	// A user is changed at most once a request, whatever the mechanisms: a second deletion or
	// upsertion of it refuses all of its changes, as Kafka's ScramControlManager.alterCredentials
	// (keyed by user alone) does.
	seen := map[string]bool{}
	// check is what deletions and upsertions share: once per request, a name, a known mechanism.
	check := func(name string, mech int8) (security.Mechanism, bool) {
		note(name)
		m, known := security.MechanismByType(mech)
		again := seen[name]
		seen[name] = true
		switch {
		case again:
			fail(name, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		case name == "":
			fail(name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case !known:
			fail(name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism %d", mech)
		default:
			return m, true
		}
		return m, false
	}
	cmd := &controller.AlterScram{}
	for _, d := range req.Deletions {
		if m, ok := check(d.Name, d.Mechanism); ok {
			if _, ok := img.ScramCredential(d.Name, m); !ok {
				fail(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
			cmd.Deletions = append(cmd.Deletions, controller.ScramDeletion{User: d.Name, Mechanism: m})
		}
	}
	for _, u := range req.Upsertions {
		if m, ok := check(u.Name, u.Mechanism); ok {
			c, err := security.NewCredential(m, u.Salt, u.SaltedPassword, int(u.Iterations))
			if err != nil {
				fail(u.Name, kerr.UnacceptableCredential.Code, "%v", err)
				continue
			}
			cmd.Upserts = append(cmd.Upserts, controller.ScramUpsert{User: u.Name, Mechanism: m, Credential: c})
		}
	}
	// A user's changes apply all together or not at all.
	cmd.Deletions = slices.DeleteFunc(cmd.Deletions, func(d controller.ScramDeletion) bool { return errs[d.User] != nil })
	cmd.Upserts = slices.DeleteFunc(cmd.Upserts, func(u controller.ScramUpsert) bool { return errs[u.User] != nil })
	var aerr *adminError
	if len(cmd.Deletions)+len(cmd.Upserts) > 0 {
		_, aerr = b.propose(ctx, &controller.Command{Op: controller.OpAlterScram, AlterScram: cmd})
	}
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		switch e := errs[user]; {
		case e != nil:
			res.ErrorCode, res.ErrorMessage = e.code, strp(e.msg)
		case aerr != nil:
			res.ErrorCode, res.ErrorMessage = aerr.code.Code, strp(aerr.msg)
		default:
			b.logger.Info("broker: SCRAM credentials altered", "user", user, "by", r.conn.principal)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}
}
