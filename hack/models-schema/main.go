// Command models-schema prints the OpenAPI v2 definitions of the generated
// OpenAPI package as one JSON document. hack/update-codegen.sh feeds it to the
// apply-configuration generator so that generated apply configurations know
// the list and map semantics of every field.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"flock.dev/flock/pkg/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	defs := map[string]spec.Schema{}
	for name, def := range openapi.GetOpenAPIDefinitions(ref) {
		s := def.Schema
		// A definition may carry a separate v2 form; the generator reads v2.
		if v2, ok := s.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			s = v2
		}
		defs[name] = s
	}
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "flock.dev", Version: "unversioned"}},
		Definitions: defs,
	}}
	return json.NewEncoder(os.Stdout).Encode(&doc)
}
