package codegen

import (
	"errors"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// ExplainHint is one resolved hint of one side with its origin.
type ExplainHint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Origin string `json:"origin"` // "default" or file:line:col (level)
}

// ExplainRow is the plan of one side of one function for one message size.
type ExplainRow struct {
	Service     string        `json:"service"`
	Function    string        `json:"function"`
	Side        string        `json:"side"`         // client | server
	MessageSize int           `json:"message_size"` // bytes
	SizeFrom    string        `json:"size_from"`    // payload_size | --sizes
	Transport   string        `json:"transport"`
	Protocol    string        `json:"protocol"`
	Polling     string        `json:"polling"`
	Plan        hints.Plan    `json:"plan"`
	Hints       []ExplainHint `json:"hints"`
}

// Explain resolves the hints of every service of prog (not of its includes)
// and plans each function's sides: at the payload_size hint of that side
// when set, else at each of sizes.
func Explain(prog *idl.Program, cores int, sizes []int) ([]ExplainRow, error) {
	var rows []ExplainRow
	var errs []error
	for _, svc := range prog.Services {
		res, err := svc.ResolveHints()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, fr := range res.Functions {
			for _, side := range []hints.Side{hints.SideClient, hints.SideServer} {
				r := fr.Side(side)
				var hs []ExplainHint
				for _, v := range r.Values {
					hs = append(hs, ExplainHint{Key: v.Key, Value: v.Value, Origin: v.Origin.Describe()})
				}
				szs, from := sizes, "--sizes"
				if r.Set.PayloadSize > 0 {
					szs, from = []int{r.Set.PayloadSize}, "payload_size"
				}
				for _, sz := range szs {
					plan := hints.PlanFor(r.Set, cores, sz)
					rows = append(rows, ExplainRow{
						Service: svc.Name, Function: fr.Name, Side: side.String(),
						MessageSize: sz, SizeFrom: from,
						Transport: plan.Transport.String(), Protocol: plan.Protocol.String(),
						Polling: plan.Polling.String(), Plan: plan, Hints: hs,
					})
				}
			}
		}
	}
	return rows, errors.Join(errs...)
}
