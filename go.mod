module github.com/fpdedup/fpdedup

go 1.26.8
