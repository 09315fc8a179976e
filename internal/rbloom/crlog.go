package rbloom

import (
	"math"
	"math/big"
	"sync"
)

// lnPrec is the precision of crLog's arithmetic: far more than float64's
// 53 bits, so that rounding its result to a float64 is the correctly
// rounded logarithm (a natural log of a float64 other than 1 is never
// within 2^-150 of a rounding tie at this scale).
const lnPrec = 192

// crLog is ln(x) correctly rounded, for x > 0 and finite.
//
// Why not math.Log: the module computes a sub-filter's bits per entry from
// glibc's log, and its header carries the result (bpe). Go's math.Log is
// within 1 ULP and differs from glibc 2.36's in about 1% of arguments
// (217741 of 20M random rates in (0, 1)); the correctly rounded value
// differs from glibc's in about 65 in a million (129 of 2M), and in none of
// the error rates people choose (1, 1.5, 2, 2.5, … 9 times 10^-1 … 10^-10,
// each halved up to 63 times) but 0.0375·2^-24. Where it still differs,
// the header's bpe differs in its last bit and, in all but a vanishing few
// cases, nothing else (bits and hashes are a floor and a ceiling of it).
// A caller that must match a server's libm whatever it is passes its own
// Params.BPE (see BPE).
func crLog(x float64) float64 {
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac in [0.5, 1)
	if frac < math.Sqrt2/2 {
		frac *= 2
		exp--
	}
	// ln(frac) = 2·atanh(s), s = (frac-1)/(frac+1), |s| < 0.172: the series
	// gains 5 bits a term.
	m := newFloat().SetFloat64(frac)
	one := newFloat().SetInt64(1)
	s := newFloat().Quo(newFloat().Sub(m, one), newFloat().Add(m, one))
	r := atanh2(s)
	r.Add(r, newFloat().Mul(ln2(), newFloat().SetInt64(int64(exp))))
	f, _ := r.Float64()
	return f
}

var ln2 = sync.OnceValue(func() *big.Float {
	return atanh2(newFloat().Quo(newFloat().SetInt64(1), newFloat().SetInt64(3)))
})

func newFloat() *big.Float { return new(big.Float).SetPrec(lnPrec) }

// atanh2 is 2·atanh(s) = 2·(s + s³/3 + s⁵/5 + …), for |s| <= 1/3.
func atanh2(s *big.Float) *big.Float {
	sum := newFloat().Set(s)
	s2 := newFloat().Mul(s, s)
	pow := newFloat().Set(s)
	term := newFloat()
	for k := int64(3); ; k += 2 {
		pow.Mul(pow, s2)
		term.Quo(pow, newFloat().SetInt64(k))
		if term.Sign() == 0 || term.MantExp(nil)-sum.MantExp(nil) < -lnPrec-2 {
			break
		}
		sum.Add(sum, term)
	}
	return sum.Mul(sum, newFloat().SetInt64(2))
}
