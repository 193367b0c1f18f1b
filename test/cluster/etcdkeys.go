package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// EtcdKeys lists the keys under prefix ("" for all) in the etcd at endpoint
// (a client URL such as Cluster.EtcdURL or Cluster.FlockEtcdURL). It uses
// etcd's JSON gateway (/v3/kv/range), so it needs no etcd client library.
func EtcdKeys(ctx context.Context, endpoint, prefix string) ([]string, error) {
	key := []byte(prefix)
	var rangeEnd []byte
	if prefix == "" {
		key = []byte{0}
		rangeEnd = []byte{0}
	} else {
		rangeEnd = prefixEnd(key)
	}
	body, err := json.Marshal(map[string]any{
		"key":       base64.StdEncoding.EncodeToString(key),
		"range_end": base64.StdEncoding.EncodeToString(rangeEnd),
		"keys_only": true,
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd range at %s: %d %s", endpoint, resp.StatusCode, data)
	}
	var out struct {
		KVs []struct {
			Key string `json:"key"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(out.KVs))
	for _, kv := range out.KVs {
		k, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return nil, err
		}
		keys = append(keys, string(k))
	}
	return keys, nil
}

// prefixEnd is the smallest key greater than every key with the prefix.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}
