// Package cli is the runnel command line: cobra commands that turn flags and environment
// variables into a configuration and hand it to the package that runs it.
//
// Every flag of a command can also be set by an environment variable named RUNNEL_ followed by
// the flag name in upper case with dashes as underscores (--data-dir: RUNNEL_DATA_DIR). A flag
// given on the command line wins over the environment, which wins over the default.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Main runs the runnel command with os.Args and returns the process exit code.
func Main(version string) int {
	root := NewRoot(version)
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(root.ErrOrStderr(), "runnel: %v\n", err)
		return 1
	}
	return 0
}

// NewRoot returns the root command; version is what `runnel version` prints.
func NewRoot(version string) *cobra.Command {
	root := &cobra.Command{
		Use:           "runnel",
		Short:         "Runnel is a Kafka-compatible streaming log",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command reads its unset flags from the environment before it runs.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			return applyConfigFile(cmd.Flags())
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetVersionTemplate("runnel {{.Version}}\n")
	root.AddCommand(newServeCommand(), newAgentCommand(), newTopicCommand(), newControllerCommand(), newGroupCommand(), newUserCommand(), newACLCommand(), newBenchCommand(), newChaosCommand(), newStatusCommand(), newVersionCommand(version))
	withEnvUsage(root)
	return root
}

func newVersionCommand(version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the runnel version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			printVersion(cmd.OutOrStdout(), version)
		},
	}
}

func printVersion(w io.Writer, version string) {
	fmt.Fprintf(w, "runnel %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// envName is the environment variable that sets the flag named flag.
func envName(flag string) string {
	return "RUNNEL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its environment variable, if set.
func applyEnv(flags *pflag.FlagSet) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Name == "version" {
			return
		}
		value, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := flags.Set(f.Name, value); serr != nil {
			err = fmt.Errorf("invalid %s=%q: %w", envName(f.Name), value, serr)
		}
	})
	return err
}

// withEnvUsage appends "(env RUNNEL_...)" to the usage of every flag of cmd and its subcommands,
// local and persistent, once each.
func withEnvUsage(cmd *cobra.Command) {
	done := map[*pflag.Flag]bool{}
	add := func(f *pflag.Flag) {
		if !done[f] && f.Name != "help" && f.Name != "version" {
			done[f] = true
			f.Usage += fmt.Sprintf(" (env %s)", envName(f.Name))
		}
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.PersistentFlags().VisitAll(add)
		c.Flags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}

// configFileAnnotation marks a --config flag that names a settings file.
const configFileAnnotation = "runnel-config-file"

// applyConfigFile sets every flag given neither on the command line nor in the environment from
// the file named by --config, if the command has that flag and it is set. The file holds one
// "flag-name: value" (or "flag-name = value") per line; blank lines and lines starting with #
// are ignored. So a flag wins over the environment, which wins over the file, which wins over
// the default.
func applyConfigFile(flags *pflag.FlagSet) error {
	cf := flags.Lookup("config")
	if cf == nil || cf.Value.String() == "" || cf.Annotations[configFileAnnotation] == nil {
		return nil // (topic create has its own --config k=v)
	}
	name := cf.Value.String()
	b, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if eq, v2, ok2 := strings.Cut(line, "="); ok2 && (!ok || len(eq) < len(key)) {
			key, value, ok = eq, v2, true
		}
		key, value = strings.TrimSpace(key), strings.Trim(strings.TrimSpace(value), `"'`)
		f := flags.Lookup(key)
		if !ok || f == nil || key == "config" || key == "help" {
			return fmt.Errorf("%s:%d: %q is not a setting of this command", name, i+1, line)
		}
		if f.Changed {
			continue
		}
		if err := flags.Set(key, value); err != nil {
			return fmt.Errorf("%s:%d: invalid %s %q: %w", name, i+1, key, value, err)
		}
	}
	return nil
}
