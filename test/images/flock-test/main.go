// Command flock-test is the one program in the offline test images of the
// real nodes (test/cluster packs it with internal/ociimage; no registry is
// reachable). It is static, and its first argument picks what it does:
//
//	pause                 the pod sandbox: wait for SIGTERM, reaping children
//	sleep [SECONDS]       a container that idles (forever without SECONDS) and exits on SIGTERM
//	write FILE TEXT       write TEXT to FILE (created 0644, synced)
//	read FILE             print FILE
//	id                    print "uid=U gid=G"
//	dns a NAME            print NAME's IPv4 addresses, one a line, sorted
//	dns srv NAME          print NAME's SRV records as "target port", sorted
//	dns ptr IP            print IP's names, sorted
//	                      (asking the nameserver of /etc/resolv.conf)
//	sh -c SCRIPT          the subset of sh the Flock cleanup helper uses:
//	                      commands separated by ';' or '&&', words split on
//	                      blanks, globs expanded; commands rm (always -rf),
//	                      mkdir (always -p), chmod OCTAL, chown UID:GID, true
//
// Called as "sh" (the image links /bin/sh to it) it is the sh applet.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

func main() {
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "sh" {
		args = append([]string{"sh"}, args...)
	}
	if len(args) == 0 {
		fail(2, "usage: flock-test pause|sleep|write|read|id|dns|sh ...")
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "pause":
		pause(0)
	case "sleep":
		var d time.Duration
		if len(rest) > 0 {
			s, perr := strconv.Atoi(rest[0])
			if perr != nil || s < 0 {
				fail(2, "sleep: want seconds, got %q", rest[0])
			}
			d = time.Duration(s) * time.Second
		}
		fmt.Println("flock-test: sleeping")
		pause(d)
	case "write":
		if len(rest) != 2 {
			fail(2, "usage: write FILE TEXT")
		}
		err = write(rest[0], rest[1])
	case "read":
		if len(rest) != 1 {
			fail(2, "usage: read FILE")
		}
		var data []byte
		if data, err = os.ReadFile(rest[0]); err == nil {
			_, err = os.Stdout.Write(data)
		}
	case "id":
		fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid())
	case "dns":
		if len(rest) != 2 {
			fail(2, "usage: dns a|srv|ptr ARG")
		}
		err = lookup(rest[0], rest[1])
	case "sh":
		if len(rest) != 2 || rest[0] != "-c" {
			fail(2, "sh: only `sh -c SCRIPT` is supported")
		}
		err = shell(rest[1])
	default:
		fail(2, "unknown command %q", cmd)
	}
	if err != nil {
		fail(1, "%s: %v", args[0], err)
	}
}

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "flock-test: "+format+"\n", a...)
	os.Exit(code)
}

// pause waits for SIGTERM or SIGINT (or d, when positive) and reaps any
// child reparented to it, as the first process of a pod must.
func pause(d time.Duration) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	var timeout <-chan time.Time
	if d > 0 {
		timeout = time.After(d)
	}
	for {
		select {
		case <-timeout:
			return
		case s := <-sigs:
			if s != syscall.SIGCHLD {
				return
			}
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

func write(file, text string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lookup asks the first nameserver of the pod's /etc/resolv.conf directly
// (not /etc/hosts, which kubelet fills with the pod's own name), so the
// answers are the cluster DNS's. NAME must be fully qualified.
func lookup(kind, arg string) error {
	conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		return err
	}
	if len(conf.Servers) == 0 {
		return errors.New("no nameserver in /etc/resolv.conf")
	}
	server := net.JoinHostPort(conf.Servers[0], conf.Port)
	var qname string
	var qtype uint16
	switch kind {
	case "a":
		qname, qtype = dns.Fqdn(arg), dns.TypeA
	case "srv":
		qname, qtype = dns.Fqdn(arg), dns.TypeSRV
	case "ptr":
		if qname, err = dns.ReverseAddr(arg); err != nil {
			return err
		}
		qtype = dns.TypePTR
	default:
		return fmt.Errorf("unknown record kind %q (want a, srv or ptr)", kind)
	}
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	c := &dns.Client{Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, server)
	}
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("%s %s: %s", dns.TypeToString[qtype], qname, dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.SRV:
			out = append(out, fmt.Sprintf("%s %d", v.Target, v.Port))
		case *dns.PTR:
			out = append(out, v.Ptr)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("%s %s: no records", dns.TypeToString[qtype], qname)
	}
	slices.Sort(out)
	for _, o := range out {
		fmt.Println(o)
	}
	return nil
}

// shell runs the small subset of sh described in the package comment.
func shell(script string) error {
	for _, part := range strings.FieldsFunc(strings.ReplaceAll(script, "&&", ";"), func(r rune) bool { return r == ';' || r == '\n' }) {
		words, err := expand(strings.Fields(part))
		if err != nil {
			return err
		}
		if len(words) == 0 {
			continue
		}
		if err := run(words[0], words[1:]); err != nil {
			return err
		}
	}
	return nil
}

// expand replaces each word holding a glob character by its matches (none:
// the word is dropped, as `rm -f` would ignore it); quotes are not supported.
func expand(words []string) ([]string, error) {
	var out []string
	for _, w := range words {
		if strings.ContainsAny(w, `'"$`+"`") {
			return nil, fmt.Errorf("sh: quoting and expansions are not supported: %q", w)
		}
		if !strings.ContainsAny(w, "*?[") {
			out = append(out, w)
			continue
		}
		m, err := filepath.Glob(w)
		if err != nil {
			return nil, fmt.Errorf("sh: %q: %w", w, err)
		}
		for _, p := range m {
			if b := filepath.Base(p); b != "." && b != ".." {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func run(cmd string, args []string) error {
	var flags, operands []string
	for i, a := range args {
		if a == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			continue
		}
		operands = append(operands, a)
	}
	switch cmd {
	case "true":
		return nil
	case "rm":
		var errs []error
		for _, p := range operands {
			errs = append(errs, os.RemoveAll(p))
		}
		return errors.Join(errs...)
	case "mkdir":
		for _, p := range operands {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		}
		return nil
	case "chmod":
		if len(operands) < 2 {
			return errors.New("chmod: want MODE FILE...")
		}
		mode, err := strconv.ParseUint(operands[0], 8, 32)
		if err != nil {
			return fmt.Errorf("chmod: only octal modes are supported: %q", operands[0])
		}
		for _, p := range operands[1:] {
			if err := os.Chmod(p, os.FileMode(mode&0o777)|modeBits(mode)); err != nil {
				return err
			}
		}
		return nil
	case "chown":
		if len(operands) < 2 {
			return errors.New("chown: want UID:GID FILE...")
		}
		u, g, ok := strings.Cut(operands[0], ":")
		uid, errU := strconv.Atoi(u)
		gid, errG := strconv.Atoi(g)
		if !ok || errU != nil || errG != nil {
			return fmt.Errorf("chown: only numeric UID:GID is supported: %q", operands[0])
		}
		for _, p := range operands[1:] {
			if err := os.Chown(p, uid, gid); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("sh: command %q is not supported (flags %v)", cmd, flags)
}

// modeBits turns the setuid, setgid and sticky bits of an octal mode into
// Go's file mode bits.
func modeBits(mode uint64) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}
