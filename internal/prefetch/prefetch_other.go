//go:build !amd64

package prefetch

func addrs_([]uintptr) {}

func addr_(uintptr) {}
