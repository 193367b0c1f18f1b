// This file keeps the plugin's placement.NodeIndex in step with the core
// cluster's Node informer.

package capacity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// indexNodes makes index follow the Node informer: every add, update and
// delete the informer delivers is applied to index. The returned registration
// has synced once the informer's initial list has reached index.
func indexNodes(informer cache.SharedIndexInformer, index interface {
	Set(*corev1.Node)
	Delete(string)
}) (cache.ResourceEventHandlerRegistration, error) {
	set := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			index.Set(n)
		}
	}
	return informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				index.Delete(n.Name)
			}
		},
	})
}
