// File watches.go: watches of the bench that resume where the server
// closed them, shared by the readiness measurement (ready.go) and the
// timeline (realnode.go).

package main

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// watchSpec is one watch: a list (for the resource version to start from)
// and a watch of the same objects, and what to do with each event.
type watchSpec struct {
	list    func(ctx context.Context, opts metav1.ListOptions) (string, error)
	watch   func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	observe func(ev watch.Event)
}

// watchSet runs watches until close.
type watchSet struct {
	stop []func()
	done sync.WaitGroup
}

// start starts the watches of specs. A watch of thousands of objects on a
// loaded machine may be closed by the server; a retry watcher picks it up
// again where it ended, so that no event is missed. On an error the watches
// started are stopped.
func (ws *watchSet) start(ctx context.Context, specs ...watchSpec) error {
	for _, w := range specs {
		rv, err := w.list(ctx, metav1.ListOptions{Limit: 1})
		var wi watch.Interface
		if err == nil {
			wi, err = watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w.watch})
		}
		if err != nil {
			ws.close()
			return err
		}
		ws.stop = append(ws.stop, wi.Stop)
		ws.done.Go(func() {
			for ev := range wi.ResultChan() {
				w.observe(ev)
			}
		})
	}
	return nil
}

// close stops the watches and waits for their readers.
func (ws *watchSet) close() {
	for _, stop := range ws.stop {
		stop()
	}
	ws.stop = nil
	ws.done.Wait()
}

// listRV returns the resource version of a list.
func listRV(l metav1.ListInterface, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return l.GetResourceVersion(), nil
}
