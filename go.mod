module github.com/fpdedup/fpdedup

go 1.26.8

require (
	github.com/FastFilter/xorfilter v0.4.2-0.20260120015552-4e5a4d9df65a // indirect
	github.com/google/flatbuffers v25.12.19+incompatible // indirect
	golang.org/x/sys v0.50.0 // indirect
)
