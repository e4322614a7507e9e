// Command gobuild builds a main package of this module for this machine the way the
// release builds it (internal/gobuild), for scripts such as the bats suites:
//
//	go run ./hack/gobuild -o bin/kubectl-nodegroup ./cmd/kubectl-nodegroup
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
)

func main() {
	out := flag.String("o", "", "the binary to write")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gobuild -o <binary> <main package>")
		os.Exit(2)
	}
	if err := gobuild.Build(context.Background(), ".", flag.Arg(0), gobuild.Host(), "", *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
