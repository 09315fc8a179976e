package ingest

import (
	"fmt"
	"strconv"
	"strings"
)

// leavesUnder lists the leaves inside the group whose path is item (its
// names joined by dots, as a --key item spells a path), in schema order.
// The names are matched a level at a time: a column named "a.b" is no
// group a.
func (p *ParquetFile) leavesUnder(item string) []int {
	var under []int
	for i, c := range p.columns {
		for k := 1; k < len(c.names); k++ {
			if strings.Join(c.names[:k], ".") == item {
				under = append(under, i)
				break
			}
		}
	}
	return under
}

// describeLeaves lists leaves for a message, a bounded number of them:
// by path with their leaf numbers (a group's leaves), or with each
// level's name quoted and the type, so that two leaves of one path tell
// apart (leaf 1 ("a"."b", INT64), leaf 2 ("a.b", INT64)).
func (p *ParquetFile) describeLeaves(leaves []int, byPath bool) string {
	const most = 40
	var b strings.Builder
	for n, i := range leaves {
		if n == most {
			fmt.Fprintf(&b, " … (%d in all)", len(leaves))
			break
		}
		if n > 0 {
			b.WriteString(", ")
		}
		c := &p.columns[i]
		if byPath {
			fmt.Fprintf(&b, "%s (leaf %d)", c.Path, i+1)
			continue
		}
		fmt.Fprintf(&b, "leaf %d (", i+1)
		for k, name := range c.names {
			if k > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.Quote(name))
		}
		fmt.Fprintf(&b, ", %s)", c.Type)
	}
	return b.String()
}
