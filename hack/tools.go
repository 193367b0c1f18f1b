//go:build tools

// Package hack pins the code generators in go.mod.
package hack

import _ "k8s.io/code-generator"
