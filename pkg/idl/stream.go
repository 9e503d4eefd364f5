package idl

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/stream"
)

// streamMode reads f's `(streaming.mode="...")` annotation (Kitex's
// spelling, which Apache's compiler accepts and ignores) and checks what
// can be checked before names resolve: a stream is not oneway, returns a
// value and takes one argument. stream.ParseMode is the one reader of the
// annotation's values.
func (l *loader) streamMode(f *Function, a *astFunction) {
	var seen *Annotation
	for i := range f.Annotations {
		an := &f.Annotations[i]
		if an.Key != stream.AnnotationKey {
			continue
		}
		if seen != nil {
			l.diags.errorf(ErrStream, an.Pos, fmt.Sprintf("function %s.%s has more than one %s annotation (first at %s)",
				f.Service.Name, f.Name, stream.AnnotationKey, seen.Pos))
			continue
		}
		seen = an
		m, ok := stream.ParseMode(an.Value)
		if !ok {
			l.diags.errorf(ErrStream, an.Pos, fmt.Sprintf(`unknown %s %q on function %s.%s: want "server", "client" or "bidirectional"`,
				stream.AnnotationKey, an.Value, f.Service.Name, f.Name))
			continue
		}
		f.Stream = m
	}
	if f.Stream == stream.None {
		return
	}
	where := "streaming function " + f.Service.Name + "." + f.Name
	if f.Oneway {
		l.diags.errorf(ErrStream, seen.Pos, fmt.Sprintf("oneway function %s.%s cannot stream: a stream has replies (%s=%q)",
			f.Service.Name, f.Name, stream.AnnotationKey, seen.Value))
	}
	if f.Returns == nil && !f.Oneway {
		l.diags.errorf(ErrStream, toPos(a.Returns.Pos), where+" must return a struct, not void: the server's messages are that struct")
	}
	if len(f.Args) != 1 {
		l.diags.errorf(ErrStream, f.Pos, fmt.Sprintf("%s must take exactly one argument, a struct: the client's messages are that struct (it takes %d)",
			where, len(f.Args)))
	}
}

// unstreamable are the hints a stream cannot honour, and why: a stream is
// never sent again, so retrying and hedging do not apply to it, and its
// handler's context lives as long as the stream.
var unstreamable = map[string]string{
	"idempotent": neverRetried,
	"hedge":      neverRetried,
	"retries":    neverRetried,
	"borrow_ctx": "its handler's context lasts as long as the stream; a lane reuses only a unary call's",
}

const neverRetried = "a stream is never retried or hedged"

// checkStream checks, once names resolve, that a streaming function's
// messages are structs and that its own hints apply to a stream.
func (l *loader) checkStream(s *Service, f *Function) {
	if f.Stream == stream.None {
		// A window and borrowed messages are a stream's; at the service
		// level they concern the service's streaming functions only.
		for _, g := range f.Hints {
			for _, e := range g.Entries {
				if e.Key == "stream_window" || e.Key == "borrow_msgs" {
					l.diags.errorf(ErrStream, e.Pos, fmt.Sprintf("hint %q applies to streaming functions only: %s.%s is not one (declare it with %s)",
						e.Key, s.Name, f.Name, stream.AnnotationKey))
				}
			}
		}
		return
	}
	where := "streaming function " + s.Name + "." + f.Name
	if len(f.Args) == 1 && resolved(f.Args[0].Type) {
		if what := notStruct(f.Args[0].Type); what != "" {
			l.diags.errorf(ErrStream, f.Args[0].Type.Pos, fmt.Sprintf("%s: argument %q has type %s, %s: the client's messages must be a struct",
				where, f.Args[0].Name, f.Args[0].Type.Name, what))
		}
	}
	if f.Returns != nil && resolved(f.Returns) {
		if what := notStruct(f.Returns); what != "" {
			l.diags.errorf(ErrStream, f.Returns.Pos, fmt.Sprintf("%s: return type %s is %s: the server's messages must be a struct",
				where, f.Returns.Name, what))
		}
	}
	for _, g := range f.Hints {
		for _, e := range g.Entries {
			if why, ok := unstreamable[e.Key]; ok {
				l.diags.errorf(ErrStream, e.Pos, fmt.Sprintf("hint %q does not apply to %s: %s", e.Key, where, why))
			}
		}
	}
}

// notStruct says why t cannot be a stream's message ("" when it can).
func notStruct(t *Type) string {
	tt := t.TrueType()
	switch {
	case tt == nil || tt.Kind != KindStruct || tt.Struct == nil:
		return "not a struct"
	case tt.Struct.Kind == StructKindException:
		return "an exception, not a struct"
	}
	return ""
}
