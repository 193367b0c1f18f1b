package flock

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"flock.dev/flock/pkg/apis/flock"
)

// tableConvertor prints Flocks for `kubectl get`: NAME, READY, AGE, and with
// -o wide SERVICE and NODES (the member nodes in ordinal order).
type tableConvertor struct{}

var swaggerMetadataDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: swaggerMetadataDescriptions["name"]},
	{Name: "Ready", Type: "string", Description: "Ready members / desired members."},
	{Name: "Age", Type: "string", Description: swaggerMetadataDescriptions["creationTimestamp"]},
	{Name: "Service", Type: "string", Priority: 1, Description: "The headless Service that names the members."},
	{Name: "Nodes", Type: "string", Priority: 1, Description: "The node of each member, in ordinal order."},
}

func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: columns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	var flocks []flock.Flock
	switch t := obj.(type) {
	case *flock.Flock:
		flocks = []flock.Flock{*t}
	case *flock.FlockList:
		flocks = t.Items
	default:
		return nil, fmt.Errorf("cannot print %T as a Flock table", obj)
	}
	for i := range flocks {
		f := &flocks[i]
		var desired int32
		if f.Spec.Replicas != nil {
			desired = *f.Spec.Replicas
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Object: runtime.RawExtension{Object: f},
			Cells: []interface{}{
				f.Name,
				fmt.Sprintf("%d/%d", f.Status.ReadyReplicas, desired),
				age(f.CreationTimestamp),
				f.Spec.ServiceName,
				memberNodes(f),
			},
		})
	}
	return table, nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(metav1.Now().Sub(t.Time))
}

func memberNodes(f *flock.Flock) string {
	if len(f.Status.Members) == 0 {
		return "<none>"
	}
	nodes := make([]string, len(f.Status.Members))
	for i, m := range f.Status.Members {
		nodes[i] = m.Node
	}
	return strings.Join(nodes, ",")
}
