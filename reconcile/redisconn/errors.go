package redisconn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// A ReplyError is a reply of a Redis server that Run refuses to read: one
// that declares more than a reply may hold, or bytes that are not RESP2.
// Every byte a server sends passes through a check (respguard.go) before
// the client reads it, so a declared length is refused before any client
// allocates it. The connection is closed and the command is not retried:
// the server would answer the same.
type ReplyError struct {
	Server   string       // host:port of the server that sent it (the node, in a cluster)
	Command  string       // the command it answered ("SCAN", "CLUSTER SLOTS"); "" when not known
	Problem  ReplyProblem // what is wrong with it
	Declared int64        // the length, count or depth it declared (the bounded problems)
	Limit    int64        // the bound it broke (the bounded problems)
	Bytes    string       // NotRESP: the bytes at fault, quoted and cut
}

// ReplyProblem says what is wrong with a reply (ReplyError).
type ReplyProblem int

// The problems of a reply.
const (
	BulkTooLong   ReplyProblem = iota + 1 // a bulk string longer than any key name, field or filter chunk Run reads
	ReplyTooLarge                         // more declared in one reply (16 bytes an array element, strings at their length) than a reply may hold
	ReplyTooDeep                          // arrays nested deeper than any reply Run reads
	LineTooLong                           // a simple string, error or integer longer than any Redis sends
	NotRESP                               // a byte that cannot begin or continue a RESP2 reply
)

func (e *ReplyError) Error() string {
	cmd := "a command"
	if e.Command != "" {
		cmd = e.Command
	}
	msg := fmt.Sprintf("redis %s answered %s with ", e.Server, cmd)
	switch e.Problem {
	case BulkTooLong:
		msg += fmt.Sprintf("a string of %d bytes, over the %d any key name, field or RedisBloom chunk (BF.SCANDUMP's) Run reads may have", e.Declared, e.Limit)
	case ReplyTooLarge:
		msg += fmt.Sprintf("a reply declaring %d bytes or more, over the %d a reply may hold (a share of the memory budget: lower count= or the batch, or give more memory)", e.Declared, e.Limit)
	case ReplyTooDeep:
		msg += fmt.Sprintf("arrays nested %d deep, over the %d any reply has", e.Declared, e.Limit)
	case LineTooLong:
		msg += fmt.Sprintf("a line of %d bytes or more, over the %d any status, error or integer has", e.Declared, e.Limit)
	case NotRESP:
		msg += fmt.Sprintf("bytes that are not RESP2: %s", e.Bytes)
	default:
		msg += fmt.Sprintf("ReplyProblem(%d)", int(e.Problem))
	}
	return msg + ": a broken server, or not Redis"
}

// Refusal marks an error reply that refuses a write for good (the user
// lacks the permission: NOPERM; or is not who it says: NOAUTH,
// WRONGPASS) as online.Refused, so that the failed --apply says what is
// wrong and advises no rerun; any other error is returned as it is.
func Refusal(err error) error {
	if err == nil || online.IsPermanent(err) {
		return err
	}
	s := err.Error()
	for _, p := range []string{"NOPERM", "NOAUTH", "WRONGPASS"} {
		if strings.Contains(s, p) {
			return online.Refused{Err: err}
		}
	}
	return err
}

// Retryable tells a lost connection or a timeout, worth retrying,
// from an answer of a Redis server (wrong credentials, a key of another
// type, a command it does not know) that a retry would only repeat.
func Retryable(err error) bool {
	var re *ReplyError
	if online.IsPermanent(err) || errors.As(err, &re) {
		return false // a server that sent a reply past its bounds would send it again
	}
	s := err.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "WRONGTYPE", "NOPERM", "ERR unknown command"} {
		if strings.Contains(s, p) {
			return false
		}
	}
	return true
}
