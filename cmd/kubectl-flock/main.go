// Command kubectl-flock is the `kubectl flock` plugin: put it on PATH
// (`go install flock.dev/flock/cmd/kubectl-flock`) and run `kubectl flock`.
// The commands live in pkg/cmd/kubectlflock.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"flock.dev/flock/pkg/cmd/kubectlflock"
)

func main() {
	os.Exit(kubectlflock.Execute(kubectlflock.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})))
}
