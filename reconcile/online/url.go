package online

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Params are an online URL's query, read a parameter at a time: each
// store's adapter reads its own, and a parameter nobody read is refused
// (Unknown).
type Params struct {
	q     url.Values
	known map[string]bool
}

// NewParams reads q.
func NewParams(q url.Values) *Params { return &Params{q: q, known: map[string]bool{}} }

// Get is the first value of k ("" when not given).
func (p *Params) Get(k string) string { p.known[k] = true; return p.q.Get(k) }

// All are the values of k.
func (p *Params) All(k string) []string { p.known[k] = true; return p.q[k] }

// Unknown is a parameter nobody read, if any.
func (p *Params) Unknown() string {
	for k := range p.q {
		if !p.known[k] {
			return k
		}
	}
	return ""
}

// BadURL is the *URLError of the URL printed as redacted, for the reason
// format says.
func BadURL(redacted string, format string, a ...any) error {
	return &URLError{URL: redacted, Reason: fmt.Sprintf(format, a...)}
}

// HostPort is host with defPort when it names none (127.0.0.1 when empty).
func HostPort(host, defPort string) string {
	if host == "" {
		host = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		return net.JoinHostPort(strings.Trim(host, "[]"), defPort)
	}
	return host
}
