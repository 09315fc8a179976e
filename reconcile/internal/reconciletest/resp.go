package reconciletest

import (
	"strconv"
	"strings"
)

// Bulk is s as a RESP bulk string.
func Bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// Bulks is ss as a RESP array of bulk strings.
func Bulks(ss []string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(ss)) + "\r\n")
	for _, s := range ss {
		b.WriteString(Bulk(s))
	}
	return b.String()
}

// Page is a SCAN reply: the cursor and the values.
func Page(cursor int, values []string) string {
	return "*2\r\n" + Bulk(strconv.Itoa(cursor)) + Bulks(values)
}
