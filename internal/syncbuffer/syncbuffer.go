// Package syncbuffer is a bytes.Buffer that one goroutine may write while
// others read it: what a test gives a command or a watch as its output and
// reads while it runs.
package syncbuffer

import (
	"bytes"
	"sync"
)

// Buffer is safe for one writer and concurrent readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
