// Package testclients finds the real Kafka clients the tests drive (installed or built by
// .ci/run): test code only.
package testclients

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot is the directory of the repository's go.mod, found upwards from the working
// directory (a test's is its package's).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// SkipOutsideCI skips the test, or fails it under CI (CI set), where every client must run.
func SkipOutsideCI(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Java returns the command line prefix that runs test/clients/java's JavaClient (the Apache
// Kafka Java client 4.1.1), which .ci/run builds with Maven (target/classes and target/lib).
func Java(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "test", "clients", "java", "target")
	if _, err := os.Stat(filepath.Join(dir, "classes", "dev", "runnel", "JavaClient.class")); err != nil {
		SkipOutsideCI(t, "the Java test client is not built (mvn -q -B -f test/clients/java/pom.xml package; .ci/run does it)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		SkipOutsideCI(t, "no java on PATH")
	}
	cp := filepath.Join(dir, "classes") + string(os.PathListSeparator) + filepath.Join(dir, "lib", "*")
	return []string{java, "-cp", cp, "dev.runnel.JavaClient"}
}
