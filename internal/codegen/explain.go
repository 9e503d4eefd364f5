package codegen

import (
	"errors"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// ExplainHint is one resolved hint of one side with its origin.
type ExplainHint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Origin string `json:"origin"` // "default" or file:line:col (level)
}

// ExplainSide is the plan of one side of one function: the table the
// runtime builds for it (hints.TableFor, the one the lanes, FLOCK and TCP
// routes read) and the hints it came from.
type ExplainSide struct {
	Service  string `json:"service"`
	Function string `json:"function"`
	Side     string `json:"side"` // client | server
	// Stream is the function's streaming.mode ("server", "client" or
	// "bidirectional"; empty for a unary function).
	Stream string        `json:"stream,omitempty"`
	Table  hints.Table   `json:"table"`
	At     []ExplainAt   `json:"at,omitempty"` // the rows of --sizes
	Hints  []ExplainHint `json:"hints"`
}

// ExplainAt is the row a message of Size bytes falls in.
type ExplainAt struct {
	Size int       `json:"size"`
	Row  hints.Row `json:"row"`
}

// ExplainOptions is the machine and session a plan is explained for.
type ExplainOptions struct {
	Cores       int
	Concurrency int            // > 0: overrides the concurrency hints
	Provider    hints.Provider // the fast path the server offers; zero: TCP only
	Sizes       []int          // message sizes to place in their rows
}

// Explain resolves the hints of every service of prog (not of its includes)
// and builds each function's table per side, as the runtime would on a
// session whose server offers o.Provider's transport.
func Explain(prog *idl.Program, o ExplainOptions) ([]ExplainSide, error) {
	var out []ExplainSide
	var errs []error
	for _, svc := range prog.Services {
		res, err := svc.ResolveHints()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		modes := map[string]stream.Mode{}
		for _, fn := range svc.AllFunctions() {
			modes[fn.Name] = fn.Stream
		}
		for _, fr := range res.Functions {
			mode := ""
			if m := modes[fr.Name]; m != stream.None {
				mode = m.String()
			}
			for _, side := range []hints.Side{hints.SideClient, hints.SideServer} {
				r, peer := fr.Side(side), fr.Side(1-side)
				var hs []ExplainHint
				for _, v := range r.Values {
					hs = append(hs, ExplainHint{Key: v.Key, Value: v.Value, Origin: v.Origin.Describe()})
				}
				t := hints.TableFor(r.Set, hints.Env{Side: side, Transport: hints.Granted(r.Set.Transport, o.Provider.Transport),
					Provider: o.Provider, Cores: o.Cores, Concurrency: o.Concurrency, PeerPayload: peer.Set.PayloadSize,
					Stream: modes[fr.Name]})
				var at []ExplainAt
				for _, n := range o.Sizes {
					at = append(at, ExplainAt{Size: n, Row: t.RowFor(n)})
				}
				out = append(out, ExplainSide{Service: svc.Name, Function: fr.Name, Side: side.String(), Stream: mode,
					Table: t, At: at, Hints: hs})
			}
		}
	}
	return out, errors.Join(errs...)
}
