// Package schema holds the FlatBuffers schema of the fpdedup index format
// (fpx.fbs) and the Go code flatc generates from it. Nothing here is written
// by hand except this file: regenerate with `go generate ./schema` (needs
// flatc, Debian package flatbuffers-compiler) and commit the result.
//
// The generated accessors trust their input. Package fpstore checks sizes,
// checksums and every offset before it calls them.
package schema

//go:generate sh -c "rm -rf fpdedup_gen && flatc --go --go-namespace schema -o fpdedup_gen fpx.fbs && mv fpdedup_gen/schema/*.go . && rm -rf fpdedup_gen && gofmt -w *.go"
