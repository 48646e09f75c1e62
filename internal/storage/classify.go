package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// ErrConflict marks a conditional write that the store refused because another
// conditional write to the same key was in flight (S3 answers 409
// ConditionalRequestConflict). The write did not land; retrying it is safe.
// PutIfAbsent already retries a few times before returning it.
var ErrConflict = errors.New("conditional write conflict (retryable)")

// IsConflict reports whether err is a transient conditional-write conflict
// after which the write may simply be retried.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// classify maps a backend error onto the package's sentinel classes. It is the
// only place that knows backend error shapes, so that every backend reports a
// lost race and a missing key the same way. The original error stays in the
// chain (errors.As still finds SDK types); errors it does not recognise are
// returned unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
		return err
	}
	if class := errorClass(err); class != nil {
		return fmt.Errorf("%w: %w", class, err)
	}
	return err
}

func errorClass(err error) error {
	// Context errors are the caller's doing, never a statement about the key.
	// gcerrors.Code would not misreport them, but SDK errors that wrap a
	// canceled request can carry HTTP codes of a half-read response.
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotFound
	case gcerrors.FailedPrecondition:
		// gocloud reports a failed IfNotExist this way on every driver
		// (S3 412, GCS 412, Azure ConditionNotMet/BlobAlreadyExists, memblob).
		return ErrAlreadyExists
	case gcerrors.Canceled, gcerrors.DeadlineExceeded:
		return nil
	}

	// Raw SDK errors: these reach us when a caller hands classify an error
	// that did not pass through gocloud, and for codes gocloud lumps into
	// Unknown (S3's 409 ConditionalRequestConflict).
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return ErrNotFound
		case "PreconditionFailed":
			return ErrAlreadyExists
		case "ConditionalRequestConflict":
			return ErrConflict
		}
	}
	var awsResp *awshttp.ResponseError
	if errors.As(err, &awsResp) {
		switch awsResp.HTTPStatusCode() {
		case http.StatusNotFound:
			return ErrNotFound
		case http.StatusPreconditionFailed:
			return ErrAlreadyExists
		case http.StatusConflict:
			// Only conditional writes get a bare 409 from S3 on an object
			// key; the request did not land.
			if apiErr == nil || apiErr.ErrorCode() == "" {
				return ErrConflict
			}
		}
	}
	var gErr *googleapi.Error
	if errors.As(err, &gErr) {
		switch gErr.Code {
		case http.StatusNotFound:
			return ErrNotFound
		case http.StatusPreconditionFailed:
			return ErrAlreadyExists
		}
	}
	var azErr *azcore.ResponseError
	if errors.As(err, &azErr) {
		switch azErr.ErrorCode {
		case "BlobNotFound", "ContainerNotFound":
			return ErrNotFound
		case "BlobAlreadyExists", "ConditionNotMet":
			return ErrAlreadyExists
		}
		switch azErr.StatusCode {
		case http.StatusNotFound:
			return ErrNotFound
		case http.StatusConflict, http.StatusPreconditionFailed:
			// Azure answers a create with If-None-Match: * on an existing
			// blob with 409 (BlobAlreadyExists) or 412 (ConditionNotMet);
			// a response that lost its error code is still that answer.
			if azErr.ErrorCode == "" {
				return ErrAlreadyExists
			}
		}
	}

	// The file backend.
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, fs.ErrExist):
		return ErrAlreadyExists
	}
	return nil
}
