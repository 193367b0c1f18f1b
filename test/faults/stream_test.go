// File stream_test.go: a list-then-watch loop that survives its API server
// dying: it resumes the watch from the last resourceVersion it saw and,
// when that is too old (410 Gone, e.g. after flock-apiserver restarted with
// an empty watch cache), lists again and hands over the whole new state at
// once. So the state a consumer builds is always the store's state at one
// resourceVersion, never a mix of a stale view and a fresh one (informers'
// relists deliver their differences one object at a time).

package faults

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// stream lists and watches one kind of object.
type stream struct {
	name string
	// list returns the objects and the list's resourceVersion.
	list func(ctx context.Context) ([]runtime.Object, string, error)
	// watch watches from resourceVersion rv.
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// streamSink receives what a stream sees: a full state (after a list), or
// one event.
type streamSink interface {
	replace(stream string, objs []runtime.Object, rv string)
	event(stream string, ev watch.Event)
	// broken records that the stream lost its watch (counted, not an error).
	broken(stream string, err error)
}

// run lists and watches until ctx ends.
func (s stream) run(ctx context.Context, sink streamSink) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			objs, listRV, err := s.list(ctx)
			if err != nil {
				sink.broken(s.name, err)
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			}
			sink.replace(s.name, objs, listRV)
			rv = listRV
		}
		w, err := s.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			sink.broken(s.name, err)
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		rv = s.consume(ctx, w, rv, sink)
	}
}

// consume reads w until it ends and returns the resourceVersion to resume
// from ("" to list again).
func (s stream) consume(ctx context.Context, w watch.Interface, rv string, sink streamSink) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				sink.broken(s.name, nil)
				return rv
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				sink.broken(s.name, err)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return ""
				}
				return rv
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			default:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				sink.event(s.name, ev)
			}
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
