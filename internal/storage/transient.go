package storage

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// IsTransient reports whether err is an object-store failure that may go
// away by itself: a network error (refused, reset, timeout), a 5xx or
// throttling answer, a truncated response, or a conditional-write conflict.
// File-system errors (a missing or unreadable file, a full disk) are not
// transient: they need an operator, and the table halts after
// retry.quarantine_after attempts.
// Callers retry these with backoff; a short outage must not be treated like
// bad data (a table quarantined after a blip needs an operator to resume).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	// Classify network failures by what they are, not by the shape of
	// net.Error: syscall.Errno has Timeout and Temporary methods too, so
	// ENOENT or EACCES from the file backend would pass for a network blip
	// and be retried forever.
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &opErr):
		return true
	case errors.As(err, &dnsErr):
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
		return true
	}
	var aws *awshttp.ResponseError
	if errors.As(err, &aws) && (aws.HTTPStatusCode() >= 500 || aws.HTTPStatusCode() == 429) {
		return true
	}
	var g *googleapi.Error
	if errors.As(err, &g) && (g.Code >= 500 || g.Code == 429 || g.Code == 408) {
		return true
	}
	var az *azcore.ResponseError
	if errors.As(err, &az) && (az.StatusCode >= 500 || az.StatusCode == 429) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded, gcerrors.Internal:
		return true
	}
	return false
}
