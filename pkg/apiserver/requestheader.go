// File requestheader.go: the readiness check that flock-apiserver knows the
// front-proxy (requestheader) client CA before it takes traffic.

package apiserver

import (
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
)

// requestHeaderCAReadyz fails until ca, the CA that signs the client
// certificate of kube-apiserver's aggregator (read from
// kube-system/extension-apiserver-authentication), has content.
//
// k8s.io/apiserver loads that CA from an informer started after the server
// listens, and until then offers no front-proxy CA in its TLS handshake. A
// Go TLS client sends its certificate only when the handshake names the
// certificate's CA, so a connection the aggregator opened in that window
// would carry every request as system:anonymous for as long as it is kept
// alive. Failing /readyz keeps the aggregator's traffic away (the Service
// lists only Ready pods) until the CA is there.
func requestHeaderCAReadyz(ca dynamiccertificates.CAContentProvider) healthz.HealthChecker {
	return healthz.NamedCheck("requestheader-client-ca", func(*http.Request) error {
		if len(ca.CurrentCABundleContent()) == 0 {
			return fmt.Errorf("the front-proxy client CA (%s) is not loaded yet: requests through kube-apiserver's aggregator would be anonymous", ca.Name())
		}
		return nil
	})
}
