package scheduler

import (
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/compactord/compactord/internal/meta"
)

// An object-store outage retries; it never quarantines (found by the e2e
// request-count runs: a refused connection halted every table).
func TestClassifyObjectStoreOutageRetries(t *testing.T) {
	refused := fmt.Errorf("list _versions/: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	if c, _ := Classify(refused, nil); c != ClassRetry {
		t.Fatalf("refused connection classified %v, want retry", c)
	}
	if c, r := Classify(fmt.Errorf("x: %w", meta.ErrCorrupt), nil); c != ClassError || r != ReasonCorrupt {
		t.Fatalf("corrupt classified %v %q", c, r)
	}
}
