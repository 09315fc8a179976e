package ingest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go/deprecated"
	pformat "github.com/parquet-go/parquet-go/format"
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

// sameSchema is an error naming a and b and the first node of their
// schemas (depth first, as their footers list them) that differs: in its
// path, repetition, physical type (and a FIXED_LEN_BYTE_ARRAY's length)
// or the annotation of its values. Every node counts, groups too: an
// optional group of a required leaf and a required group of an optional
// leaf give their leaf one definition level, and are two schemas (a row
// of the one is no row of the other). Annotations that say the same thing
// two ways (a converted type beside its logical type, or instead of it, as
// writers differ in; INT(64,true) on an INT64) are the same schema; the
// root's name, which each writer names its own way, is no part of it.
func sameSchema(a, b *ParquetFile) error {
	na, nb := a.schemaNodes(), b.schemaNodes()
	for i := range max(len(na), len(nb)) {
		elem := i + 1 // the root is element 0
		switch {
		case i >= len(na):
			return fmt.Errorf("%s has %s (schema element %d), which %s lacks: the inputs of one Parquet output share one schema", b.name, nb[i], elem, a.name)
		case i >= len(nb):
			return fmt.Errorf("%s lacks %s (schema element %d) of %s: the inputs of one Parquet output share one schema", b.name, na[i], elem, a.name)
		case na[i] != nb[i]:
			return fmt.Errorf("%s and %s differ at schema element %d: %s vs %s: the inputs of one Parquet output share one schema", a.name, b.name, elem, na[i], nb[i])
		}
	}
	return nil
}

// schemaNode is a node of a schema as sameSchema compares it: its path
// (names from the root's child, quoted where a name holds a dot) and how
// it reads.
type schemaNode struct{ path, kind string }

func (n schemaNode) String() string { return n.path + " " + n.kind }

// schemaNodes lists the nodes below the root, depth first. The tree was
// proved whole by readSchema.
func (p *ParquetFile) schemaNodes() []schemaNode {
	if p.file == nil {
		return p.nodes // a schema kept without its file (BadPolicy)
	}
	elems := p.file.Metadata().Schema
	nodes := make([]schemaNode, 0, len(elems))
	type level struct {
		path string
		left int32 // children not yet listed
	}
	stack := []level{{left: numChildren(&elems[0])}}
	for i := 1; i < len(elems); i++ {
		for len(stack) > 1 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
		top := &stack[len(stack)-1]
		top.left--
		e := &elems[i]
		name := e.Name
		if strings.Contains(name, ".") || name == "" {
			name = strconv.Quote(name)
		}
		path := name
		if top.path != "" {
			path = top.path + "." + name
		}
		nodes = append(nodes, schemaNode{path: path, kind: nodeKind(e)})
		if n := numChildren(e); n > 0 || !hasType(e) {
			stack = append(stack, level{path: path, left: n})
		}
	}
	return nodes
}

func numChildren(e *pformat.SchemaElement) int32 { n, _ := e.NumChildren.Get(); return n }

// nodeKind says how a node reads: "optional group (LIST)", "required
// INT64 (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS))".
func nodeKind(e *pformat.SchemaElement) string {
	var b strings.Builder
	if r, ok := e.RepetitionType.Get(); ok {
		b.WriteString(strings.ToLower(repetitionName(r)))
		b.WriteByte(' ')
	}
	t, leaf := e.Type.Get()
	if leaf && numChildren(e) == 0 {
		b.WriteString(typeName(t))
		if t == pformat.FixedLenByteArray {
			n, _ := e.TypeLength.Get()
			fmt.Fprintf(&b, "(%d)", n)
		}
	} else {
		b.WriteString("group")
	}
	if a := annotation(e, t); a != "" {
		fmt.Fprintf(&b, " (%s)", a)
	}
	return b.String()
}

// annotation is what a node's logical type, or else its converted type,
// says of its values, one text for each meaning: a converted type as the
// logical type the spec maps it to (LogicalTypes.md), and a signed
// integer annotation as wide as its physical type as none.
func annotation(e *pformat.SchemaElement, phys pformat.Type) string {
	var lt pformat.LogicalTypeValue = e.LogicalType.Value
	if lt == nil {
		conv, ok := e.ConvertedType.Get()
		if !ok {
			return ""
		}
		lt = convertedLogical(conv, e)
		if lt == nil {
			return convertedName(conv)
		}
	}
	if it, ok := lt.(*pformat.IntType); ok && it.IsSigned &&
		(phys == pformat.Int32 && it.BitWidth == 32 || phys == pformat.Int64 && it.BitWidth == 64) {
		return ""
	}
	return lt.String()
}

// convertedLogical is the logical type a converted type stands for
// (LogicalTypes.md, "Backward compatibility"); nil for MAP_KEY_VALUE,
// INTERVAL and numbers the spec does not name, which have none.
func convertedLogical(conv deprecated.ConvertedType, e *pformat.SchemaElement) pformat.LogicalTypeValue {
	utc := func(u pformat.TimeUnitValue) pformat.TimeUnit { return pformat.TimeUnit{Value: u} }
	switch conv {
	case deprecated.UTF8:
		return &pformat.StringType{}
	case deprecated.Map:
		return &pformat.MapType{}
	case deprecated.List:
		return &pformat.ListType{}
	case deprecated.Enum:
		return &pformat.EnumType{}
	case deprecated.Decimal:
		s, _ := e.Scale.Get()
		p, _ := e.Precision.Get()
		return &pformat.DecimalType{Scale: s, Precision: p}
	case deprecated.Date:
		return &pformat.DateType{}
	case deprecated.TimeMillis:
		return &pformat.TimeType{IsAdjustedToUTC: true, Unit: utc(&pformat.MilliSeconds{})}
	case deprecated.TimeMicros:
		return &pformat.TimeType{IsAdjustedToUTC: true, Unit: utc(&pformat.MicroSeconds{})}
	case deprecated.TimestampMillis:
		return &pformat.TimestampType{IsAdjustedToUTC: true, Unit: utc(&pformat.MilliSeconds{})}
	case deprecated.TimestampMicros:
		return &pformat.TimestampType{IsAdjustedToUTC: true, Unit: utc(&pformat.MicroSeconds{})}
	case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32, deprecated.Uint64:
		return &pformat.IntType{BitWidth: int8(8 << (conv - deprecated.Uint8)), IsSigned: false}
	case deprecated.Int8, deprecated.Int16, deprecated.Int32, deprecated.Int64:
		return &pformat.IntType{BitWidth: int8(8 << (conv - deprecated.Int8)), IsSigned: true}
	case deprecated.Json:
		return &pformat.JsonType{}
	case deprecated.Bson:
		return &pformat.BsonType{}
	}
	return nil
}

// convertedNames are the converted types by the Parquet spec's names
// (parquet.thrift's ConvertedType), by their Thrift numbers.
var convertedNames = [...]string{
	deprecated.UTF8: "UTF8", deprecated.Map: "MAP", deprecated.MapKeyValue: "MAP_KEY_VALUE",
	deprecated.List: "LIST", deprecated.Enum: "ENUM", deprecated.Decimal: "DECIMAL",
	deprecated.Date: "DATE", deprecated.TimeMillis: "TIME_MILLIS", deprecated.TimeMicros: "TIME_MICROS",
	deprecated.TimestampMillis: "TIMESTAMP_MILLIS", deprecated.TimestampMicros: "TIMESTAMP_MICROS",
	deprecated.Uint8: "UINT_8", deprecated.Uint16: "UINT_16", deprecated.Uint32: "UINT_32", deprecated.Uint64: "UINT_64",
	deprecated.Int8: "INT_8", deprecated.Int16: "INT_16", deprecated.Int32: "INT_32", deprecated.Int64: "INT_64",
	deprecated.Json: "JSON", deprecated.Bson: "BSON", deprecated.Interval: "INTERVAL",
}

// convertedName is a converted type's name; a number the spec does not
// name (a newer writer's, or damage) says so.
func convertedName(conv deprecated.ConvertedType) string {
	if conv >= 0 && int(conv) < len(convertedNames) {
		return convertedNames[conv]
	}
	return fmt.Sprintf("unknown converted type %d", conv)
}

// typeName is a physical type's name, or its number when the spec names
// none (the library says "Type(?)").
func typeName(t pformat.Type) string {
	if t >= pformat.Boolean && t <= pformat.FixedLenByteArray {
		return t.String()
	}
	return fmt.Sprintf("unknown physical type %d", t)
}

// encodingName is a page encoding's name, or its number when the spec
// names none (the library says "Encoding(?)").
func encodingName(e int64) string {
	if e >= int64(pformat.Plain) && e <= int64(pformat.ByteStreamSplit) && e != 1 {
		return pformat.Encoding(e).String()
	}
	return fmt.Sprintf("unknown encoding %d", e)
}

// repetitionName is REQUIRED, OPTIONAL or REPEATED.
func repetitionName(r pformat.FieldRepetitionType) string {
	if r >= pformat.Required && r <= pformat.Repeated {
		return r.String()
	}
	return fmt.Sprintf("unknown repetition %d", r)
}
