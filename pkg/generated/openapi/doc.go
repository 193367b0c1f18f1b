// Package openapi holds the generated OpenAPI definitions of the flock.dev API
// and of the Kubernetes types it refers to.
package openapi
