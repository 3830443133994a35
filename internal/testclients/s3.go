package testclients

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 starts a real S3-compatible server (versitygw, which `scripts/s3server.sh install` builds
// and .ci/run installs) on a loopback port for the test, creates bucket "runnel" in it, sets
// the AWS credential environment variables the server takes, and returns the endpoint URL.
// Outside CI a machine without versitygw skips the test.
func S3(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	script := filepath.Join(RepoRoot(t), "scripts", "s3server.sh")
	tools := os.Getenv("RUNNEL_TOOLS_DIR")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "runnel-tools")
	}
	if m, _ := filepath.Glob(filepath.Join(tools, "bin", "versitygw-*")); len(m) == 0 {
		SkipOutsideCI(t, "versitygw is not installed: scripts/s3server.sh install (.ci/run does it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := filepath.Join(t.TempDir(), "s3")
	out, err := exec.Command("bash", script, "start", dir, fmt.Sprint(port)).Output()
	if err != nil {
		t.Fatalf("s3server.sh start: %v", err)
	}
	t.Cleanup(func() { exec.Command("bash", script, "stop", dir).Run() })
	endpoint := strings.TrimSpace(string(out))
	t.Setenv("AWS_ACCESS_KEY_ID", "runnel-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "runnel-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	admin := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("runnel-test", "runnel-test-secret", "")})
	if _, err := admin.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("runnel")}); err != nil {
		t.Fatal(err)
	}
	return endpoint
}
