// Command compactord is the compaction daemon and its operator tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/compactord/compactord/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
