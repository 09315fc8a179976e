//go:build !linux

package ingest

import "time"

// threadCPU is unknown here.
func threadCPU() time.Duration { return -1 }
