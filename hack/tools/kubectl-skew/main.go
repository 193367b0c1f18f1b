// Command kubectl is kubectl v1.32, built from the Go module proxy for the
// version-skew checks of the e2e suite on machines that have no system
// kubectl (hack/build-tools.sh builds it when FLOCK_SKEW_KUBECTL=1).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
