package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/security"
)

// clientSecurity is how the admin commands connect to a secured cluster (docs/security.md).
type clientSecurity struct {
	tls                     bool
	caFile, certFile, keyFn string
	mechanism, user, pass   string
}

func (c *clientSecurity) register(flags *pflag.FlagSet) {
	flags.BoolVar(&c.tls, "tls", false, "connect with TLS (SSL or SASL_SSL listeners)")
	flags.StringVar(&c.caFile, "tls-ca-file", "", "PEM CA bundle that verifies the brokers (default: the system's)")
	flags.StringVar(&c.certFile, "tls-cert-file", "", "PEM client certificate (mTLS)")
	flags.StringVar(&c.keyFn, "tls-key-file", "", "PEM key of --tls-cert-file")
	flags.StringVar(&c.mechanism, "sasl-mechanism", "", "SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (SASL listeners)")
	flags.StringVar(&c.user, "sasl-user", "", "SASL user name")
	flags.StringVar(&c.pass, "sasl-password", "", "SASL password (better: the RUNNEL_SASL_PASSWORD environment variable)")
}

// opts turns the flags into client options.
func (c *clientSecurity) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.tls || c.caFile != "" || c.certFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.caFile != "" {
			pem, err := os.ReadFile(c.caFile)
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca-file %s holds no PEM certificate", c.caFile)
			}
		}
		if c.certFile != "" || c.keyFn != "" {
			pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFn)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch strings.ToUpper(c.mechanism) {
	case "":
		if c.user != "" {
			return nil, errors.New("--sasl-user needs --sasl-mechanism")
		}
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()))
	case string(security.ScramSHA256):
		opts = append(opts, kgo.SASL(scram.Auth{User: c.user, Pass: c.pass}.AsSha256Mechanism()))
	case string(security.ScramSHA512):
		opts = append(opts, kgo.SASL(scram.Auth{User: c.user, Pass: c.pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.mechanism)
	}
	return opts, nil
}

// --- runnel user --------------------------------------------------------------------------

func newUserCommand() *cobra.Command {
	var f topicFlags
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Add, list and delete SASL/SCRAM users (Kafka's user SCRAM credentials)",
		Args:  cobra.NoArgs,
	}
	f.register(cmd.PersistentFlags())
	var pass, mech string
	var iterations int32
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user, or set its password (the password is salted and hashed here; the cluster never sees it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pass == "" {
				pass = os.Getenv("RUNNEL_USER_PASSWORD")
			}
			if pass == "" {
				return errors.New("a password is needed: --password or RUNNEL_USER_PASSWORD")
			}
			mechs, err := userMechanisms(mech)
			if err != nil {
				return err
			}
			var ups []kadm.UpsertSCRAM
			for _, m := range mechs {
				ups = append(ups, kadm.UpsertSCRAM{User: args[0], Mechanism: m, Iterations: iterations, Password: pass})
			}
			return alterUsers(cmd, &f, nil, ups)
		},
	}
	add.Flags().StringVar(&pass, "password", "", "the password (better: the RUNNEL_USER_PASSWORD environment variable)")
	add.Flags().StringVar(&mech, "mechanism", "both", "SCRAM-SHA-256, SCRAM-SHA-512 or both")
	add.Flags().Int32Var(&iterations, "iterations", 8192, "SCRAM iterations (4096-16384)")
	var delMech string
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user's credentials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeUserSCRAMs(ctx, args[0])
			if err != nil {
				return err
			}
			want, err := userMechanisms(delMech)
			if err != nil {
				return err
			}
			var dels []kadm.DeleteSCRAM
			for _, info := range described[args[0]].CredInfos {
				if slices.Contains(want, info.Mechanism) {
					dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: info.Mechanism})
				}
			}
			if len(dels) == 0 {
				return fmt.Errorf("user %s has no such credential", args[0])
			}
			return alterUsers(cmd, &f, dels, nil)
		},
	}
	del.Flags().StringVar(&delMech, "mechanism", "both", "SCRAM-SHA-256, SCRAM-SHA-512 or both")
	list := &cobra.Command{
		Use:   "list",
		Short: "List users with their mechanisms and iterations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return err
			}
			type row struct {
				User       string `json:"user"`
				Mechanism  string `json:"mechanism"`
				Iterations int32  `json:"iterations"`
			}
			var rows []row
			for _, u := range described.Sorted() {
				if u.Err != nil {
					return fmt.Errorf("%s: %w", u.User, u.Err)
				}
				for _, info := range u.CredInfos {
					rows = append(rows, row{u.User, info.Mechanism.String(), info.Iterations})
				}
			}
			return f.output(cmd.OutOrStdout(), rows, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%d\n", r.User, r.Mechanism, r.Iterations)
				}
				tw.Flush()
			})
		},
	}
	cmd.AddCommand(add, del, list)
	return cmd
}

func userMechanisms(s string) ([]kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "BOTH", "":
		return []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}, nil
	case string(security.ScramSHA256):
		return []kadm.ScramMechanism{kadm.ScramSha256}, nil
	case string(security.ScramSHA512):
		return []kadm.ScramMechanism{kadm.ScramSha512}, nil
	}
	return nil, fmt.Errorf("--mechanism %q is not SCRAM-SHA-256, SCRAM-SHA-512 or both", s)
}

// alterUsers sends each credential change in a request of its own: a cluster refuses a request
// changing one user twice (DUPLICATE_RESOURCE, as Kafka's controller), so both mechanisms of a
// user are set, or deleted, one after the other.
func alterUsers(cmd *cobra.Command, f *topicFlags, dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM) error {
	adm, ctx, done, err := f.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	var users []string
	alter := func(dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM) error {
		res, err := adm.AlterUserSCRAMs(ctx, dels, ups)
		if err != nil {
			return err
		}
		for _, r := range res.Sorted() {
			if r.Err != nil {
				return fmt.Errorf("%s: %w", r.User, r.Err)
			}
			if !slices.Contains(users, r.User) {
				users = append(users, r.User)
			}
		}
		return nil
	}
	for _, d := range dels {
		if err := alter([]kadm.DeleteSCRAM{d}, nil); err != nil {
			return err
		}
	}
	for _, u := range ups {
		if err := alter(nil, []kadm.UpsertSCRAM{u}); err != nil {
			return err
		}
	}
	for _, user := range users {
		fmt.Fprintf(cmd.OutOrStdout(), "user %s: done\n", user)
	}
	return nil
}

// --- runnel acl ---------------------------------------------------------------------------

// aclFlags select or describe ACL bindings, with kafka-acls' vocabulary.
type aclFlags struct {
	principal, host                    string
	operations                         []string
	deny                               bool
	topic, group, txnID, user, pattern string
	cluster                            bool
}

func (a *aclFlags) register(flags *pflag.FlagSet, adding bool) {
	flags.StringVar(&a.principal, "principal", "", "principal, e.g. User:alice or User:*")
	flags.StringVar(&a.host, "host", "", "client host (IP); * every host")
	flags.StringSliceVar(&a.operations, "operation", nil, "operations: read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write, all")
	flags.BoolVar(&a.deny, "deny", false, "a DENY binding (default ALLOW)")
	flags.StringVar(&a.topic, "topic", "", "topic name (or prefix with --resource-pattern-type prefixed; * every topic)")
	flags.StringVar(&a.group, "group", "", "consumer group name")
	flags.StringVar(&a.txnID, "transactional-id", "", "transactional id")
	flags.BoolVar(&a.cluster, "cluster", false, "the cluster resource")
	pt := "literal"
	if !adding {
		pt = "any"
	}
	flags.StringVar(&a.pattern, "resource-pattern-type", pt, "literal or prefixed (list and delete also: any, match)")
	if adding {
		flags.Lookup("host").DefValue, a.host = "*", "*"
	}
}

func (a *aclFlags) filter(adding bool) (security.ACL, security.Filter, error) {
	var f security.Filter
	var binding security.ACL
	pt, err := kmsg.ParseACLResourcePatternType(a.pattern)
	if err != nil {
		return binding, f, fmt.Errorf("--resource-pattern-type: %w", err)
	}
	f.PatternType, f.ResourceType = pt, kmsg.ACLResourceTypeAny
	set := 0
	for _, r := range []struct {
		on   bool
		typ  kmsg.ACLResourceType
		name string
	}{{a.topic != "", kmsg.ACLResourceTypeTopic, a.topic}, {a.group != "", kmsg.ACLResourceTypeGroup, a.group},
		{a.txnID != "", kmsg.ACLResourceTypeTransactionalId, a.txnID}, {a.cluster, kmsg.ACLResourceTypeCluster, security.ClusterResource}} {
		if r.on {
			set++
			f.ResourceType, f.ResourceName = r.typ, &r.name
		}
	}
	if set > 1 || adding && set == 0 {
		return binding, f, errors.New("name one resource: --topic, --group, --transactional-id or --cluster")
	}
	f.Operation, f.Permission = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if a.principal != "" {
		f.Principal = &a.principal
	}
	if a.host != "" {
		f.Host = &a.host
	}
	if a.deny {
		f.Permission = kmsg.ACLPermissionTypeDeny
	} else if adding {
		f.Permission = kmsg.ACLPermissionTypeAllow
	}
	if len(a.operations) == 1 {
		op, err := security.ParseOperation(a.operations[0])
		if err != nil {
			return binding, f, fmt.Errorf("--operation: %w", err)
		}
		f.Operation = op
	}
	if adding {
		name := ""
		if f.ResourceName != nil {
			name = *f.ResourceName
		}
		binding = security.ACL{ResourceType: f.ResourceType, ResourceName: name, PatternType: pt, Principal: a.principal, Host: a.host,
			Operation: f.Operation, Permission: f.Permission}
	}
	return binding, f, nil
}

func newACLCommand() *cobra.Command {
	var f topicFlags
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and delete ACL bindings (Kafka's ACLs; kafka-acls works too)",
		Args:  cobra.NoArgs,
	}
	f.register(cmd.PersistentFlags())
	var addF, listF, delF aclFlags
	add := &cobra.Command{
		Use:   "add",
		Short: "Add ACL bindings: one per --operation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addF.principal == "" || len(addF.operations) == 0 {
				return errors.New("--principal and --operation are needed")
			}
			req := kmsg.NewPtrCreateACLsRequest()
			for _, op := range addF.operations {
				one := addF
				one.operations = []string{op}
				binding, _, err := one.filter(true)
				if err != nil {
					return err
				}
				if err := binding.Validate(); err != nil {
					return err
				}
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = binding.ResourceType, binding.ResourceName, binding.PatternType
				c.Principal, c.Host, c.Operation, c.PermissionType = binding.Principal, binding.Host, binding.Operation, binding.Permission
				req.Creations = append(req.Creations, c)
			}
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			for _, r := range resp.Results {
				if r.ErrorCode != 0 {
					return kmsgError(r.ErrorCode, r.ErrorMessage)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %d ACL binding(s)\n", len(resp.Results))
			return nil
		},
	}
	addF.register(add.Flags(), true)
	list := &cobra.Command{
		Use:   "list",
		Short: "List ACL bindings (filters: resource, principal, host, operation)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, fl, err := listF.filter(false)
			if err != nil {
				return err
			}
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = fl.ResourceType, fl.ResourceName, fl.PatternType
			req.Principal, req.Host, req.Operation, req.PermissionType = fl.Principal, fl.Host, fl.Operation, fl.Permission
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if resp.ErrorCode != 0 {
				return kmsgError(resp.ErrorCode, resp.ErrorMessage)
			}
			var rows []security.ACL
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					rows = append(rows, security.ACL{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
						Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
				}
			}
			return f.output(cmd.OutOrStdout(), rows, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PRINCIPAL\tHOST\tPERMISSION\tOPERATION\tRESOURCE\tPATTERN\tNAME")
				for _, a := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Host, a.Permission, security.OperationName(a.Operation), a.ResourceType, a.PatternType, a.ResourceName)
				}
				tw.Flush()
			})
		},
	}
	listF.register(list.Flags(), false)
	del := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACL bindings a filter selects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, fl, err := delF.filter(false)
			if err != nil {
				return err
			}
			if fl.ResourceType == kmsg.ACLResourceTypeAny && fl.Principal == nil {
				return errors.New("name a resource or a --principal (deleting every binding needs both left out on purpose: use kafka-acls)")
			}
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := kmsg.NewPtrDeleteACLsRequest()
			df := kmsg.NewDeleteACLsRequestFilter()
			df.ResourceType, df.ResourceName, df.ResourcePatternType = fl.ResourceType, fl.ResourceName, fl.PatternType
			df.Principal, df.Host, df.Operation, df.PermissionType = fl.Principal, fl.Host, fl.Operation, fl.Permission
			req.Filters = append(req.Filters, df)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			n := 0
			for _, r := range resp.Results {
				if r.ErrorCode != 0 {
					return kmsgError(r.ErrorCode, r.ErrorMessage)
				}
				n += len(r.MatchingACLs)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %d ACL binding(s)\n", n)
			return nil
		},
	}
	delF.register(del.Flags(), false)
	cmd.AddCommand(add, list, del)
	return cmd
}

func kmsgError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if msg != nil && *msg != "" {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}
