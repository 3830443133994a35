package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3 is a store in an S3-compatible bucket, under a key prefix, through the AWS SDK for Go v2.
// PutIfAbsent is S3's conditional write (If-None-Match: *). Credentials come from the standard
// AWS environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the
// region from the URL or AWS_REGION / AWS_DEFAULT_REGION (default us-east-1). Nothing else is
// consulted: no instance metadata service, no shared files. Retries are the SDK's: three
// attempts with backoff for throttling and 5xx answers.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	desc   string
}

// openS3 opens s3://bucket/prefix?endpoint=URL&region=R (path-style addressing when an endpoint
// is given, as S3-compatible servers expect).
func openS3(u *url.URL) (*S3, error) {
	bucket := u.Host
	if bucket == "" {
		return nil, fmt.Errorf("objstore: %q: no bucket (s3://bucket/prefix)", u.String())
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("objstore: %q: bad prefix: %w", u.String(), err)
		}
		prefix += "/"
	}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" {
			return nil, fmt.Errorf("objstore: %q: unknown parameter %q (endpoint, region)", u.String(), k)
		}
	}
	region := q.Get("region")
	for _, env := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if region == "" {
			region = os.Getenv(env)
		}
	}
	if region == "" {
		region = "us-east-1"
	}
	key, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if key == "" || secret == "" {
		return nil, fmt.Errorf("objstore: %q: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", u.String())
	}
	endpoint := q.Get("endpoint")
	opts := s3.Options{Region: region, Credentials: credentials.NewStaticCredentialsProvider(key, secret, os.Getenv("AWS_SESSION_TOKEN"))}
	if endpoint != "" {
		if eu, err := url.Parse(endpoint); err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, fmt.Errorf("objstore: %q: endpoint must be an http(s) URL", u.String())
		}
		opts.BaseEndpoint, opts.UsePathStyle = aws.String(endpoint), true
	}
	client := s3.New(opts)
	desc := "s3://" + bucket + "/" + prefix
	if endpoint != "" {
		desc += " at " + endpoint
	}
	return &S3{client: client, bucket: bucket, prefix: prefix, desc: desc}, nil
}

func (s *S3) String() string { return s.desc }

// Put writes an object.
func (s *S3) Put(ctx context.Context, key string, body []byte) error {
	return s.put(ctx, key, body, false)
}

// PutIfAbsent writes an object if the key has none (If-None-Match: *). When the SDK retried
// the write and the retry found the key taken, an object holding body is taken for this call's
// own earlier attempt, whose reply was lost: nil, not ErrExists (so two callers writing the same
// bytes at once may both succeed).
func (s *S3) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	return s.put(ctx, key, body, true)
}

func (s *S3) put(ctx context.Context, key string, body []byte, ifAbsent bool) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body)))}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	attempts := 0
	if _, err := s.client.PutObject(ctx, in, countAttempts(&attempts)); err != nil {
		if ifAbsent && (httpStatus(err) == http.StatusPreconditionFailed || apiCode(err) == "PreconditionFailed") {
			if attempts > 1 {
				// The SDK retried: the object may be this call's own earlier attempt, whose
				// reply was lost. Holding body, it is taken for that one.
				got, gerr := s.get(ctx, key, nil)
				if gerr != nil {
					return gerr
				}
				if bytes.Equal(got, body) {
					return nil
				}
			}
			return fmt.Errorf("%w: %s", ErrExists, key)
		}
		return s.wrap("put", key, err)
	}
	return nil
}

// countAttempts has a call count its HTTP attempts in n (the SDK's retries are within a call).
func countAttempts(n *int) func(*s3.Options) {
	return s3.WithAPIOptions(func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("runnelCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				*n++
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// Get reads a whole object.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	return s.get(ctx, key, nil)
}

// GetRange reads n bytes from off (fewer at the end).
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%w: bytes %d+%d", ErrRange, off, n)
	}
	if n == 0 {
		// An empty range has no HTTP form: check that off is inside the object.
		if _, err := s.get(ctx, key, aws.String(fmt.Sprintf("bytes=%d-%d", off, off))); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	return s.get(ctx, key, aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)))
}

func (s *S3) get(ctx context.Context, key string, rng *string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), Range: rng})
	if err != nil {
		if rng != nil && (httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || apiCode(err) == "InvalidRange") {
			return nil, fmt.Errorf("%w: %s %s", ErrRange, key, *rng)
		}
		return nil, s.wrap("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return b, nil
}

// Delete removes an object (S3 answers success for a missing one).
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)}); err != nil {
		if notFound(err) {
			return nil
		}
		return s.wrap("delete", key, err)
	}
	return nil
}

// List returns objects under prefix after startAfter, in key order (ListObjectsV2, page by page).
func (s *S3) List(ctx context.Context, prefix, startAfter string, limit int) ([]Object, error) {
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	if limit > 0 && limit < 1000 { // S3's page is at most 1,000 keys
		in.MaxKeys = aws.Int32(int32(limit))
	}
	var out []Object
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() && (limit <= 0 || len(out) < limit) {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			if o.Key == nil || (limit > 0 && len(out) >= limit) {
				continue
			}
			out = append(out, Object{Key: strings.TrimPrefix(*o.Key, s.prefix), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// wrap names the operation and maps S3's answers to the package's errors.
func (s *S3) wrap(op, key string, err error) error {
	switch {
	case notFound(err):
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	case httpStatus(err) == http.StatusServiceUnavailable || apiCode(err) == "SlowDown" || httpStatus(err) >= 500:
		return fmt.Errorf("%w: %s %q: %v", ErrUnavailable, op, key, err)
	}
	return fmt.Errorf("objstore: %s %q: %w", op, key, err)
}

// notFound reports whether err is S3's answer for a missing object: a 404, but not one for a
// missing bucket (NoSuchBucket), which is a failure of the store, not an absent object.
func notFound(err error) bool {
	code := apiCode(err)
	return code == "NoSuchKey" || httpStatus(err) == http.StatusNotFound && code != "NoSuchBucket"
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
