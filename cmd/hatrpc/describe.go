package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

func loadIDL(file string, includes []string) (*generic.IDL, error) {
	return generic.Load(file, generic.WithIncludeDirs(includes...))
}

func newListCmd() *cobra.Command {
	var includes []string
	cmd := &cobra.Command{
		Use:   "list FILE.thrift",
		Short: "List the services with their functions, and the types",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := loadIDL(args[0], includes)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, s := range d.Services() {
				fmt.Fprintln(w, s.QualifiedName)
				for _, fn := range s.Decl.AllFunctions() {
					fmt.Fprintf(w, "  %s.%s\n", s.QualifiedName, fn.Name)
				}
			}
			var types []string
			for _, p := range d.Programs() {
				prefix := ""
				if p != d.Program {
					prefix = p.Name + "."
				}
				for _, s := range p.Structs {
					types = append(types, structKeyword(s)+" "+prefix+s.Name)
				}
				for _, e := range p.Enums {
					types = append(types, "enum "+prefix+e.Name)
				}
				for _, t := range p.Typedefs {
					types = append(types, "typedef "+prefix+t.Name)
				}
			}
			if len(types) > 0 {
				fmt.Fprintln(w, "types:")
				for _, t := range types {
					fmt.Fprintln(w, "  "+t)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&includes, "include", "I", nil, "directory to search for included files (repeatable)")
	return cmd
}

func newDescribeCmd() *cobra.Command {
	var includes []string
	cmd := &cobra.Command{
		Use:   "describe FILE.thrift [Service[.function]|Type]",
		Short: "Show a service, a function or a type as declared (every service without a name)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := loadIDL(args[0], includes)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(args) == 1 {
				for i, s := range d.Services() {
					if i > 0 {
						fmt.Fprintln(w)
					}
					describeService(w, s.Decl)
				}
				return nil
			}
			return describeName(w, d, args[1])
		},
	}
	cmd.Flags().StringSliceVarP(&includes, "include", "I", nil, "directory to search for included files (repeatable)")
	return cmd
}

func describeName(w io.Writer, d *generic.IDL, name string) error {
	if svc, err := d.Service(name); err == nil {
		describeService(w, svc.Decl)
		return nil
	}
	if i := strings.LastIndex(name, "."); i > 0 {
		if svc, err := d.Service(name[:i]); err == nil {
			fn, err := svc.Function(name[i+1:])
			if err != nil {
				return err
			}
			describeFunction(w, fn, "")
			return nil
		}
	}
	t, err := d.Type(name)
	if err != nil {
		return fmt.Errorf("%q is no service, function or type of %s", name, d.Program.Path)
	}
	switch x := t.(type) {
	case *idl.Struct:
		writeDoc(w, x.Doc, "")
		fmt.Fprintf(w, "%s %s {\n", structKeyword(x), x.Name)
		for _, f := range x.Fields {
			writeDoc(w, f.Doc, "  ")
			fmt.Fprintf(w, "  %s\n", fieldString(f))
		}
		fmt.Fprintln(w, "}")
	case *idl.Enum:
		writeDoc(w, x.Doc, "")
		fmt.Fprintf(w, "enum %s {\n", x.Name)
		for _, v := range x.Values {
			fmt.Fprintf(w, "  %s = %d\n", v.Name, v.Value)
		}
		fmt.Fprintln(w, "}")
	case *idl.Typedef:
		writeDoc(w, x.Doc, "")
		fmt.Fprintf(w, "typedef %s %s\n", typeString(x.Type), x.Name)
	}
	return nil
}

func structKeyword(s *idl.Struct) string {
	switch s.Kind {
	case idl.StructKindUnion:
		return "union"
	case idl.StructKindException:
		return "exception"
	}
	return "struct"
}

func describeService(w io.Writer, s *idl.Service) {
	writeDoc(w, s.Doc, "")
	ext := ""
	if s.Extends != nil {
		ext = " extends " + s.ExtendsName
	}
	fmt.Fprintf(w, "service %s%s {\n", s.Name, ext)
	for _, fn := range s.AllFunctions() {
		describeFunction(w, fn, "  ")
	}
	fmt.Fprintln(w, "}")
}

func describeFunction(w io.Writer, fn *idl.Function, indent string) {
	writeDoc(w, fn.Doc, indent)
	var b strings.Builder
	b.WriteString(indent)
	if fn.Oneway {
		b.WriteString("oneway ")
	}
	if fn.Returns == nil {
		b.WriteString("void")
	} else {
		b.WriteString(typeString(fn.Returns))
	}
	b.WriteString(" " + fn.Name + "(" + fieldList(fn.Args) + ")")
	if len(fn.Throws) > 0 {
		b.WriteString(" throws (" + fieldList(fn.Throws) + ")")
	}
	fmt.Fprintln(w, b.String())
}

func writeDoc(w io.Writer, doc, indent string) {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return
	}
	for _, line := range strings.Split(doc, "\n") {
		fmt.Fprintf(w, "%s// %s\n", indent, strings.TrimSpace(line))
	}
}

func fieldList(fs []*idl.Field) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fieldString(f)
	}
	return strings.Join(parts, ", ")
}

func fieldString(f *idl.Field) string {
	req := ""
	switch f.Req {
	case idl.Required:
		req = "required "
	case idl.Optional:
		req = "optional "
	}
	return strconv.Itoa(f.ID) + ": " + req + typeString(f.Type) + " " + f.Name
}

func typeString(t *idl.Type) string {
	switch t.Kind {
	case idl.KindList:
		return "list<" + typeString(t.Elem) + ">"
	case idl.KindSet:
		return "set<" + typeString(t.Elem) + ">"
	case idl.KindMap:
		return "map<" + typeString(t.Key) + ", " + typeString(t.Elem) + ">"
	case idl.KindVoid:
		return "void"
	}
	return t.Name
}
