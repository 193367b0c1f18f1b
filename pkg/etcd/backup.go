// File backup.go: the Flocks of an etcd written to a file and put back as
// they were stored. A Flock's members' data is keyed by the Flock's UID (its
// PersistentVolumes flock-<uid>-<i>, its directories <flock>-<uid8>), and
// a Flock made again from its YAML gets a new UID, so new, empty data: a
// backup of the API's objects cannot bring a Flock back with its data. The
// stored objects can: they keep the UID, and a Flock put back finds its
// retained volumes.

package etcd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BackupFormat names the file format of Backup (JSON lines: a header, one
// line per key, an end line with the count).
const BackupFormat = "flock.dev/etcd-backup/v1"

// backupPage is how many keys one read of Backup returns (a test makes it
// smaller).
var backupPage int64 = 500

// maxBackupLine bounds a line of a backup when it is read back: a stored
// object is at most etcd's request size (1.5 MiB by default), as base64.
const maxBackupLine = 4 << 20

// BackupHeader is the first line of a backup.
type BackupHeader struct {
	Format string `json:"format"`
	// Prefix is the etcd prefix the keys were read under.
	Prefix string `json:"prefix"`
	// Namespace, when set, is the only namespace whose objects were kept.
	Namespace string `json:"namespace,omitempty"`
	// Revision is the etcd revision every key was read at.
	Revision int64     `json:"revision"`
	Time     time.Time `json:"time"`
}

// backupEntry is a key of a backup and its stored value (base64 in JSON).
type backupEntry struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// backupEnd is the last line of a backup: a file without it was cut short.
type backupEnd struct {
	End  bool `json:"end"`
	Keys int  `json:"keys"`
}

// inNamespace reports whether key, under prefix, is an object of namespace
// ns (<prefix>/<group>/<resource>/<ns>/<name>); every key when ns is empty.
func inNamespace(prefix, key, ns string) bool {
	if ns == "" {
		return true
	}
	parts := strings.Split(strings.TrimPrefix(key, prefix+"/"), "/")
	return len(parts) >= 2 && parts[len(parts)-2] == ns
}

// Backup writes to w every key under prefix (of namespace, when set; the
// store's mark excepted), all read at one revision, as a header line, one
// line per key and an end line, and returns the header and the number of
// keys written.
func Backup(ctx context.Context, kv clientv3.KV, prefix, namespace string, w io.Writer, now time.Time) (BackupHeader, int, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	from, end := prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/")
	h := BackupHeader{Format: BackupFormat, Prefix: prefix, Namespace: namespace, Time: now.UTC()}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(backupPage)}
		if h.Revision != 0 {
			opts = append(opts, clientv3.WithRev(h.Revision))
		}
		resp, err := kv.Get(ctx, from, opts...)
		if err != nil {
			return h, n, fmt.Errorf("reading keys under %s: %w", prefix, err)
		}
		if h.Revision == 0 {
			h.Revision = resp.Header.Revision
			if err := enc.Encode(h); err != nil {
				return h, n, err
			}
		}
		for _, e := range resp.Kvs {
			// The store's mark (storemark.go) is not a Flock; the
			// store a backup is restored into gets its own.
			if !inNamespace(prefix, string(e.Key), namespace) || string(e.Key) == StoreMarkKey(prefix) {
				continue
			}
			if err := enc.Encode(backupEntry{Key: string(e.Key), Value: e.Value}); err != nil {
				return h, n, err
			}
			n++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if err := enc.Encode(backupEnd{End: true, Keys: n}); err != nil {
		return h, n, err
	}
	return h, n, bw.Flush()
}

// RestoreResult says what Restore did with each key.
type RestoreResult struct {
	Header BackupHeader
	// Restored are the keys put back; Present, those left as they are
	// because the etcd has them (a Flock of that name exists).
	Restored, Present []string
}

// readBackup reads a whole backup from r and checks it: its format, its
// end line and count, and every key under the header's prefix.
func readBackup(r io.Reader) (BackupHeader, []backupEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBackupLine)
	var h BackupHeader
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return h, nil, fmt.Errorf("reading the backup: %w", err)
		}
		return h, nil, errors.New("the backup is empty")
	}
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format != BackupFormat {
		return h, nil, fmt.Errorf("not a backup of format %s (its first line: %.80q)", BackupFormat, sc.Text())
	}
	var entries []backupEntry
	for sc.Scan() {
		var end backupEnd
		if err := json.Unmarshal(sc.Bytes(), &end); err == nil && end.End {
			if end.Keys != len(entries) {
				return h, nil, fmt.Errorf("the backup ends after %d keys, but says it holds %d", len(entries), end.Keys)
			}
			if sc.Scan() {
				return h, nil, errors.New("the backup goes on after its end line")
			}
			return h, entries, nil
		}
		var e backupEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Key == "" {
			return h, nil, fmt.Errorf("line %d of the backup is not a key: %.80q", len(entries)+2, sc.Text())
		}
		if !strings.HasPrefix(e.Key, h.Prefix+"/") {
			return h, nil, fmt.Errorf("key %q of the backup is not under its prefix %s", e.Key, h.Prefix)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return h, nil, fmt.Errorf("reading the backup: %w", err)
	}
	return h, nil, fmt.Errorf("the backup was cut short: no end line after %d keys", len(entries))
}

// Restore reads a backup from r and puts back each of its keys (of
// namespace, when set) that the etcd does not hold, as it was stored; a key
// the etcd holds is left as it is. The whole backup is read and checked
// before anything is written, and its prefix must be prefix: the server
// reads its objects under its own.
func Restore(ctx context.Context, kv clientv3.KV, prefix, namespace string, r io.Reader) (RestoreResult, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	h, entries, err := readBackup(r)
	res := RestoreResult{Header: h}
	if err != nil {
		return res, err
	}
	if h.Prefix != prefix {
		return res, fmt.Errorf("the backup holds keys under %s, the server reads them under %s (--etcd-prefix)", h.Prefix, prefix)
	}
	for _, e := range entries {
		if !inNamespace(prefix, e.Key, namespace) {
			continue
		}
		// Only where the key is absent: a Flock made since (another UID)
		// or never deleted is not overwritten.
		resp, err := kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.Key), "=", 0)).
			Then(clientv3.OpPut(e.Key, string(e.Value))).
			Commit()
		if err != nil {
			return res, fmt.Errorf("putting back %s: %w", e.Key, err)
		}
		if resp.Succeeded {
			res.Restored = append(res.Restored, e.Key)
		} else {
			res.Present = append(res.Present, e.Key)
		}
	}
	return res, nil
}
