//go:build tools

// Package tools pins etcd's benchmark tool (tools/benchmark of the go.etcd.io/etcd/v3
// module) so that go.sum records every module it is built from;
// workloads/specs/build-etcd-benchmark.sh builds it.
package tools

import _ "go.etcd.io/etcd/v3/tools/benchmark"
