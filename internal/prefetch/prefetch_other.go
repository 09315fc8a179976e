//go:build !amd64

package prefetch

func addrs_([]uintptr) {}
