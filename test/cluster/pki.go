package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// FlockServiceDNSName is the DNS name the aggregator verifies flock-apiserver's
// serving certificate against: <service>.<namespace>.svc of the APIService's
// Service.
const FlockServiceDNSName = "flock-apiserver.flock-system.svc"

// FrontProxyClientName is the common name of the client certificate
// kube-apiserver presents to aggregated API servers; it is the only name in
// --requestheader-allowed-names.
const FrontProxyClientName = "front-proxy-client"

// CA is a certificate authority: its certificate, key, and where both are
// stored on disk (PEM).
type CA struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	CertFile string
	KeyFile  string
}

// CertPEM returns the CA certificate in PEM form, e.g. for an APIService
// caBundle.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// KeyPair is a leaf certificate and its key, stored on disk (PEM).
type KeyPair struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
	CertPEM  []byte
	KeyPEM   []byte
}

// TLSCertificate returns the pair for use in a tls.Config.
func (kp *KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
}

// PKI is every certificate and key a local control plane needs.
type PKI struct {
	// ClusterCA signs the serving certificates and the client certificates
	// kube-apiserver accepts (--client-ca-file).
	ClusterCA *CA
	// FrontProxyCA signs only the aggregator's proxy client certificate
	// (--requestheader-client-ca-file); it is deliberately a different CA.
	FrontProxyCA *CA
	// KubeAPIServer is kube-apiserver's serving certificate.
	KubeAPIServer *KeyPair
	// Admin is a client certificate for user "admin" in group system:masters.
	Admin *KeyPair
	// KubeletClient is kube-apiserver's client certificate for kubelets
	// (logs, exec): user kube-apiserver-kubelet-client in system:masters.
	KubeletClient *KeyPair
	// FrontProxyClient is the aggregator's client certificate (CN front-proxy-client).
	FrontProxyClient *KeyPair
	// FlockAPIServer is flock-apiserver's serving certificate, valid for
	// flock-apiserver.flock-system.svc, localhost and 127.0.0.1.
	FlockAPIServer *KeyPair
	// ControllerManager and Scheduler are the serving certificates of
	// kube-controller-manager and kube-scheduler (localhost, 127.0.0.1).
	ControllerManager *KeyPair
	Scheduler         *KeyPair
	// ServiceAccountKeyFile and ServiceAccountPubFile hold the key that signs
	// service-account tokens and its public half.
	ServiceAccountKeyFile string
	ServiceAccountPubFile string
}

// certSpec describes a leaf certificate.
type certSpec struct {
	name     string // file base name
	cn       string
	orgs     []string
	dnsNames []string
	ips      []net.IP
	client   bool
	server   bool
}

var loopbackIPs = []net.IP{net.ParseIP("127.0.0.1")}

// NewPKI generates a fresh PKI into dir. Certificates are ECDSA P-256 and
// valid for a year; the service-account key is RSA 2048.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	clusterCA, err := NewCA(dir, "ca", "flock-local-cluster-ca")
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := NewCA(dir, "front-proxy-ca", "flock-local-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	p := &PKI{ClusterCA: clusterCA, FrontProxyCA: frontProxyCA}
	leaves := []struct {
		ca   *CA
		spec certSpec
		dst  **KeyPair
	}{
		{clusterCA, certSpec{name: "kube-apiserver", cn: "kube-apiserver", server: true,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}}, &p.KubeAPIServer},
		{clusterCA, certSpec{name: "admin", cn: "admin", orgs: []string{"system:masters"}, client: true}, &p.Admin},
		{clusterCA, certSpec{name: "kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}, &p.KubeletClient},
		{frontProxyCA, certSpec{name: "front-proxy-client", cn: FrontProxyClientName, client: true}, &p.FrontProxyClient},
		{clusterCA, certSpec{name: "flock-apiserver", cn: "flock-apiserver", server: true,
			dnsNames: []string{FlockServiceDNSName, "localhost"}, ips: loopbackIPs}, &p.FlockAPIServer},
		{clusterCA, certSpec{name: "kube-controller-manager", cn: "kube-controller-manager", server: true,
			dnsNames: []string{"localhost"}, ips: loopbackIPs}, &p.ControllerManager},
		{clusterCA, certSpec{name: "kube-scheduler", cn: "kube-scheduler", server: true,
			dnsNames: []string{"localhost"}, ips: loopbackIPs}, &p.Scheduler},
	}
	for _, l := range leaves {
		kp, err := l.ca.issue(dir, l.spec)
		if err != nil {
			return nil, fmt.Errorf("certificate %s: %w", l.spec.name, err)
		}
		*l.dst = kp
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountKeyFile = filepath.Join(dir, "sa.key")
	p.ServiceAccountPubFile = filepath.Join(dir, "sa.pub")
	keyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.ServiceAccountKeyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, err
	}
	if err := writePEM(p.ServiceAccountPubFile, "PUBLIC KEY", pubDER, 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// NewCA creates a self-signed CA and writes <name>.crt and <name>.key into dir.
func NewCA(dir, name, cn string) (*CA, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"flock.dev local"}},
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	kp, key, err := signAndWrite(dir, name, tmpl, nil, nil)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: kp.Cert, Key: key, CertFile: kp.CertFile, KeyFile: kp.KeyFile}, nil
}

// IssueClient issues a client certificate for user cn in groups orgs and
// writes it into dir as <name>.crt/.key. Tests use it to make identities
// (e.g. a front-proxy certificate with a name that is not allowed).
func (ca *CA) IssueClient(dir, name, cn string, orgs ...string) (*KeyPair, error) {
	return ca.issue(dir, certSpec{name: name, cn: cn, orgs: orgs, client: true})
}

// IssueServerClient issues a certificate that serves under dnsNames and ips
// and also authenticates as a client (an etcd member's: its peers call it
// and it calls them), written into dir as <name>.crt/.key.
func (ca *CA) IssueServerClient(dir, name, cn string, dnsNames []string, ips []net.IP) (*KeyPair, error) {
	return ca.issue(dir, certSpec{name: name, cn: cn, dnsNames: dnsNames, ips: ips, server: true, client: true})
}

// issue signs a leaf certificate described by spec and writes it into dir.
func (ca *CA) issue(dir string, spec certSpec) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotAfter:    time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		DNSNames:    spec.dnsNames,
		IPAddresses: spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	kp, _, err := signAndWrite(dir, spec.name, tmpl, ca.Cert, ca.Key)
	return kp, err
}

// signAndWrite makes a fresh P-256 key, signs tmpl with parent and
// parentKey (self-signed when parent is nil), valid from an hour ago, and
// writes <name>.crt and <name>.key (0600) into dir.
func signAndWrite(dir, name string, tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*KeyPair, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	kp := &KeyPair{
		Cert:     cert,
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	if err := os.WriteFile(kp.CertFile, kp.CertPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(kp.KeyFile, kp.KeyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return kp, key, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// NewLoopbackEtcdTLS makes, in dir, a CA and a certificate it signs that
// serves as localhost and 127.0.0.1 and authenticates as a client: what an
// etcd member on loopback asking for client certificates and its clients
// use in a test.
func NewLoopbackEtcdTLS(dir string) (*CA, *KeyPair, error) {
	ca, err := NewCA(dir, "etcd-ca", "etcd-ca")
	if err != nil {
		return nil, nil, err
	}
	kp, err := ca.IssueServerClient(dir, "etcd", "etcd", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, nil, err
	}
	return ca, kp, nil
}
