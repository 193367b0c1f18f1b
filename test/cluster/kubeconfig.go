package cluster

import (
	"crypto/tls"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// kubeconfigUser is the credential part of a kubeconfig: a client
// certificate or a bearer token.
type kubeconfigUser struct {
	name     string
	certPEM  []byte
	keyPEM   []byte
	token    string
	contextN string
}

// writeKubeconfig writes a one-context kubeconfig for server, trusting caPEM.
func writeKubeconfig(path, server string, caPEM []byte, u kubeconfigUser) error {
	user := map[string]any{}
	if u.token != "" {
		user["token"] = u.token
	} else {
		user["client-certificate-data"] = u.certPEM
		user["client-key-data"] = u.keyPEM
	}
	ctxName := u.contextN
	if ctxName == "" {
		ctxName = "flock-local"
	}
	cfg := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{
			"name":    "flock-local",
			"cluster": map[string]any{"server": server, "certificate-authority-data": caPEM},
		}},
		"users":           []any{map[string]any{"name": u.name, "user": user}},
		"contexts":        []any{map[string]any{"name": ctxName, "context": map[string]any{"cluster": "flock-local", "user": u.name}}},
		"current-context": ctxName,
	}
	// []byte fields marshal as base64, which is what the *-data keys hold.
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// adminRESTConfig is a system:masters config for host.
func (c *Cluster) adminRESTConfig(host string) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.PKI.ClusterCA.CertPEM(),
			CertData: c.PKI.Admin.CertPEM,
			KeyData:  c.PKI.Admin.KeyPEM,
		},
		QPS:     100,
		Burst:   200,
		Timeout: 30 * time.Second,
	}
}

// ImpersonatingConfig is the admin config through kube-apiserver acting as
// user in groups (like `kubectl --as user --as-group g`).
func (c *Cluster) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// HTTPClient returns an HTTPS client that trusts the cluster CA and presents
// the given client certificate (none if nil). Use it to talk to
// flock-apiserver directly, e.g. with PKI.FrontProxyCA.IssueClient identities.
func (c *Cluster) HTTPClient(clientCert *KeyPair) (*http.Client, error) {
	tc := &tls.Config{RootCAs: c.PKI.ClusterCA.Pool(), MinVersion: tls.VersionTLS12}
	if clientCert != nil {
		pair, err := clientCert.TLSCertificate()
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}
