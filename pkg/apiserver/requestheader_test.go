package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// emptyCA is a CA provider that has loaded nothing yet.
type emptyCA struct {
	dynamiccertificates.CAContentProvider
}

func (emptyCA) Name() string {
	return "client-ca::kube-system::extension-apiserver-authentication::requestheader-client-ca-file"
}
func (emptyCA) CurrentCABundleContent() []byte { return nil }

func TestRequestHeaderCAReadyz(t *testing.T) {
	err := requestHeaderCAReadyz(emptyCA{}).Check(nil)
	if err == nil || !strings.Contains(err.Error(), "requestheader-client-ca-file") || !strings.Contains(err.Error(), "anonymous") {
		t.Errorf("empty CA: got %v, want an error naming the CA and why it matters", err)
	}
	ca, err := dynamiccertificates.NewStaticCAContent("front-proxy", selfSignedCA(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := requestHeaderCAReadyz(ca).Check(nil); err != nil {
		t.Errorf("loaded CA: got %v, want ready", err)
	}
	if name := requestHeaderCAReadyz(ca).Name(); name != "requestheader-client-ca" {
		t.Errorf("check name %q", name)
	}
}

// selfSignedCA returns a new self-signed CA certificate, PEM-encoded.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
