// Command checklayout fails when the module's package boundaries are
// broken (internal/testing/layout, make check). Run it from the module
// root.
package main

import (
	"fmt"
	"os"

	"github.com/compactord/compactord/internal/testing/layout"
)

func main() {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	module, pkgs, err := layout.Load(goCmd, ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "checklayout:", err)
		os.Exit(2)
	}
	bad, stale, err := layout.Check(module, pkgs, layout.Project)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checklayout:", err)
		os.Exit(2)
	}
	for _, a := range stale {
		fmt.Fprintf(os.Stderr, "checklayout: allowed violation no longer seen; remove it from layout.Project.Allow: %q\n", a)
	}
	for _, v := range bad {
		fmt.Fprintln(os.Stderr, v)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "checklayout: %d package boundary violations (internal/testing/layout)\n", len(bad))
		os.Exit(1)
	}
	fmt.Printf("checklayout: %d packages within their boundaries\n", len(pkgs))
}
