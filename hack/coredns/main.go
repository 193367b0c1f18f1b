// Command coredns is CoreDNS with only the plugins the local control plane's
// Corefile uses (bind, errors, log, kubernetes). The stock build compiles
// about fifty plugins, several with large cloud SDKs; this one builds in a
// fraction of the time, which keeps a cold CI run short.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	// The order in which plugins handle a query, as in CoreDNS's plugin.cfg.
	dnsserver.Directives = []string{"bind", "errors", "log", "kubernetes"}
}

func main() { coremain.Run() }
