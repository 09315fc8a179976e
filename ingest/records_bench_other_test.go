//go:build !unix

package ingest

import "time"

// processCPU is unknown here.
func processCPU() time.Duration { return -1 }
