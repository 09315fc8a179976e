//go:build race

package main

// raceBuild: the test binary, which the tests also run as fpdedup
// (fpdedupLink), is built with -race, whose shadow memory multiplies RSS:
// a bound on a child's peak RSS measures the detector, not fpdedup.
func init() { raceBuild = true }
