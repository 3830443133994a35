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
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd.Flags()) },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetVersionTemplate("runnel {{.Version}}\n")
	root.AddCommand(newServeCommand(), newTopicCommand(), newVersionCommand(version))
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

// withEnvUsage appends "(env RUNNEL_...)" to the usage of every flag in flags.
func withEnvUsage(flags *pflag.FlagSet) {
	flags.VisitAll(func(f *pflag.Flag) {
		f.Usage += fmt.Sprintf(" (env %s)", envName(f.Name))
	})
}
