package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// s3Error builds the error chain the AWS SDK returns for an S3 operation that
// got an HTTP error response.
func s3Error(status int, code string) error {
	var apiErr error = &smithy.GenericAPIError{Code: code, Message: "fake " + code}
	if code == "" {
		apiErr = errors.New("http error without a code")
	}
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: "PutObject",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      apiErr,
			},
			RequestID: "req-1",
		},
	}
}

func TestClassify(t *testing.T) {
	// gocloud errors, from a real driver.
	mb := memblob.OpenBucket(nil)
	defer mb.Close()
	ctx := context.Background()
	_, gcNotFound := mb.ReadAll(ctx, "missing")
	if err := mb.WriteAll(ctx, "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	gcExists := mb.WriteAll(ctx, "k", nil, &blob.WriterOptions{IfNotExist: true})

	for _, c := range []struct {
		name string
		err  error
		want error // nil: left unclassified
	}{
		{"gocloud NotFound", gcNotFound, ErrNotFound},
		{"gocloud FailedPrecondition", gcExists, ErrAlreadyExists},
		{"s3 412 PreconditionFailed", s3Error(412, "PreconditionFailed"), ErrAlreadyExists},
		{"s3 412 without code", s3Error(412, ""), ErrAlreadyExists},
		{"s3 409 ConditionalRequestConflict", s3Error(409, "ConditionalRequestConflict"), ErrConflict},
		{"s3 409 without code", s3Error(409, ""), ErrConflict},
		{"s3 409 other code", s3Error(409, "OperationAborted"), nil},
		{"s3 404 NoSuchKey", s3Error(404, "NoSuchKey"), ErrNotFound},
		{"s3 500", s3Error(500, "InternalError"), nil},
		{"azure BlobAlreadyExists", &azcore.ResponseError{ErrorCode: "BlobAlreadyExists", StatusCode: 409}, ErrAlreadyExists},
		{"azure ConditionNotMet", &azcore.ResponseError{ErrorCode: "ConditionNotMet", StatusCode: 412}, ErrAlreadyExists},
		{"azure bare 409", &azcore.ResponseError{StatusCode: 409}, ErrAlreadyExists},
		{"azure 409 lease", &azcore.ResponseError{ErrorCode: "LeaseIdMissing", StatusCode: 409}, nil},
		{"azure BlobNotFound", &azcore.ResponseError{ErrorCode: "BlobNotFound", StatusCode: 404}, ErrNotFound},
		{"fs not exist", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, ErrNotFound},
		{"link EEXIST", &os.LinkError{Op: "link", Old: "a", New: "b", Err: fs.ErrExist}, ErrAlreadyExists},
		{"canceled", fmt.Errorf("put: %w", context.Canceled), nil},
		{"plain", errors.New("boom"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			if !errors.Is(got, c.err) {
				t.Errorf("classify dropped the original error: %v", got)
			}
			for _, class := range []error{ErrNotFound, ErrAlreadyExists, ErrConflict} {
				if is := errors.Is(got, class); is != (class == c.want) {
					t.Errorf("errors.Is(classify(err), %v) = %v", class, is)
				}
			}
			if c.want == nil && got != c.err {
				t.Errorf("unclassified error was changed: %v", got)
			}
			// SDK types stay reachable.
			var apiErr smithy.APIError
			if errors.As(c.err, &apiErr) && !errors.As(got, &apiErr) {
				t.Error("smithy.APIError no longer reachable")
			}
			// Classifying twice changes nothing.
			if again := classify(got); again != got {
				t.Errorf("classify is not idempotent: %v", again)
			}
		})
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
}
