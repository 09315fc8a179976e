package mysqltable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Source reads a fingerprint column with one streamed `SELECT C FROM T
// ORDER BY C` (sorted: it merge-joins with the index), probes with `WHERE
// C IN (…)`, and writes with multi-row INSERT IGNORE.
type Source struct {
	t        Table
	o        *online.Config
	db       *sql.DB
	table    string // quoted
	column   string // quoted
	binary   bool   // BINARY/VARBINARY: raw big-endian bytes; else hex text
	wide     bool   // 32 bytes / 64 hex digits: whole SHA-256 digests
	colType  string // as information_schema says, for messages
	srv      *mysqlGuard
	estimate int64 // the row estimate, when the table is too large to count
}

// rowEstimateSlack is how far the rows read may pass the server's row
// estimate (information_schema.TABLES.TABLE_ROWS, used for tables of more
// than countAutoMax rows) before the read stops: InnoDB's estimate samples
// a few pages and is often off by tens of percent, and it is recomputed
// once a tenth of the table has changed; four times it is no estimate.
const rowEstimateSlack = 4

type nopLogger struct{}

func (nopLogger) Print(...any) {}

func quoteIdent(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, ".")
}

// Open opens the table t names and checks its column's type: BINARY(16)
// or BINARY(32), CHAR(32) or CHAR(64).
func Open(ctx context.Context, t Table, o *online.Config) (*Source, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = t.User, o.Password
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", t.Addr, t.Name
	cfg.InterpolateParams = true // one round trip per batch, not prepare+execute
	cfg.Timeout = min(o.Timeout, 5*time.Second)
	cfg.ReadTimeout, cfg.WriteTimeout = o.Timeout, o.Timeout
	cfg.Logger = nopLogger{} // errors are returned, never printed by the driver
	srv := newMySQLGuard(o.Target, t.Addr, o.Timeout, o.Hangup)
	cfg.DialFunc = srv.dial
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Target, err)
	}
	db := sql.OpenDB(&guardConnector{Connector: conn, srv: srv})
	db.SetMaxOpenConns(o.Conns + 2)
	db.SetMaxIdleConns(o.Conns + 2)
	m := &Source{t: t, o: o, db: db, table: quoteIdent(t.Table), column: quoteIdent(t.Column), srv: srv}
	if err := o.Retry(ctx, Retryable, "reaching "+o.Target, nil, func() error {
		return m.onConn(ctx, func(c *sql.Conn) error { return c.PingContext(ctx) })
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", o.Target, err)
	}
	schema, table := t.Name, t.Table
	if s, tb, ok := strings.Cut(t.Table, "."); ok {
		schema, table = s, tb
	}
	var dataType, columnType string
	var length sql.NullInt64
	err = m.onConn(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `SELECT DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, COLUMN_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?`, schema, table, t.Column).Scan(&dataType, &length, &columnType)
	})
	if errors.Is(err, sql.ErrNoRows) {
		db.Close()
		return nil, fmt.Errorf("%s: no column %s in table %s.%s (or no privilege to see it)", o.Target, t.Column, schema, table)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: cannot read the column's type: %w", o.Target, err)
	}
	m.colType = columnType
	switch strings.ToLower(dataType) + fmt.Sprint(length.Int64) {
	case "binary16", "varbinary16":
		m.binary = true
	case "binary32", "varbinary32":
		m.binary, m.wide = true, true
	case "char32", "varchar32":
	case "char64", "varchar64":
		m.wide = true
	default:
		db.Close()
		return nil, fmt.Errorf("%s: column %s is %s; want BINARY(16), BINARY(32), CHAR(32) or CHAR(64) (a fingerprint or a SHA-256 digest, raw or hex)", o.Target, t.Column, columnType)
	}
	return m, nil
}

// onConn runs fn on a connection of the pool, its panics recovered and
// its errors explained by the connection's guard. A connection found dead
// before anything was sent (driver.ErrBadConn: the server restarted while
// it was idle) is replaced, up to twice, as database/sql does for calls
// on the DB itself.
func (m *Source) onConn(ctx context.Context, fn func(c *sql.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := m.db.Conn(ctx)
		if err != nil {
			return err // (explained by guardConnector.Connect)
		}
		err = m.srv.call(m.guardOf(c), func() error { return fn(c) })
		c.Close()
		if attempt < 2 && errors.Is(err, driver.ErrBadConn) && !online.IsPermanent(err) {
			continue
		}
		return err
	}
}

// guardOf is the packetConn under c.
func (m *Source) guardOf(c *sql.Conn) (g *packetConn) {
	_ = c.Raw(func(dc any) error {
		g = m.srv.conn(dc)
		return nil
	})
	return g
}

func (m *Source) Close() error { return m.db.Close() }

// Retryable: see the package's Retryable.
func (m *Source) Retryable(err error) bool { return Retryable(err) }

func (m *Source) Sorted() bool { return true }

func (m *Source) Wide() (bool, bool) { return m.wide, true }

func (m *Source) where(and bool) string {
	switch {
	case m.t.Where == "":
		return ""
	case and:
		return " AND (" + m.t.Where + ")"
	}
	return " WHERE (" + m.t.Where + ")"
}

// emitError is an error of the consumer, which no retry of the read fixes.
type emitError struct{ error }

func (e emitError) Unwrap() error { return e.error }

// Read streams the column in its order. A read that fails (the connection
// killed, the server restarted) resumes after the last value read, `WHERE
// C > ?`, with bounded retries and backoff: rows.Next returning false is
// not the end until rows.Err says so (FAULTS.md row 22). With the count
// check, COUNT(*) and the read run in one consistent snapshot, so the rows
// read must equal it exactly; after a resume the snapshots differ and the
// report says the count was not compared.
func (m *Source) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	c := &readConn{m: m}
	defer c.close()
	if err := m.o.Retry(ctx, Retryable, "reading "+m.o.Target, nil, func() error { return c.connect(ctx) }); err != nil {
		return fmt.Errorf("cannot reach %s: %w", m.o.Target, err)
	}
	count, err := m.willCount(ctx, c, st)
	if err != nil {
		return err
	}
	if count {
		if err := m.countInSnapshot(ctx, c, st); err != nil {
			return err
		}
	}
	buf := make([]fpstore.Fingerprint, 0, 8192)
	if err := m.readResuming(ctx, c, st, emit, &buf); err != nil {
		return err
	}
	if count {
		if err := m.checkCount(ctx, c, st); err != nil {
			return err
		}
	}
	if len(buf) > 0 {
		if err := emit(buf); err != nil {
			return err
		}
	}
	return nil
}

// readConn is the one connection a Read uses at a time, and its guard.
type readConn struct {
	m    *Source
	conn *sql.Conn
	g    *packetConn // conn's
}

// connect replaces the connection with a new one.
func (c *readConn) connect(ctx context.Context) error {
	c.close()
	conn, err := c.m.db.Conn(ctx)
	if err != nil {
		return err
	}
	c.conn, c.g = conn, c.m.guardOf(conn)
	return nil
}

func (c *readConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// willCount decides whether the rows read are compared with COUNT(*):
// always, never, or (CountAuto) when the table's row estimate says a count
// is cheap; st.Note says why not.
func (m *Source) willCount(ctx context.Context, c *readConn, st *online.ReadStats) (bool, error) {
	switch m.t.Count {
	case CountAlways:
		return true, nil
	case CountNever:
		st.Note = "rows read not compared with COUNT(*) (&count=0)"
		return false, nil
	case CountAuto:
		var est sql.NullInt64
		schema, table := m.t.Name, m.t.Table
		if s, tb, ok := strings.Cut(m.t.Table, "."); ok {
			schema, table = s, tb
		}
		err := m.srv.call(c.g, func() error {
			return c.conn.QueryRowContext(ctx, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, table).Scan(&est)
		})
		if online.IsPermanent(err) {
			return false, fmt.Errorf("%s: reading the row estimate: %w", m.o.Target, err)
		}
		switch count := err == nil && est.Valid && est.Int64 <= countAutoMax; {
		case count:
			return true, nil
		case err != nil || !est.Valid:
			// (A lost connection shows again, and is retried, in the read.)
			st.Note = "rows read not compared with COUNT(*): the table's size could not be read (&count=1 forces the count); rows.Err() still guards the read"
		default:
			m.estimate = est.Int64
			st.Note = fmt.Sprintf("rows read not compared with COUNT(*): the table holds ~%d rows, too many for a cheap count (&count=1 forces it); rows.Err() still guards the read", est.Int64)
		}
	}
	return false, nil
}

// countInSnapshot opens the consistent snapshot the read runs in and
// counts the rows there (st.Expected).
func (m *Source) countInSnapshot(ctx context.Context, c *readConn, st *online.ReadStats) error {
	err := m.srv.call(c.g, func() error {
		_, err := c.conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
		return err
	})
	if err == nil {
		err = m.srv.call(c.g, func() error {
			return c.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+m.table+m.where(false)).Scan(&st.Expected)
		})
	}
	if err != nil {
		return fmt.Errorf("%s: counting the rows: %w", m.o.Target, err)
	}
	return nil
}

// readResuming streams the column, and after a failure that a retry may
// fix reconnects and resumes after the last value read, within the
// retries and with backoff; unsent fingerprints are left in *buf.
func (m *Source) readResuming(ctx context.Context, c *readConn, st *online.ReadStats, emit func([]fpstore.Fingerprint) error, buf *[]fpstore.Fingerprint) error {
	q := "SELECT " + m.column + " FROM " + m.table + m.where(false) + " ORDER BY " + m.column
	var args []any
	var last []byte
	var connErr error // why the last reconnect failed, while c.conn is nil
	for attempt := 0; ; attempt++ {
		var err error
		if c.conn == nil {
			// The reconnect after the last failure failed too: that is
			// this attempt's failure (a nil conn is never used).
			err = connErr
		} else {
			err = m.stream(ctx, c.conn, q, args, st, emit, &last, buf)
		}
		if err == nil {
			return nil
		}
		var ee emitError
		if errors.As(err, &ee) {
			return ee.error
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if online.IsPermanent(err) {
			// (A BadServerError: a rerun would meet the same.)
			return fmt.Errorf("reading %s failed after %d rows and %d retries: %w; nothing was published", m.o.Target, st.Values.Load(), st.Retries, err)
		}
		if attempt >= m.o.Retries || !Retryable(err) {
			return fmt.Errorf("reading %s failed after %d rows and %d retries: %w; nothing was published, rerun to read again", m.o.Target, st.Values.Load(), st.Retries, err)
		}
		st.Retries++
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(min(m.o.Backoff<<attempt, 5*time.Second)):
		}
		if err := c.connect(ctx); err != nil {
			// Counted as the next attempt's failure, with its retries.
			connErr = fmt.Errorf("reconnecting: %w", err)
		}
		if last != nil {
			q, args = m.resumeQuery(last)
		}
	}
}

// resumeQuery reads the column after last.
func (m *Source) resumeQuery(last []byte) (string, []any) {
	if m.safeLiteral(last) {
		return "SELECT " + m.column + " FROM " + m.table + " WHERE " + m.column + " > " + string(m.literal(nil, last)) + m.where(true) + " ORDER BY " + m.column, nil
	}
	// A value that is no hex (counted as bad): bound, as it may hold anything.
	return "SELECT " + m.column + " FROM " + m.table + " WHERE " + m.column + " > ?" + m.where(true) + " ORDER BY " + m.column, []any{string(last)}
}

// checkCount ends the snapshot and holds the rows read to its count, when
// the read ran in it whole (no resume on another connection).
func (m *Source) checkCount(ctx context.Context, c *readConn, st *online.ReadStats) error {
	_ = m.srv.call(c.g, func() error {
		_, err := c.conn.ExecContext(ctx, "COMMIT")
		return err
	})
	if st.Retries == 0 {
		st.Checked = true
		if got := st.Values.Load(); got != st.Expected {
			return fmt.Errorf("reading %s: %d rows read but COUNT(*) in the same snapshot says %d: a truncated read; nothing was published, rerun", m.o.Target, got, st.Expected)
		}
		return nil
	}
	st.Note = fmt.Sprintf("read resumed %d times on new connections: rows read (%d) not compared with COUNT(*) (%d) of the first snapshot", st.Retries, st.Values.Load(), st.Expected)
	return nil
}

// stream runs one streamed query; it leaves the last value read in *last
// and unsent fingerprints in *buf. It reads the driver's rows directly:
// database/sql's per-row locking and conversions cost more CPU than the
// protocol itself on millions of 16-byte rows.
func (m *Source) stream(ctx context.Context, conn *sql.Conn, q string, args []any, st *online.ReadStats, emit func([]fpstore.Fingerprint) error, last *[]byte, buf *[]fpstore.Fingerprint) error {
	var consumerErr error
	err := conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("the MySQL driver cannot query")
		}
		nargs := make([]driver.NamedValue, len(args))
		for i, a := range args {
			nargs[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		g := m.srv.conn(dc)
		if g != nil {
			g.expectStream() // no deadline on the whole reply: the rows bound it
		}
		var rows driver.Rows
		err := m.srv.call(g, func() (err error) {
			rows, err = qc.QueryContext(ctx, q, nargs)
			return err
		})
		if g != nil {
			g.stream = false // (if the query was never sent)
		}
		if err != nil {
			return dropBad(err)
		}
		b := *buf
		defer func() { *buf = b }()
		var n int64
		defer func() { st.Values.Add(n) }()
		limit, basis := m.rowLimit(st)
		dest := make([]driver.Value, 1)
		for {
			// Next returns io.EOF only after the server's end-of-rows
			// packet: a lost connection is an error (FAULTS.md row 22),
			// and a row whose value runs past the end of its packet,
			// which the driver would read as the end, never reaches it
			// (the guard refuses it).
			if err := m.srv.next(rows, dest); err != nil {
				if !errors.Is(err, io.EOF) {
					if err = m.srv.explain(err, g); !online.IsPermanent(err) {
						rows.Close()
					}
					return dropBad(err)
				}
				if rs, ok := rows.(driver.RowsNextResultSet); ok && rs.HasNextResultSet() {
					// (Closing the rows would read them all.)
					return badConn{m.srv.fail(&BadServerError{Problem: ExtraResults})}
				}
				return m.srv.call(g, rows.Close)
			}
			if limit >= 0 && st.Values.Load()+n >= limit {
				// (Closing the rows would read the rest.)
				return badConn{m.srv.fail(&BadServerError{Problem: TooManyRows, Size: st.Values.Load() + n + 1, Max: limit, Detail: basis})}
			}
			raw, _ := dest[0].([]byte) // nil: NULL
			n++
			*last = append((*last)[:0], raw...)
			fp, ok := m.parse(raw, st)
			if !ok {
				continue
			}
			if b = append(b, fp); len(b) == cap(b) {
				st.Values.Add(n)
				n = 0
				err := st.Wait(ctx, len(b))
				if err == nil {
					err = emit(b)
				}
				if err != nil {
					// Closing the rows would read the rest of the result:
					// drop the connection instead.
					consumerErr = err
					return driver.ErrBadConn
				}
				b = b[:0]
			}
		}
	})
	if consumerErr != nil {
		return emitError{consumerErr}
	}
	return err
}

func (m *Source) parse(raw []byte, st *online.ReadStats) (fpstore.Fingerprint, bool) {
	if raw == nil {
		st.AddBad("NULL", m.o.Samples)
		return fpstore.Fingerprint{}, false
	}
	if m.binary {
		switch len(raw) {
		case 16:
			st.Narrow++
		case 32:
			st.Full++
		default:
			st.AddBad("0x"+hex.EncodeToString(raw), m.o.Samples)
			return fpstore.Fingerprint{}, false
		}
		return fpstore.FromBytes(raw), true
	}
	fp, ok := online.ParseHex(raw)
	if !ok {
		st.AddBad(string(raw), m.o.Samples)
		return fp, false
	}
	if len(raw) == 64 {
		st.Full++
	} else {
		st.Narrow++
	}
	return fp, true
}

// rowLimit is the most rows the read may give, -1 for no bound, and what
// says so. With COUNT(*) taken in the read's snapshot, the rows are its
// count; once the read has resumed on a new connection (a later
// snapshot), rows inserted since count too: twice the count, or the
// count and countAutoMax rows. With the row estimate (a table too large
// to count), rowEstimateSlack times it.
func (m *Source) rowLimit(st *online.ReadStats) (int64, string) {
	switch {
	case st.Expected >= 0 && st.Retries == 0:
		return st.Expected, "COUNT(*) in the same snapshot"
	case st.Expected >= 0:
		return max(2*st.Expected, st.Expected+countAutoMax), fmt.Sprintf("COUNT(*) %d, and what %d resumed reads on later snapshots may add", st.Expected, st.Retries)
	case m.estimate > 0:
		return rowEstimateSlack * m.estimate, fmt.Sprintf("%d times the row estimate of %d; &count=1 counts the rows instead", rowEstimateSlack, m.estimate)
	}
	return -1, ""
}

// literal is a value as SQL text: x'<hex>' for a BINARY column, '<hex>'
// for a CHAR one. Values are inlined rather than bound: with placeholders,
// the driver would also substitute a '?' inside the URL's &where= string.
func (m *Source) literal(b []byte, raw []byte) []byte {
	if m.binary {
		b = append(b, "x'"...)
		b = hex.AppendEncode(b, raw)
	} else {
		b = append(b, '\'')
		b = append(b, raw...)
	}
	return append(b, '\'')
}

// itemLiteral is an item's value: 16 or 32 bytes, or 32 or 64 hex digits.
func (m *Source) itemLiteral(b []byte, it *online.Item) []byte {
	var buf [64]byte
	if m.binary {
		return m.literal(b, it.Bytes(m.wide))
	}
	return m.literal(b, it.AppendHex(buf[:0], m.wide))
}

// probeLiteral is fp's value on a 128-bit column, or on a 256-bit one the
// lowest (fill 0) or highest (fill 0xff) digest that starts with fp.
func (m *Source) probeLiteral(b []byte, fp fpstore.Fingerprint, fill byte) []byte {
	raw := (&online.Item{FP: fp}).Bytes(false)
	if m.wide {
		for len(raw) < 32 {
			raw = append(raw, fill)
		}
	}
	if m.binary {
		return m.literal(b, raw)
	}
	return m.literal(b, hex.AppendEncode(nil, raw))
}

// safeLiteral reports whether a value read from the column can be inlined
// as it is: hex digits only (any fingerprint, any value of a BINARY column).
func (m *Source) safeLiteral(raw []byte) bool {
	return m.binary || online.IsHex(raw)
}

// Probe asks which of fps the column holds: `IN (…)` on 128-bit columns;
// on whole digests, one index range per fingerprint (its 2^128 digests).
func (m *Source) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	q := make([]byte, 0, 64+len(fps)*(40+len(m.column)))
	q = append(q, "SELECT "+m.column+" FROM "+m.table+" WHERE ("...)
	for i, fp := range fps {
		if m.wide {
			if i > 0 {
				q = append(q, " OR "...)
			}
			q = append(q, m.column+" BETWEEN "...)
			q = m.probeLiteral(q, fp, 0)
			q = append(q, " AND "...)
			q = m.probeLiteral(q, fp, 0xff)
		} else {
			if i == 0 {
				q = append(q, m.column+" IN ("...)
			} else {
				q = append(q, ',')
			}
			q = m.probeLiteral(q, fp, 0)
		}
	}
	if !m.wide {
		q = append(q, ')')
	}
	q = append(q, ")"+m.where(true)...)
	clear(present)
	return m.onConn(ctx, func(c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, string(q))
		if err != nil {
			return err
		}
		defer rows.Close()
		var raw sql.RawBytes
		var st online.ReadStats
		for rows.Next() {
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			fp, ok := m.parse(raw, &st)
			if !ok {
				continue
			}
			if i, found := slices.BinarySearchFunc(fps, fp, fpstore.Fingerprint.Compare); found {
				present[i] = true
			}
		}
		return rows.Err()
	})
}

// Write inserts items with one multi-row INSERT IGNORE. Its affected-rows
// count is not used: after a retry it would miss rows this run inserted.
// Held asks which items the column holds, as Write wrote them: WHERE C
// IN (…) on their exact values (whole digests on a 256-bit column), in
// the URL's slice.
func (m *Source) Held(ctx context.Context, items []online.Item, present []bool) error {
	clear(present)
	if len(items) == 0 {
		return nil
	}
	q := make([]byte, 0, 64+len(items)*72)
	q = append(q, "SELECT "+m.column+" FROM "+m.table+" WHERE "+m.column+" IN ("...)
	for i := range items {
		if i > 0 {
			q = append(q, ',')
		}
		q = m.itemLiteral(q, &items[i])
	}
	q = append(q, ")"+m.where(true)...)
	return m.onConn(ctx, func(c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, string(q))
		if err != nil {
			return err
		}
		defer rows.Close()
		var raw sql.RawBytes
		var st online.ReadStats
		for rows.Next() {
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			fp, ok := m.parse(raw, &st)
			if !ok {
				continue
			}
			// Items with this fingerprint: one, but for whole digests that
			// share their first 128 bits.
			i, _ := slices.BinarySearchFunc(items, fp, func(it online.Item, fp fpstore.Fingerprint) int { return it.FP.Compare(fp) })
			for ; i < len(items) && items[i].FP == fp; i++ {
				present[i] = present[i] || !m.wide || sameDigest(raw, &items[i], m.binary)
			}
		}
		return rows.Err()
	})
}

// sameDigest reports whether raw, a value of a 256-bit column (32 bytes,
// or 64 hex digits), is the item's whole digest.
func sameDigest(raw []byte, it *online.Item, binary bool) bool {
	if binary {
		return string(raw) == string(it.Full[:])
	}
	var b [32]byte
	_, err := hex.Decode(b[:], raw)
	return err == nil && b == it.Full
}

func (m *Source) Write(ctx context.Context, items []online.Item) error {
	if len(items) == 0 {
		return nil
	}
	q := make([]byte, 0, 64+len(items)*72)
	q = append(q, "INSERT IGNORE INTO "+m.table+" ("+m.column+") VALUES "...)
	for i := range items {
		if i > 0 {
			q = append(q, ',')
		}
		q = append(q, '(')
		q = m.itemLiteral(q, &items[i])
		q = append(q, ')')
	}
	return refusal(m.onConn(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, string(q))
		return err
	}))
}

func (m *Source) Plan(w io.Writer, items []online.Item) error {
	var b []byte
	for i := range items {
		b = append(b, "INSERT IGNORE INTO "+m.table+" ("+m.column+") VALUES ("...)
		b = m.itemLiteral(b, &items[i])
		b = append(b, ");\n"...)
	}
	_, err := w.Write(b)
	return err
}
